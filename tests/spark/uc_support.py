"""What the tests of stock delta-spark 4.4 + ``UCSingleCatalog`` against the owner share: the jar folder, Spark
"processes" (tests/spark/uc_sql.py in a subprocess, one JVM each) and the judgement of the owner's commit rows
and the published ``_delta_log`` (tests/spark/test_uc_catalog.py, tests/spark/test_uc_faults.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from client.contract.layout import delta_file
from tests.support import wait_until
from tests.unity.sail import Owner, local_path, sha256

SCRIPT = Path(__file__).with_name("uc_sql.py")


@dataclass
class SparkProcess:
    """One ``uc_sql.py`` run: a fresh JVM and SparkSession."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def results(self) -> list[dict[str, Any]]:
        text = self.out.read_text() if self.out.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def finish(self, timeout: float = 600) -> list[dict[str, Any]]:
        self.proc.wait(timeout)
        return self.results()


@dataclass
class Scenario:
    owner: Owner
    jars: Path
    work: Path
    rest: bool
    #: Where Spark sends its requests when not to the owner itself (a proxy in front of it).
    uri: str | None = None

    @property
    def catalog(self) -> str:
        return "rest" if self.rest else "legacy"

    @property
    def table(self) -> str:
        return f"{self.catalog}.s.t"

    def start(self, name: str, steps: list[Any]) -> SparkProcess:
        plan = {"uri": self.uri or self.owner.service.endpoint, "token": self.owner.token, "catalog": self.catalog,
                "delta_rest_api": self.rest, "jars": str(self.jars), "steps": steps}
        out, err = self.work / f"{name}.out", self.work / f"{name}.err"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen([sys.executable, str(SCRIPT), json.dumps(plan)], stdout=o, stderr=e, cwd=self.work,
                                    env={**spark_env(), "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        return SparkProcess(proc, out, err)

    def expect_ok(self, p: SparkProcess, results: list[dict[str, Any]], statements: int | None = None
                  ) -> list[dict[str, Any]]:
        """No statement failed (and ``statements`` ran, when given); else fail with Spark's error and the
        requests the owner refused."""
        failed = [r for r in results if not r["ok"]]
        if failed or (statements is not None and len(results) != statements) or p.proc.returncode not in (0, None):
            what = (f"`{failed[0]['sql']}` failed: {failed[0]['error'][:2500]}" if failed else
                    f"exit {p.proc.returncode} after {len(results)} statements: "
                    f"{p.err.read_text(errors='replace')[-2500:]}")
            pytest.fail(f"{what}\nthe owner refused: {self.refused()}")
        return results

    def refused(self) -> list[str]:
        """The owner's access-log lines of requests answered with a 4xx/5xx (what delta-spark met)."""
        return [r["msg"] for r in access_log(self.owner.service.log_text()) if int(r.get("status", 0)) >= 400][-12:]


def access_log(text: str) -> list[dict[str, Any]]:
    """The access-log records (``commit_owner.access``: method, path, status, msg) of an owner's JSON log."""
    out = []
    for raw in text.splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("logger") == "commit_owner.access":
            out.append(rec)
    return out


def spark_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")} | {"SPARK_LOCAL_IP": "127.0.0.1"}


def result_rows(result: dict[str, Any], *cols: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[c] for c in cols) for r in result["rows"]), key=repr)


def history(result: dict[str, Any]) -> dict[int, str]:
    versions = [int(r["version"]) for r in result["rows"]]
    assert len(versions) == len(set(versions)), versions
    return {int(r["version"]): r["operation"] for r in result["rows"]}


def wait_ready(gate: Path, n: int, procs: list[SparkProcess], s: Scenario, timeout: float = 600) -> None:
    """Wait until ``n`` processes wait at ``gate``; a process that exits first fails the test with its error."""
    wait_until(lambda: len(list(gate.parent.glob(gate.name + ".ready-*"))) >= n
               or any(p.proc.poll() is not None for p in procs), timeout=timeout, what=f"{n} process(es) at {gate.name}")
    for p in procs:
        if p.proc.poll() is not None:
            s.expect_ok(p, p.results(), -1)  # fails naming the statement that failed
            pytest.fail(f"a Spark process ended before {gate.name}: {p.results()}")


def judge_owner(s: Scenario, table_id: str, location: str, latest: int) -> None:
    """The owner ratified every version 1..latest exactly once, each the staged file the writer named, and
    ``_delta_log/<v>.json`` for 0..latest is published, in order, with the ratified bytes."""
    listed = {"commits": [], "latest_table_version": None}
    start = 0
    while True:  # every page (get_commits_page_size), as a UC client reads them: on from the version after the last
        page = s.owner.uc("GET", "/delta/preview/commits",
                          {"table_id": table_id, "table_uri": location, "start_version": start})
        listed["commits"] += page["commits"]
        listed["latest_table_version"] = page["latest_table_version"]
        if not page["commits"] or max(c["version"] for c in page["commits"]) >= page["latest_table_version"]:
            break
        start = max(c["version"] for c in page["commits"]) + 1
    versions = [c["version"] for c in listed["commits"]]
    assert sorted(versions) == list(range(1, latest + 1)), listed
    assert listed["latest_table_version"] == latest
    rows = s.owner.ratified(table_id)  # one row per version, or it fails
    assert sorted(rows) == list(range(1, latest + 1))
    log = local_path(location) / "_delta_log"
    for c in listed["commits"]:
        name, size, digest = rows[c["version"]]
        assert c["file_name"] == name and c["file_size"] == size
        staged = (log / "_staged_commits" / name).read_bytes()
        assert (len(staged), sha256(staged)) == (size, digest), f"version {c['version']}: the staged file changed"
    wait_until(lambda: all(local_path(delta_file(location, v)).exists() for v in range(latest + 1)), timeout=60,
               what=f"<v>.json published for 0..{latest}")
    published = sorted(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit())
    assert published == list(range(latest + 1)), published
    for v in range(1, latest + 1):
        assert sha256(local_path(delta_file(location, v)).read_bytes()) == rows[v][2], f"<{v}>.json != ratified"
