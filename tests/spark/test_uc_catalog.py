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
delta-rs reading the published log. After the first two INSERTs and at the end, Unity Catalog's record and the
Delta REST load name the newest version and its commit's timestamp (issue 42 item 5).

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

from client.contract.layout import delta_file
from tests.conftest import make_backend
from tests.security.conftest import call
from tests.spark.uc_support import (
    Scenario,
    access_log,
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


def _delta_rs_rows(location: str, work: Path, columns: tuple[str, ...] = ("id", "part", "note")
                   ) -> list[tuple[Any, ...]]:
    """``columns`` as delta-rs reads the published log: the table itself if delta-rs opens it, else a copy
    of its published ``<v>.json`` files with only the names in DELTA_RS_REFUSED taken out of the protocol
    (data files linked, not copied; ``_staged_commits`` left out)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    def read(path: Path) -> list[tuple[Any, ...]]:
        dt = DeltaTable(str(path))
        got = pa.table(QueryBuilder().register("t", dt).execute(f"SELECT {', '.join(columns)} FROM t").read_all())
        return sorted((tuple(r[c] for c in columns) for r in got.to_pylist()), key=repr)

    try:
        return read(local_path(location))
    except Exception as e:  # noqa: BLE001
        if "Max catalog version" not in str(e) and "VacuumProtocolCheck" not in str(e):
            raise
    return read(_published_copy(local_path(location), work / f"delta-rs-copy-{local_path(location).name}"))


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


def _catalog_follows(s: Scenario, location: str, version: int) -> None:
    """The catalog's answers follow the table (issue 42 item 5, decision 74): Unity Catalog's record and the Delta
    REST load name ``version`` and its commit's inCommitTimestamp (as the published ``<v>.json`` says it),
    whichever API delta-spark committed through."""
    lines = local_path(delta_file(location, version)).read_text().splitlines()
    ict = next(a["commitInfo"]["inCommitTimestamp"] for a in map(json.loads, lines) if "commitInfo" in a)
    info = s.owner.uc("GET", f"/tables/{s.table}")
    loaded = s.owner.uc("GET", f"/delta/v1/catalogs/{s.catalog}/schemas/s/tables/t")
    meta = loaded["metadata"]
    for props in (info["properties"], meta["properties"]):
        assert (props.get("delta.lastUpdateVersion"), props.get("delta.lastCommitTimestamp")) == (
            str(version), str(ict)), props
    assert (meta.get("last-commit-version"), meta.get("last-commit-timestamp-ms"),
            loaded["latest-table-version"]) == (version, ict, version), loaded
    assert info["updated_at"] >= ict and meta["updated-time"] >= ict, (info["updated_at"], meta["updated-time"], ict)


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
        _catalog_follows(s, location, 2)

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
        _catalog_follows(s, location, LATEST)
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


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_owner(request: pytest.FixtureRequest, uc_jars: Path) -> Iterator[Owner]:
    """An owner as ``owner``'s, on each store, with the one catalog ``rest`` (the Delta REST Catalog API mode)."""
    o = start_owner(make_backend(request, request.param, "local", f"uc-spark-dml-{request.param}"), "rest")
    yield o
    o.service.stop()


# What the DML scenario leaves in each table, version by version (DESCRIBE HISTORY's operation names).
DML_OPERATIONS = {0: "CREATE TABLE", 1: "WRITE", 2: "UPDATE", 3: "DELETE", 4: "MERGE"}
CTAS_OPERATIONS = {0: "CREATE TABLE AS SELECT", 1: "REPLACE TABLE AS SELECT"}
DML_ROWS = [(1, "A"), (2, "B"), (4, "d")]
RTAS_ROWS = [(2, "B"), (4, "d")]


def test_stock_delta_spark_updates_deletes_merges_and_creates_and_replaces_as_select_through_delta_v1(
        store_owner: Owner, uc_jars: Path, tmp_path: Path) -> None:
    """UPDATE, DELETE, MERGE, CREATE TABLE AS SELECT and REPLACE TABLE AS SELECT on MANAGED tables from one
    delta-spark session over ``/delta/v1``: every version after 0 ratified once through updateTable's
    ``add-commit`` (none through the preview commits), published byte for byte, and the rows read back by
    delta-spark, delta-rs (the published log) and DuckDB (by name, through the owner)."""
    owner = store_owner
    s = Scenario(owner, uc_jars, tmp_path, rest=True)
    t, c = f"{s.catalog}.w.t", f"{s.catalog}.w.c"
    steps = [f"CREATE SCHEMA {s.catalog}.w",
             f"CREATE TABLE {t} (id INT, v STRING) USING delta",
             f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')",
             f"UPDATE {t} SET v = 'B' WHERE id = 2",
             f"DELETE FROM {t} WHERE id = 3",
             f"MERGE INTO {t} AS x USING (SELECT * FROM VALUES (1, 'A'), (4, 'd') AS y(id, v)) AS y ON x.id = y.id "
             "WHEN MATCHED THEN UPDATE SET v = y.v WHEN NOT MATCHED THEN INSERT *",
             f"SELECT id, v FROM {t}", f"DESCRIBE HISTORY {t}",
             f"CREATE TABLE {c} USING delta AS SELECT id, v FROM {t} WHERE id < 4",
             f"SELECT id, v FROM {c}",
             f"REPLACE TABLE {c} USING delta AS SELECT id, v FROM {t} WHERE id >= 2",
             f"SELECT id, v FROM {c}", f"DESCRIBE HISTORY {c}"]
    p = s.start("dml", steps)
    try:
        results = s.expect_ok(p, p.finish(), len(steps))
    finally:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(30)
    t_select, t_history, _, c_created, _, c_replaced, c_history = results[6:]
    assert result_rows(t_select, "id", "v") == DML_ROWS
    assert history(t_history) == DML_OPERATIONS
    assert result_rows(c_created, "id", "v") == [(1, "A"), (2, "B")]
    assert result_rows(c_replaced, "id", "v") == RTAS_ROWS
    assert history(c_history) == CTAS_OPERATIONS

    records = {n: owner.uc("GET", f"/tables/{s.catalog}.w.{n}") for n in ("t", "c")}
    for name, latest in (("t", 4), ("c", 1)):
        info = records[name]
        assert (info["table_type"], info["data_source_format"]) == ("MANAGED", "DELTA")
        judge_owner(s, info["table_id"], info["storage_location"], latest)
    # Every commit came through the Delta REST Catalog API: one updateTable per version, none through preview.
    log = access_log(owner.service.log_text())
    for name, latest in (("t", 4), ("c", 1)):
        posts = [r for r in log if r["msg"].startswith(
            f"POST {UC}/delta/v1/catalogs/{s.catalog}/schemas/w/tables/{name} 200")]
        assert len(posts) >= latest, [r["msg"] for r in log if "/delta/" in r["msg"]]
    assert not [r for r in log if r["msg"].startswith(f"POST {UC}/delta/preview/commits")]
    assert owner.uc("GET", f"/delta/v1/catalogs/{s.catalog}/schemas/w/tables/t")["latest-table-version"] == 4

    # Other readers: delta-rs (the published log) and DuckDB by name through the owner.
    assert _delta_rs_rows(records["t"]["storage_location"], tmp_path, ("id", "v")) == DML_ROWS
    assert _delta_rs_rows(records["c"]["storage_location"], tmp_path, ("id", "v")) == RTAS_ROWS
    from tests.unity.test_duckdb import connect

    con = connect(owner, "w")
    assert con.execute("SELECT id, v FROM uc.w.t ORDER BY id").fetchall() == DML_ROWS
    assert con.execute("SELECT id, v FROM uc.w.c ORDER BY id").fetchall() == RTAS_ROWS
