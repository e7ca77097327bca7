"""DuckDB 1.5 (its ``unity_catalog``, ``delta`` and ``httpfs`` extensions, from their PyPI wheels), a client nobody
here wrote, reads the owner's tables by name.

DuckDB takes a table's columns from the list reply (``GET /tables?catalog_name=&schema_name=``), never from the
single table, and accepts only Spark's type text (``bigint``, ``decimal(10,2)``): with an empty ``columns`` it
answers ``SELECT *`` with "SELECT list is empty". The owner fills a table's columns from its Delta log when its
creator sent none, and keeps them current when a ratified commit changes the schema (decision 40).

DuckDB also writes: ``INSERT`` into a MANAGED (catalog-managed) table goes through the Delta REST Catalog API
(``/delta/v1`` loadTable, then updateTable with ``add-commit`` of a staged file its delta-kernel-rs wrote) and the
owner ratifies it; what it cannot do (UPDATE / DELETE, CREATE TABLE, a table of the RFC's ``managedCommit``) it
refuses itself, and nothing changes. docs/delta-rest.md has the table of which engine writes which table kind.
"""

from __future__ import annotations

import datetime
import decimal
import importlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.core.last_commit import LAST_COMMIT_TIMESTAMP, LAST_UPDATE_VERSION
from tests.spark.uc_support import access_log
from tests.unity.sail import Owner, demo_owner, sha256

# What a table's record holds beside its log's configuration: its id, and its last commit (decision 74).
NOT_IN_LOG = ("io.unitycatalog.tableId", LAST_UPDATE_VERSION, LAST_COMMIT_TIMESTAMP)

duckdb = pytest.importorskip("duckdb", reason="DUCKDB TESTS SKIPPED: duckdb is not installed (the test extra has it)")

EXTENSIONS = (("duckdb_extension_httpfs", "httpfs"), ("duckdb_extension_delta", "delta"),
              ("duckdb_extension_unity_catalog", "unity_catalog"))


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def owner(request: pytest.FixtureRequest) -> Iterator[Owner]:
    yield from demo_owner(request, request.param, f"duckdb-{request.param}")


def connect(owner: Owner, default_schema: str | None = None) -> Any:
    """A DuckDB connection with the three extensions loaded from their wheels and the owner's catalog attached as
    ``uc`` (``main`` is a name DuckDB reserves), with ``DEFAULT_SCHEMA`` when given (a MANAGED table needs it)."""
    con = duckdb.connect()
    for module, name in EXTENSIONS:
        folder = Path(importlib.import_module(module).__file__).parent  # type: ignore[arg-type]
        con.execute(f"LOAD '{next(folder.rglob(f'{name}.duckdb_extension'))}'")
    con.execute(f"CREATE SECRET (TYPE UNITY_CATALOG, TOKEN '{owner.token}', ENDPOINT '{owner.service.endpoint}', "
                "AWS_REGION 'us-east-1')")
    schema = "" if default_schema is None else f", DEFAULT_SCHEMA '{default_schema}'"
    con.execute(f"ATTACH '{owner.catalog}' AS uc (TYPE UNITY_CATALOG{schema})")
    return con


def listed(owner: Owner, name: str) -> dict[str, Any]:
    tables = owner.uc("GET", "/tables?catalog_name=main&schema_name=demo")["tables"]
    return next(t for t in tables if t["name"] == name)


def log_fields(location: str, version: int) -> list[dict[str, Any]]:
    path = Path(location[len("file://"):]) / "_delta_log" / f"{version:020}.json"
    for line in path.read_text().splitlines():
        md = json.loads(line).get("metaData")
        if md:
            return list(json.loads(md["schemaString"])["fields"])
    raise AssertionError(f"no metaData in {path}")


