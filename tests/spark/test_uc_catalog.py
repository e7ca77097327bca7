"""Stock delta-spark 4.4 + Unity Catalog's Spark connector (``UCSingleCatalog``) against the owner.

No project code runs in the JVM: the owner is judged as a Unity Catalog server by the real client. The same
scenario runs in both modes of ``spark.sql.catalog.<c>.deltaRestApi.enabled``:

* ``true`` (the default of delta-spark and the connector: the Delta REST Catalog API, ``/delta/v1/...``);
* ``false`` (the older API: ``/staging-tables``, ``/tables``, ``/delta/preview/commits``).

The scenario: CREATE SCHEMA; CREATE TABLE (managed, partitioned); two INSERTs from one session; two INSERTs
from two processes released at the same instant (both must succeed); from a fresh process SELECT and DESCRIBE
HISTORY, ALTER TABLE SET TBLPROPERTIES, ALTER TABLE ADD COLUMNS, one more INSERT; DROP TABLE. Every Spark
"process" is tests/spark/uc_sql.py in a subprocess (one JVM each). The evidence is independent of Spark's own
answers: the owner's commit list and its database rows (every version 1..7 ratified once, with the staged
file's checksum), the published ``_delta_log/<v:020>.json`` files (0..7, each the ratified staged bytes), and
delta-rs reading the published log.

The jars: ``<repository root>/../shared/jars/delta-spark-4.4.0-uc`` (or ``$COMMIT_OWNER_UC_SPARK_JARS``), see
tests/spark/local_jars.py; without them the tests skip loudly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from client.contract.layout import delta_file
from tests.conftest import make_backend
from tests.security.conftest import call
from tests.spark.local_jars import UC_JARS_ENV, require_jar_folder
from tests.support import wait_until
from tests.unity.sail import UC, Owner, local_path, sha256, start_owner

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = Path(__file__).with_name("uc_sql.py")
# What the scenario leaves, version by version.
OPERATIONS = {0: "CREATE TABLE", 1: "WRITE", 2: "WRITE", 3: "WRITE", 4: "WRITE", 5: "SET TBLPROPERTIES",
              6: "ADD COLUMNS", 7: "WRITE"}
LATEST = max(OPERATIONS)
ROWS_BEFORE_ALTER = sorted([(1, "a"), (2, "b"), (3, "a"), (4, "c"), (10, "b"), (11, "a"), (20, "b"), (21, "c")], key=repr)
ROWS_AT_END = sorted([(i, p, None) for i, p in ROWS_BEFORE_ALTER] + [(30, "c", "x")], key=repr)


@pytest.fixture(scope="module")
def jars() -> Path:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip("SPARK TESTS SKIPPED: pyspark is not installed (pip install 'delta-commit-owner[spark]')")
    if shutil.which("java") is None:
        pytest.skip("SPARK TESTS SKIPPED: `java` is not on PATH (install a JDK 17)")
    folder = require_jar_folder(UC_JARS_ENV, "delta-spark 4.4 + Unity Catalog Spark connector")
    from client.spark.unity_catalog import unity_catalog_jars

    unity_catalog_jars(folder)  # a folder without the connector fails here, naming what is missing
    return folder


@pytest.fixture(scope="module")
def owner(request: pytest.FixtureRequest, jars: Path) -> Iterator[Owner]:
    """``commit-owner serve`` on SQLite + local disk with bearer tokens on and its default settings (the
    backfiller publishes too); UC catalogs ``legacy`` and ``rest``, one per mode. Spark uses the admin token."""
    o = start_owner(make_backend(request, "sqlite", "local", "uc-spark"), "legacy")
    o.uc("POST", "/catalogs", {"name": "rest"})
    yield o
    o.service.stop()


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

    @property
    def catalog(self) -> str:
        return "rest" if self.rest else "legacy"

    @property
    def table(self) -> str:
        return f"{self.catalog}.s.t"

    def start(self, name: str, steps: list[Any]) -> SparkProcess:
        plan = {"uri": self.owner.service.endpoint, "token": self.owner.token, "catalog": self.catalog,
                "delta_rest_api": self.rest, "jars": str(self.jars), "steps": steps}
        out, err = self.work / f"{name}.out", self.work / f"{name}.err"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen([sys.executable, str(SCRIPT), json.dumps(plan)], stdout=o, stderr=e, cwd=self.work,
                                    env={**_env(), "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
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
        lines = []
        for raw in self.owner.service.log_text().splitlines():
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if rec.get("logger") == "commit_owner.access" and int(rec.get("status", 0)) >= 400:
                lines.append(rec["msg"])
        return lines[-12:]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")} | {"SPARK_LOCAL_IP": "127.0.0.1"}


def _rows(result: dict[str, Any], *cols: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[c] for c in cols) for r in result["rows"]), key=repr)


def _history(result: dict[str, Any]) -> dict[int, str]:
    versions = [int(r["version"]) for r in result["rows"]]
    assert len(versions) == len(set(versions)), versions
    return {int(r["version"]): r["operation"] for r in result["rows"]}


def _wait_ready(gate: Path, n: int, procs: list[SparkProcess], s: Scenario, timeout: float = 600) -> None:
    """Wait until ``n`` processes wait at ``gate``; a process that exits first fails the test with its error."""
    wait_until(lambda: len(list(gate.parent.glob(gate.name + ".ready-*"))) >= n
               or any(p.proc.poll() is not None for p in procs), timeout=timeout, what=f"{n} process(es) at {gate.name}")
    for p in procs:
        if p.proc.poll() is not None:
            s.expect_ok(p, p.results(), -1)  # fails naming the statement that failed
            pytest.fail(f"a Spark process ended before {gate.name}: {p.results()}")


def _judge_owner(s: Scenario, table_id: str, location: str, latest: int) -> None:
    """The owner ratified every version 1..latest exactly once, each the staged file the writer named, and
    ``_delta_log/<v>.json`` for 0..latest is published, in order, with the ratified bytes."""
    listed = s.owner.uc("GET", "/delta/preview/commits",
                        {"table_id": table_id, "table_uri": location, "start_version": 0})
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


# Reader features delta-rs 1.6 refuses although they do not change what a reader of the published log sees:
# catalogManaged ("Max catalog version is required when loading a catalog-managed table", and its Python API
# cannot pass one) and vacuumProtocolCheck ("Unsupported table features required: [VacuumProtocolCheck]"; it
# only constrains VACUUM). delta-spark 4.4 puts both in every catalog-managed table it creates.
DELTA_RS_REFUSED = ("catalogManaged", "vacuumProtocolCheck")


def _delta_rs_rows(location: str, work: Path) -> list[tuple[Any, ...]]:
    """(id, part, note) as delta-rs reads the published log: the table itself if delta-rs opens it, else a copy
    of its published ``<v>.json`` files with only the names in DELTA_RS_REFUSED taken out of the protocol
    (data files linked, not copied; ``_staged_commits`` left out)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    def read(path: Path) -> list[tuple[Any, ...]]:
        dt = DeltaTable(str(path))
        got = pa.table(QueryBuilder().register("t", dt).execute("SELECT id, part, note FROM t").read_all()).to_pylist()
        return sorted(((r["id"], r["part"], r["note"]) for r in got), key=repr)

    try:
        return read(local_path(location))
    except Exception as e:  # noqa: BLE001
        if "Max catalog version" not in str(e) and "VacuumProtocolCheck" not in str(e):
            raise
    return read(_published_copy(local_path(location), work / "delta-rs-copy"))


