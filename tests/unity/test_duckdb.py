"""DuckDB 1.5 (its ``unity_catalog``, ``delta`` and ``httpfs`` extensions, from their PyPI wheels), a client nobody
here wrote, reads the owner's tables by name.

DuckDB takes a table's columns from the list reply (``GET /tables?catalog_name=&schema_name=``), never from the
single table, and accepts only Spark's type text (``bigint``, ``decimal(10,2)``): with an empty ``columns`` it
answers ``SELECT *`` with "SELECT list is empty". The owner fills a table's columns from its Delta log when its
creator sent none, and keeps them current when a ratified commit changes the schema (decision 40).
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

from tests.unity.sail import Owner, demo_owner

duckdb = pytest.importorskip("duckdb", reason="DUCKDB TESTS SKIPPED: duckdb is not installed (the test extra has it)")

EXTENSIONS = (("duckdb_extension_httpfs", "httpfs"), ("duckdb_extension_delta", "delta"),
              ("duckdb_extension_unity_catalog", "unity_catalog"))


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def owner(request: pytest.FixtureRequest) -> Iterator[Owner]:
    yield from demo_owner(request, request.param, f"duckdb-{request.param}")


def connect(owner: Owner) -> Any:
    """A DuckDB connection with the three extensions loaded from their wheels and the owner's catalog attached as
    ``uc`` (``main`` is a name DuckDB reserves)."""
    con = duckdb.connect()
    for module, name in EXTENSIONS:
        folder = Path(importlib.import_module(module).__file__).parent  # type: ignore[arg-type]
        con.execute(f"LOAD '{next(folder.rglob(f'{name}.duckdb_extension'))}'")
    con.execute(f"CREATE SECRET (TYPE UNITY_CATALOG, TOKEN '{owner.token}', ENDPOINT '{owner.service.endpoint}', "
                "AWS_REGION 'us-east-1')")
    con.execute("ATTACH 'main' AS uc (TYPE UNITY_CATALOG)")
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
    # The properties are the log's configuration (the owner's own included): what a reader would find there.
    assert {k: v for k, v in record["properties"].items() if k != "io.unitycatalog.tableId"} == md["configuration"]
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
    assert {k: v for k, v in after["properties"].items() if k != "io.unitycatalog.tableId"} == configuration
    deadline = time.monotonic() + 30
    while client.get_table(record["table_id"]).latest_backfilled_version < latest + 1:  # DuckDB reads _delta_log
        assert time.monotonic() < deadline, "the backfiller did not publish the schema change"
        time.sleep(0.1)
    con = connect(owner)  # a new attachment: DuckDB caches the columns of the one above
    assert con.execute("SELECT * FROM uc.demo.written ORDER BY id").fetchall() == [(1, "a", None), (2, "b", None)]