def test_duckdb_reads_a_table_created_without_columns_with_the_logs_columns_in_sparks_spelling(owner: Owner) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    location = owner.backend.new_location("typed")
    data = pa.table({
        "b": pa.array([1, 2], pa.int8()), "s": pa.array([10, 20], pa.int16()), "i": pa.array([100, 200], pa.int32()),
        "l": pa.array([1000, 2000], pa.int64()), "word": ["x", "y"], "f": pa.array([1.5, 2.5], pa.float64()),
        "ok": [True, False], "day": pa.array([datetime.date(2026, 1, 1), datetime.date(2026, 1, 2)]),
        "at": pa.array([datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)] * 2, pa.timestamp("us", "UTC")),
        "price": pa.array([decimal.Decimal("1.25"), decimal.Decimal("2.50")], pa.decimal128(10, 2)),
        "tags": pa.array([["t"], []], pa.list_(pa.string())),
        "kv": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())),
        "pt": pa.array([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}], pa.struct([("x", pa.int32()), ("y", pa.string())])),
        "part": ["p", "q"],
    })
    write_deltalake(location[len("file://"):], data, partition_by=["part"])
    created = owner.uc("POST", "/tables", {"name": "typed", "catalog_name": "main", "schema_name": "demo",
                                           "table_type": "EXTERNAL", "data_source_format": "DELTA",
                                           "storage_location": location})

    fields = log_fields(location, 0)
    want = [(f["name"], t, n, i) for i, (f, t, n) in enumerate(zip(fields, [
        "tinyint", "smallint", "int", "bigint", "string", "double", "boolean", "date", "timestamp", "decimal(10,2)",
        "array<string>", "map<string,bigint>", "struct<x:int,y:string>", "string"], [
        "BYTE", "SHORT", "INT", "LONG", "STRING", "DOUBLE", "BOOLEAN", "DATE", "TIMESTAMP", "DECIMAL", "ARRAY", "MAP",
        "STRUCT", "STRING"], strict=True))]
    for reply in (created, owner.table("demo", "typed"), listed(owner, "typed")):
        cols = reply["columns"]
        assert [(c["name"], c["type_text"], c["type_name"], c["position"]) for c in cols] == want
        assert [json.loads(c["type_json"]) for c in cols] == fields  # the log's field, verbatim
        assert [c.get("partition_index") for c in cols] == [None] * 13 + [0]
        assert (cols[9]["type_precision"], cols[9]["type_scale"]) == (10, 2)

    con = connect(owner)
    rows = con.execute("SELECT b, s, i, l, word, f, ok, day, price, tags, kv, pt, part FROM uc.demo.typed "
                       "ORDER BY l").fetchall()
    assert rows == [(1, 10, 100, 1000, "x", 1.5, True, datetime.date(2026, 1, 1), decimal.Decimal("1.25"), ["t"],
                     {"k": 1}, {"x": 1, "y": "a"}, "p"),
                    (2, 20, 200, 2000, "y", 2.5, False, datetime.date(2026, 1, 2), decimal.Decimal("2.50"), [], {},
                     {"x": 2, "y": "b"}, "q")]
    assert [r[1] for r in con.execute("DESCRIBE uc.demo.typed").fetchall()] == [
        "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "VARCHAR", "DOUBLE", "BOOLEAN", "DATE", "TIMESTAMP WITH TIME ZONE",
        "DECIMAL(10,2)", "VARCHAR[]", "MAP(VARCHAR, BIGINT)", "STRUCT(x INTEGER, y VARCHAR)", "VARCHAR"]


def test_duckdb_reads_a_table_of_write_table_by_name_and_sees_a_schema_change_committed_through_the_owner(
        owner: Owner) -> None:
    import pyarrow as pa

    from client.contract.delta_log import commit_info, now_ms
    from client.write import write_table

    client = owner.service.client(token=owner.token)
    location = owner.backend.new_location("written")
    write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "word": ["a", "b"]}), location, client=client,
                full_name="main.demo.written")
    record = owner.table("demo", "written")
    assert (record["table_type"], record["data_source_format"], record["storage_location"]) == (
        "EXTERNAL", "DELTA", location)
    assert [(c["name"], c["type_text"]) for c in listed(owner, "written")["columns"]] == [
        ("id", "bigint"), ("word", "string")]
    md = next(json.loads(line)["metaData"] for line in
              (Path(location[len("file://"):]) / "_delta_log" / f"{0:020}.json").read_text().splitlines()
              if "metaData" in line)
    # The properties are the log's configuration (the owner's own included): what a reader would find there,
    # and the last commit's version and time as the owner ratified it (decision 74).
    assert {k: v for k, v in record["properties"].items() if k not in NOT_IN_LOG} == md["configuration"]
    assert record["properties"][LAST_UPDATE_VERSION] == str(client.get_table(record["table_id"]).latest_table_version)
    con = connect(owner)
    assert con.execute("SELECT * FROM uc.demo.written ORDER BY id").fetchall() == [(1, "a"), (2, "b")]

    # A commit through the owner adds a column and a property: the name's record follows once it is ratified.
    schema = json.loads(md["schemaString"])
    schema["fields"].append({"name": "score", "type": "double", "nullable": True, "metadata": {}})
    configuration = {**md["configuration"], "team.owner": "analytics"}
    latest = client.get_table(record["table_id"]).latest_table_version
    client.commit(record["table_id"], latest + 1, [
        commit_info("ADD COLUMNS", in_commit_timestamp=now_ms(), read_version=latest),
        {"metaData": {**md, "schemaString": json.dumps(schema), "configuration": configuration}}])
    after = listed(owner, "written")
    assert [(c["name"], c["type_text"], c["position"]) for c in after["columns"]] == [
        ("id", "bigint", 0), ("word", "string", 1), ("score", "double", 2)]
    assert {k: v for k, v in after["properties"].items() if k not in NOT_IN_LOG} == configuration
    assert after["properties"][LAST_UPDATE_VERSION] == str(latest + 1)
    deadline = time.monotonic() + 30
    while client.get_table(record["table_id"]).latest_backfilled_version < latest + 1:  # DuckDB reads _delta_log
        assert time.monotonic() < deadline, "the backfiller did not publish the schema change"
        time.sleep(0.1)
    con = connect(owner)  # a new attachment: DuckDB caches the columns of the one above
    assert con.execute("SELECT * FROM uc.demo.written ORDER BY id").fetchall() == [(1, "a", None), (2, "b", None)]


