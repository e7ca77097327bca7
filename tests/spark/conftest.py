"""One SparkSession per test run, with the Java contract fixture compiled and on the driver classpath.

The Java sources under ``tests/spark/java`` are a contract fixture written for this project (same
packages and signatures as delta-spark's commit-coordinator API), not delta-spark; see its README.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

JAVA_SOURCES = Path(__file__).parent / "java"


def _pyspark_jars() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


def _require_java_and_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip("SPARK TESTS SKIPPED: pyspark is not installed (from a clone: .venv/bin/pip install -e '.[spark]')")
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"SPARK TESTS SKIPPED: `{tool}` is not on PATH (install a JDK 17)")


def compile_contract_fixture(out_dir: Path) -> Path:
    """Compile the contract fixture with javac against pyspark's jars; returns the classes folder."""
    sources = sorted(str(p) for p in JAVA_SOURCES.rglob("*.java"))
    classes = out_dir / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    cmd = ["javac", "-nowarn", "-d", str(classes), "-cp", os.path.join(_pyspark_jars(), "*"), *sources]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"javac failed on the contract fixture:\n{proc.stderr}")
    return classes


@pytest.fixture(scope="session")
def contract_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _require_java_and_pyspark()
    return compile_contract_fixture(tmp_path_factory.mktemp("contract-fixture"))


@pytest.fixture(scope="session")
def spark(contract_classes: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The run's only SparkSession (local[4], UTC), with the contract fixture on the driver classpath."""
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (
        SparkSession.builder.master("local[4]")
        .appName("commit-owner-tests")
        .config("spark.driver.extraClassPath", str(contract_classes))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark_owner(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A real ``commit-owner serve`` (SQLite + local disk) that backfills only when asked (batch size 1000),
    so the Spark tests see unbackfilled commits through getCommits and the snapshot reader. It has a
    database of its own: another service's backfiller must not publish these tables."""
    from tests.conftest import make_backend
    from tests.support import Service

    svc = Service(make_backend(request, "sqlite", "local", "spark"), extra_env={"COMMIT_OWNER_BACKFILL_BATCH_SIZE": "1000",
                                            "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": "1000"}).start()
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def uc_jars() -> Path:
    """The folder of delta-spark 4.4 + Unity Catalog's client and Spark connector (tests/spark/local_jars.py),
    or a loud skip."""
    from tests.spark.local_jars import UC_JARS_ENV, require_jar_folder

    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip("SPARK TESTS SKIPPED: pyspark is not installed (from a clone: .venv/bin/pip install -e '.[spark]')")
    if shutil.which("java") is None:
        pytest.skip("SPARK TESTS SKIPPED: `java` is not on PATH (install a JDK 17)")
    folder = require_jar_folder(UC_JARS_ENV, "delta-spark 4.4 + Unity Catalog Spark connector")
    from client.spark.unity_catalog import unity_catalog_jars

    unity_catalog_jars(folder)  # a folder without the connector fails here, naming what is missing
    return folder
