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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_backend
from tests.security.conftest import call
from tests.spark.uc_support import (
    Scenario,
    history,
    judge_owner,
    result_rows,
    wait_ready,
)
from tests.unity.sail import UC, Owner, local_path, start_owner

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# What the scenario leaves, version by version.
OPERATIONS = {0: "CREATE TABLE", 1: "WRITE", 2: "WRITE", 3: "WRITE", 4: "WRITE", 5: "SET TBLPROPERTIES",
              6: "ADD COLUMNS", 7: "WRITE"}
LATEST = max(OPERATIONS)
ROWS_BEFORE_ALTER = sorted([(1, "a"), (2, "b"), (3, "a"), (4, "c"), (10, "b"), (11, "a"), (20, "b"), (21, "c")], key=repr)
ROWS_AT_END = sorted([(i, p, None) for i, p in ROWS_BEFORE_ALTER] + [(30, "c", "x")], key=repr)


@pytest.fixture(scope="module")
def owner(request: pytest.FixtureRequest, uc_jars: Path) -> Iterator[Owner]:
    """``commit-owner serve`` on SQLite + local disk with bearer tokens on and its default settings (the
    backfiller publishes too); UC catalogs ``legacy`` and ``rest``, one per mode. Spark uses the admin token."""
    o = start_owner(make_backend(request, "sqlite", "local", "uc-spark"), "legacy")
    o.uc("POST", "/catalogs", {"name": "rest"})
    yield o
    o.service.stop()




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
def test_stock_delta_spark_through_uc_single_catalog(owner: Owner, uc_jars: Path, tmp_path: Path, rest: bool) -> None:
    s = Scenario(owner, uc_jars, tmp_path, rest)
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
        wait_ready(go, 1, [first], s)
        info = owner.uc("GET", f"/tables/{t}")
        table_id, location = info["table_id"], info["storage_location"]
        assert info["table_type"] == "MANAGED" and info["data_source_format"] == "DELTA"
        assert location.rstrip("/").endswith(table_id), location  # the staging location the owner chose
        assert [c["name"] for c in info["columns"]] == ["id", "part"]
        judge_owner(s, table_id, location, 2)

        # Two processes INSERT at the same instant, both having loaded the table at version 2.
        created.touch()
        wait_ready(go, 2, [first, second], s)
        go.touch()
        s.expect_ok(first, first.finish(), 5)
        s.expect_ok(second, second.finish(), 2)
        conflicts = [m for m in owner.service.log_text().splitlines()
                     if "/delta/preview/commits 409" in m or ("/delta/v1/" in m and " 409 " in m)]
        print(f"\n[{t}] racing INSERTs: {len(conflicts)} commit(s) answered 409, retried by delta-spark")
        judge_owner(s, table_id, location, 4)

        # A fresh process reads, alters, INSERTs, waits at `judged` while the table is looked at, then drops it.
        raced.touch()
        wait_ready(judged, 1, [fresh], s)
        first_select, first_history, _, _, _, final_select, final_history, props = fresh.results()
        assert result_rows(first_select, "id", "part") == ROWS_BEFORE_ALTER
        assert history(first_history) == {v: op for v, op in OPERATIONS.items() if v <= 4}
        assert result_rows(final_select, "id", "part", "note") == ROWS_AT_END
        assert history(final_history) == OPERATIONS
        assert {r["key"]: r["value"] for r in props["rows"]}.get("commit_owner.test") == "uc-spark"
        judge_owner(s, table_id, location, LATEST)
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