def delta_v1_posts(owner: Owner, name: str) -> int:
    """How many updateTable requests (``POST`` of the table's Delta REST path) the owner answered 200."""
    path = f"POST /api/2.1/unity-catalog/delta/v1/catalogs/main/schemas/demo/tables/{name} 200"
    return sum(r["msg"].startswith(path) for r in access_log(owner.service.log_text()))


def published(owner: Owner, table_id: str, version: int) -> None:
    """Wait until the owner has published ``version`` (so that a picture of the files stays still)."""
    client = owner.service.client(token=owner.token)
    deadline = time.monotonic() + 30
    while client.get_table(table_id).latest_backfilled_version < version:
        assert time.monotonic() < deadline, f"the backfiller did not publish version {version}"
        time.sleep(0.1)


def owner_write(owner: Owner, name: str, protocol: str) -> tuple[str, str]:
    """A table of ``protocol`` named ``main.demo.<name>`` with rows (1, a), (2, b) at version 1, by this
    project's writer; its id and location."""
    import pyarrow as pa

    from client.write import write_table

    location = owner.backend.new_location(name)
    write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "word": ["a", "b"]}), location,
                client=owner.service.client(token=owner.token), protocol=protocol, full_name=f"main.demo.{name}")
    return owner.table("demo", name)["table_id"], location


def test_duckdb_inserts_into_a_managed_table_by_name_through_delta_v1_and_the_owner_ratifies_each_version(
        owner: Owner) -> None:
    from client.read import read_table

    table_id, location = owner_write(owner, "managed", "catalogManaged")
    record = owner.table("demo", "managed")
    assert (record["table_type"], record["properties"]["delta.feature.catalogManaged"]) == ("MANAGED", "supported")
    published(owner, table_id, 1)

    # Without DEFAULT_SCHEMA DuckDB looks for a workspace default (GET /api/2.0/settings/.../default, not a Unity
    # Catalog endpoint: 404) and then refuses every statement on a MANAGED table, a `default` schema or not.
    for schema in (None, "default"):
        if schema:
            owner.uc("POST", "/schemas", {"catalog_name": "main", "name": schema})
        with pytest.raises(duckdb.InvalidInputException, match="Default schema for catalog 'uc' not found"):
            connect(owner).execute("SELECT * FROM uc.demo.managed").fetchall()

    con = connect(owner, "demo")
    assert con.execute("SELECT * FROM uc.demo.managed ORDER BY id").fetchall() == [(1, "a"), (2, "b")]
    assert con.execute("INSERT INTO uc.demo.managed VALUES (3, 'c')").fetchall() == [(1,)]
    assert con.execute("INSERT INTO uc.demo.managed VALUES (4, 'd'), (5, 'e')").fetchall() == [(2,)]
    other = connect(owner, "demo")  # a second session commits on top of the first one's versions
    assert other.execute("INSERT INTO uc.demo.managed VALUES (6, 'f')").fetchall() == [(1,)]
    assert delta_v1_posts(owner, "managed") == 3  # one updateTable (add-commit) per INSERT, each answered 200

    # The owner ratified versions 2, 3 and 4, one row each, each the staged file DuckDB wrote, byte for byte.
    ratified = owner.ratified(table_id)
    assert sorted(ratified) == [1, 2, 3, 4]
    log = Path(location[len("file://"):]) / "_delta_log"
    for version in (2, 3, 4):
        name, size, digest = ratified[version]
        staged = (log / "_staged_commits" / name).read_bytes()
        assert (len(staged), sha256(staged)) == (size, digest)
        info = json.loads(staged.splitlines()[0])["commitInfo"]
        assert info["engineInfo"] == "DuckDB" and info["txnId"] and info["inCommitTimestamp"] > 0
    loaded = owner.uc("GET", "/delta/v1/catalogs/main/schemas/demo/tables/managed")
    assert loaded["latest-table-version"] == 4
    assert owner.uc("GET", "/delta/preview/commits", {"table_id": table_id, "table_uri": location,
                                                      "start_version": 0})["latest_table_version"] == 4

    want = [(i, w) for i, w in enumerate("abcdef", start=1)]
    assert connect(owner, "demo").execute("SELECT * FROM uc.demo.managed ORDER BY id").fetchall() == want
    # Another reader: this project's, through the owner (unpublished ratified commits included).
    rows = read_table(location, client=owner.service.client(token=owner.token)).to_pylist()
    assert sorted((r["id"], r["word"]) for r in rows) == want
    published(owner, table_id, 4)
    assert sha256((log / f"{4:020}.json").read_bytes()) == ratified[4][2]


