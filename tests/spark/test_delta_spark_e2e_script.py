"""scripts/spark-delta-e2e: skips loudly without jars, refuses a jar that does not exist, and runs real
delta-spark end to end from local jars.

Maven is unreachable here and in CI, so the end-to-end case takes the jars from $COMMIT_OWNER_DELTA_SPARK_JARS,
else from the folder of real delta-spark 4.4.0 jars built from source beside the repository
(``../shared/jars/delta-spark-4.4.0-uc``, see tests/spark/local_jars.py); with neither it skips with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.local_jars import DELTA_JARS_ENV, require_jar_folder
from tests.support import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "spark-delta-e2e"
JARS_ENV = DELTA_JARS_ENV


def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
         cwd: Path | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != JARS_ENV}
    full.update({"SPARK_LOCAL_IP": "127.0.0.1", **(env or {})})
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=full, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_without_jars_or_maven_it_skips_loudly() -> None:
    unreachable = {"COMMIT_OWNER_MAVEN_URL": f"http://127.0.0.1:{free_port()}/"}  # a closed port
    proc = _run(env=unreachable)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("SKIPPED spark-delta-e2e:") and "--jars" in proc.stdout
    assert _run("--strict", env=unreachable).returncode == 77


def test_a_jar_that_does_not_exist_is_refused_by_name(tmp_path: Path) -> None:
    missing = tmp_path / "delta-spark.jar"
    proc = _run("--jars", str(missing))
    assert proc.returncode != 0 and f"jar not found: {missing}" in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _run(env={JARS_ENV: str(empty)})
    assert proc.returncode != 0 and f"no *.jar in {empty}" in proc.stderr


def test_real_delta_spark_from_local_jars(tmp_path: Path) -> None:
    jars = require_jar_folder(JARS_ENV, "delta-spark")
    # cwd: Spark leaves a spark-warehouse/ folder where it runs
    proc = _run("--batches", "2", env={JARS_ENV: str(jars)}, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "OK spark-delta-e2e: 4 appends from 2 concurrent delta-spark jobs" in proc.stdout
    assert "delta-rs after backfill: version" in proc.stdout