def _published_copy(table: Path, copy: Path) -> Path:
    (copy / "_delta_log").mkdir(parents=True)
    for entry in table.iterdir():
        if entry.name != "_delta_log":
            (copy / entry.name).symlink_to(entry)
    for f in sorted((table / "_delta_log").glob("*.json")):
        lines = f.read_text().splitlines()
        for i, line in enumerate(lines):
            action = json.loads(line)
            if "protocol" in action:
                for key in ("readerFeatures", "writerFeatures"):
                    action["protocol"][key] = [x for x in action["protocol"].get(key, [])
                                               if x not in DELTA_RS_REFUSED]
                lines[i] = json.dumps(action)
        (copy / "_delta_log" / f.name).write_text("\n".join(lines) + "\n")
    return copy


@pytest.mark.parametrize("rest", [
    pytest.param(False, id="deltaRestApi=false"),
    pytest.param(True, id="deltaRestApi=true"),
])
def test_stock_delta_spark_through_uc_single_catalog(owner: Owner, jars: Path, tmp_path: Path, rest: bool) -> None:
    s = Scenario(owner, jars, tmp_path, rest)
    t = s.table
    created, go, raced, judged = (tmp_path / g for g in ("created", "go", "raced", "judged"))
    started = time.monotonic()
    # Three JVMs, started together so that their start-up overlaps: `first` creates the table and INSERTs twice,
    # then races `second` (which loads the table once it exists); `fresh` touches the table only after the race.
    first = s.start("first", [f"CREATE SCHEMA {s.catalog}.s",
                              f"CREATE TABLE {t} (id INT, part STRING) USING delta PARTITIONED BY (part)",
                              f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
                              f"INSERT INTO {t} VALUES (3, 'a'), (4, 'c')",
                              {"wait": str(go)},
                              f"INSERT INTO {t} VALUES (10, 'b'), (11, 'a')"])
    second = s.start("second", [{"wait": str(created)}, f"SELECT count(*) AS n FROM {t}", {"wait": str(go)},
                                f"INSERT INTO {t} VALUES (20, 'b'), (21, 'c')"])
    fresh_steps: list[Any] = [{"wait": str(raced)},
                              f"SELECT id, part FROM {t}", f"DESCRIBE HISTORY {t}",
                              f"ALTER TABLE {t} SET TBLPROPERTIES ('commit_owner.test' = 'uc-spark')",
                              f"ALTER TABLE {t} ADD COLUMNS (note STRING)",
                              f"INSERT INTO {t} VALUES (30, 'c', 'x')",
                              f"SELECT id, part, note FROM {t}", f"DESCRIBE HISTORY {t}", f"SHOW TBLPROPERTIES {t}",
                              {"wait": str(judged)},
                              f"DROP TABLE {t}", f"SHOW TABLES IN {s.catalog}.s"]
    fresh = s.start("fresh", fresh_steps)
    try:
        # CREATE SCHEMA, CREATE TABLE (managed, partitioned) and two INSERTs from one session.
        _wait_ready(go, 1, [first], s)
        info = owner.uc("GET", f"/tables/{t}")
        table_id, location = info["table_id"], info["storage_location"]
        assert info["table_type"] == "MANAGED" and info["data_source_format"] == "DELTA"
        assert location.rstrip("/").endswith(table_id), location  # the staging location the owner chose
        assert [c["name"] for c in info["columns"]] == ["id", "part"]
        _judge_owner(s, table_id, location, 2)

        # Two processes INSERT at the same instant, both having loaded the table at version 2.
        created.touch()
        _wait_ready(go, 2, [first, second], s)
        go.touch()
        s.expect_ok(first, first.finish(), 5)
        s.expect_ok(second, second.finish(), 2)
        conflicts = [m for m in owner.service.log_text().splitlines()
                     if "/delta/preview/commits 409" in m or ("/delta/v1/" in m and " 409 " in m)]
        print(f"\n[{t}] racing INSERTs: {len(conflicts)} commit(s) answered 409, retried by delta-spark")
        _judge_owner(s, table_id, location, 4)

        # A fresh process reads, alters, INSERTs, waits at `judged` while the table is looked at, then drops it.
        raced.touch()
        _wait_ready(judged, 1, [fresh], s)
        first_select, first_history, _, _, _, final_select, final_history, props = fresh.results()
        assert _rows(first_select, "id", "part") == ROWS_BEFORE_ALTER
        assert _history(first_history) == {v: op for v, op in OPERATIONS.items() if v <= 4}
        assert _rows(final_select, "id", "part", "note") == ROWS_AT_END
        assert _history(final_history) == OPERATIONS
        assert {r["key"]: r["value"] for r in props["rows"]}.get("commit_owner.test") == "uc-spark"
        _judge_owner(s, table_id, location, LATEST)
        # What the catalog's own record says after ALTER: the Delta REST Catalog API carries the new columns and
        # properties (set-columns, set-properties); the older API sends properties only (docs/spark.md).
        after = owner.uc("GET", f"/tables/{t}")
        print(f"[{t}] the owner's columns after ADD COLUMNS: {[c['name'] for c in after['columns']]}, "
              f"commit_owner.test in its properties: {'commit_owner.test' in after['properties']}")
        if s.rest:
            assert [c["name"] for c in after["columns"]] == ["id", "part", "note"]
            assert after["properties"].get("commit_owner.test") == "uc-spark"
        assert _delta_rs_rows(location, tmp_path) == ROWS_AT_END

        # DROP TABLE: the name is gone; the owner keeps the ratified history and never deletes data.
        files = set(local_path(location).rglob("*"))
        judged.touch()
        results = s.expect_ok(fresh, fresh.finish(), 10)
        assert results[-1]["rows"] == []
        status, payload, _ = call(owner.service.endpoint, "GET", f"{UC}/tables/{t}", token=owner.token)
        assert status == 404 and payload["error_code"] == "TABLE_NOT_FOUND", payload
        assert set(local_path(location).rglob("*")) >= files
        assert sorted(owner.ratified(table_id)) == list(range(1, LATEST + 1))
        print(f"[{t}] scenario: {time.monotonic() - started:.0f} s")
    finally:
        for p in (first, second, fresh):
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait(30)