@pytest.mark.parametrize(("sql", "error", "message"), [
    ("UPDATE uc.demo.{t} SET word = 'z' WHERE id = 1", "BinderException", "Binder Error: Can only update base table"),
    ("DELETE FROM uc.demo.{t} WHERE id = 1", "BinderException", "Binder Error: Can only delete from base table"),
])
def test_duckdb_refuses_update_and_delete_on_a_managed_table_itself_and_nothing_changes(
        owner: Owner, sql: str, error: str, message: str) -> None:
    name = f"refused_{sql.split()[0].lower()}"
    table_id, location = owner_write(owner, name, "catalogManaged")
    published(owner, table_id, 1)
    before = (owner.ratified(table_id), owner.backend.snapshot(location))
    con = connect(owner, "demo")
    with pytest.raises(getattr(duckdb, error)) as refused:
        con.execute(sql.format(t=name))
    assert str(refused.value) == message  # DuckDB's binder: its Unity Catalog tables take INSERT only
    assert delta_v1_posts(owner, name) == 0
    assert (owner.ratified(table_id), owner.backend.snapshot(location)) == before
    assert con.execute(f"SELECT * FROM uc.demo.{name} ORDER BY id").fetchall() == [(1, "a"), (2, "b")]


def test_duckdb_cannot_write_an_external_table_of_the_rfcs_managed_commit_and_nothing_changes(owner: Owner) -> None:
    table_id, location = owner_write(owner, "rfc", "managedCommit")
    assert owner.table("demo", "rfc")["table_type"] == "EXTERNAL"
    published(owner, table_id, 1)
    before = (owner.ratified(table_id), owner.backend.snapshot(location))
    con = connect(owner)
    assert con.execute("SELECT * FROM uc.demo.rfc ORDER BY id").fetchall() == [(1, "a"), (2, "b")]  # it reads
    with pytest.raises(duckdb.IOException) as refused:
        con.execute("INSERT INTO uc.demo.rfc VALUES (3, 'c')")
    # delta-kernel-rs (inside DuckDB's delta extension) knows no writer feature `managedCommit`.
    assert str(refused.value) == ("IO Error: DeltaKernel UnsupportedError (35): Unsupported: "
                                  "Feature 'managedCommit' is not supported")
    # The log and the owner's rows are as they were; DuckDB wrote its data file before it asked the kernel to
    # commit, and leaves it behind, named by no log entry (VACUUM's to remove).
    after = owner.backend.snapshot(location)
    assert owner.ratified(table_id) == before[0]
    assert {k: v for k, v in after.items() if k in before[1]} == before[1]
    left = sorted(set(after) - set(before[1]))
    assert len(left) == 1 and left[0].startswith("/duckdb-") and left[0].endswith(".parquet"), left
    assert all(left[0].lstrip("/") not in data.decode() for data in after.values() if b"{" in data[:1])
    assert connect(owner).execute("SELECT * FROM uc.demo.rfc ORDER BY id").fetchall() == [(1, "a"), (2, "b")]


def test_duckdb_writes_a_plain_external_table_itself_and_creates_none(owner: Owner) -> None:
    """A plain Delta table registered by name has no owner: DuckDB commits ``<v>.json`` itself. CREATE TABLE and
    CREATE TABLE AS in the attached catalog are not implemented by the extension."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    location = owner.backend.new_location("plain")
    write_deltalake(location[len("file://"):], pa.table({"id": pa.array([1, 2], pa.int64()), "word": ["a", "b"]}))
    table_id = owner.uc("POST", "/tables", {"name": "plain", "catalog_name": "main", "schema_name": "demo",
                                            "table_type": "EXTERNAL", "data_source_format": "DELTA",
                                            "storage_location": location})["table_id"]
    con = connect(owner)
    assert con.execute("INSERT INTO uc.demo.plain VALUES (3, 'c')").fetchall() == [(1,)]
    log = Path(location[len("file://"):]) / "_delta_log"
    assert sorted(p.name for p in log.iterdir()) == [f"{0:020}.json", f"{1:020}.json"]
    assert json.loads((log / f"{1:020}.json").read_text().splitlines()[0])["commitInfo"]["engineInfo"] == "DuckDB"
    assert owner.ratified(table_id) == {} and delta_v1_posts(owner, "plain") == 0
    assert sorted(DeltaTable(location).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "word": "a"}, {"id": 2, "word": "b"}, {"id": 3, "word": "c"}]

    before = owner.uc("GET", "/tables?catalog_name=main&schema_name=demo")
    with pytest.raises(duckdb.NotImplementedException) as refused:
        con.execute("CREATE TABLE uc.demo.made (id BIGINT)")
    assert str(refused.value) == "Not implemented Error: UCTableSet::CreateTable"
    with pytest.raises(duckdb.NotImplementedException) as refused:
        con.execute("CREATE TABLE uc.demo.made AS SELECT 1::BIGINT AS id")
    assert str(refused.value) == "Not implemented Error: UnityCatalog PlanCreateTableAs"
    assert owner.uc("GET", "/tables?catalog_name=main&schema_name=demo") == before


def test_delta_rs_beside_duckdb_cannot_write_a_managed_table_and_nothing_changes(owner: Owner) -> None:
    """The engines' table in docs/delta-rest.md has delta-rs (``deltalake`` 1.6.6) beside DuckDB: it cannot even
    open a catalog-managed table to append (its Python API passes no catalog version)."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from deltalake.exceptions import DeltaError

    table_id, location = owner_write(owner, "rs_managed", "catalogManaged")
    published(owner, table_id, 1)
    before = (owner.ratified(table_id), owner.backend.snapshot(location))
    with pytest.raises(DeltaError) as refused:
        write_deltalake(location[len("file://"):], pa.table({"id": pa.array([3], pa.int64()), "word": ["c"]}),
                        mode="append")
    assert str(refused.value) == ("Kernel error: Max catalog version error: Max catalog version is required when "
                                  "loading a catalog-managed table. Use with_max_catalog_version().")
    assert (owner.ratified(table_id), owner.backend.snapshot(location)) == before


async def test_duckdb_inserts_while_the_owner_compacts_a_managed_table_and_both_land(owner: Owner) -> None:
    """The owner's compaction (the policy's and `commit-owner optimize`'s code) and DuckDB's INSERTs through
    ``/delta/v1`` on one MANAGED table: an INSERT that takes the version the compaction was about to propose
    does not conflict with it (an append), so the compaction moves onto it and commits next; no row is lost."""
    from coordinator.ops.optimize import run_optimize
    from coordinator.runtime.settings import Settings

    table_id, location = owner_write(owner, "busy", "catalogManaged")
    con = connect(owner, "demo")
    for i in range(3, 8):
        con.execute(f"INSERT INTO uc.demo.busy VALUES ({i}, 'w{i}')")
    published(owner, table_id, 6)
    raced: list[int] = []

    def insert(version: int) -> None:  # DuckDB commits first, at the version the compaction is about to propose
        if not raced:
            raced.append(version)
            connect(owner, "demo").execute("INSERT INTO uc.demo.busy VALUES (100, 'late')")

    settings = Settings.load(environ=owner.backend.env())
    rep = await run_optimize(settings, table_id, target_size=1024 * 1024, before_commit=insert)

    assert raced == [7] and rep["readVersion"] == 6 and rep["rebases"] == 1 and rep["version"] == 8
    assert rep["filesRemoved"] == 6 and rep["filesAdded"] == 1
    ratified = owner.ratified(table_id)
    assert sorted(ratified) == list(range(1, 9))  # DuckDB's 2..7, the compaction's 8: one file per version
    published(owner, table_id, 8)
    info = json.loads((Path(location[len("file://"):]) / "_delta_log" / f"{8:020}.json").read_text()
                      .splitlines()[0])["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["readVersion"] == 7
    want = sorted([(1, "a"), (2, "b"), *((i, f"w{i}") for i in range(3, 8)), (100, "late")])
    assert connect(owner, "demo").execute("SELECT * FROM uc.demo.busy ORDER BY id").fetchall() == want
    assert owner.uc("GET", "/delta/v1/catalogs/main/schemas/demo/tables/busy")["latest-table-version"] == 8
