"""Every action of a commit follows the Delta protocol's schema for it, or the owner refuses the commit.

Refusals are a 400 INVALID_COMMIT naming the line and the field, and change nothing (database rows and files);
the table stays readable by delta-rs. What real writers send (optional fields null or absent, fields the
protocol does not name) is accepted and published byte for byte.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import Service, delta_file, next_ict, wait_until
from tests.validation.helpers import delta_rs_reads, line, post_commit, published, ready_table, state

SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "day", "type": "string", "nullable": True, "metadata": {}},
    {"name": "tags", "type": {"type": "map", "keyType": "string", "valueType": "string", "valueContainsNull": True},
     "nullable": True, "metadata": {}},
    {"name": "amount", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
]})


def commit_info() -> dict[str, Any]:
    return {"inCommitTimestamp": next_ict(), "operation": "WRITE"}


def add() -> dict[str, Any]:
    return {"path": f"part-{uuid.uuid4().hex}.parquet", "partitionValues": {}, "size": 10,
            "modificationTime": 1_700_000_000_000, "dataChange": True}


def remove() -> dict[str, Any]:
    return {"path": "part-gone.parquet", "deletionTimestamp": 1_700_000_000_000, "dataChange": True}


def metadata() -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
            "partitionColumns": [], "configuration": {"delta.enableInCommitTimestamps": "true",
                                                      "delta.managedCommit.commitOwner": "commit-owner"}}


def protocol() -> dict[str, Any]:
    return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors", "inCommitTimestamp", "managedCommit"]}


def dv() -> dict[str, Any]:
    return {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1, "sizeInBytes": 40,
            "cardinality": 6}


BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "add": add, "remove": remove, "metaData": metadata, "protocol": protocol,
    "txn": lambda: {"appId": "stream-1", "version": 3},
    "domainMetadata": lambda: {"domain": "user.app", "configuration": "{}", "removed": False},
    "cdc": lambda: {"path": "_change_data/c.parquet", "partitionValues": {}, "size": 5, "dataChange": False},
}


def body_with(action: str, change: Callable[[dict[str, Any]], Any]) -> bytes:
    fields = BUILDERS[action]()
    change(fields)
    return line("commitInfo", commit_info()) + b"\n" + line(action, fields) + b"\n"


def drop(name: str) -> Callable[[dict[str, Any]], Any]:
    return lambda f: f.pop(name)


def put(name: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda f: f.__setitem__(name, value)


def schema(fields: list[dict[str, Any]] | str) -> Callable[[dict[str, Any]], Any]:
    text = fields if isinstance(fields, str) else json.dumps({"type": "struct", "fields": fields})
    return put("schemaString", text)


def col(name: str, type_: Any, **kw: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, "nullable": True, "metadata": {}, **kw}


REFUSED = [
    # add: the issue's example first, then each required field and each type
    ("add", lambda f: [f.pop(k) for k in ("partitionValues", "size", "modificationTime", "dataChange")],
     "line 2: add.partitionValues is required"),
    ("add", drop("path"), "line 2: add.path is required"),
    ("add", put("path", ""), "line 2: add.path must not be empty"),
    ("add", put("partitionValues", None), "line 2: add.partitionValues must be a map"),
    ("add", put("partitionValues", {"day": 5}), "line 2: add.partitionValues must be a map of string"),
    ("add", put("partitionValues", ["day"]), "line 2: add.partitionValues must be a map"),
    ("add", drop("size"), "line 2: add.size is required"),
    ("add", put("size", "10"), "line 2: add.size must be an integer"),
    ("add", put("size", 10.5), "line 2: add.size must be an integer"),
    ("add", put("size", -1), "line 2: add.size must be an integer >= 0"),
    ("add", put("size", 2**63), "line 2: add.size is out of range"),
    ("add", put("size", 2**64), "line 2: add.size must be an integer"),
    ("add", drop("modificationTime"), "line 2: add.modificationTime is required"),
    ("add", drop("dataChange"), "line 2: add.dataChange is required"),
    ("add", put("dataChange", "true"), "line 2: add.dataChange must be true or false"),
    ("add", put("stats", {"numRecords": 1}), "line 2: add.stats must be a string"),
    ("add", put("stats", "{numRecords: 1"), "line 2: add.stats must be a string holding a JSON object"),
    ("add", put("stats", "[1]"), "line 2: add.stats must be a string holding a JSON object"),
    ("add", put("tags", {"a": 1}), "line 2: add.tags must be a map"),
    ("add", put("deletionVector", "u123"), "line 2: add.deletionVector must be an object"),
    ("add", put("deletionVector", {**dv(), "storageType": "x"}), "line 2: add.deletionVector.storageType"),
    ("add", put("deletionVector", {k: v for k, v in dv().items() if k != "cardinality"}),
     "line 2: add.deletionVector.cardinality is required"),
    ("add", put("baseRowId", "4071"), "line 2: add.baseRowId must be an integer"),
    ("add", put("defaultRowCommitVersion", -2), "line 2: add.defaultRowCommitVersion must be an integer >= 0"),
    ("add", put("clusteringProvider", 7), "line 2: add.clusteringProvider must be a string"),
    # remove
    ("remove", drop("path"), "line 2: remove.path is required"),
    ("remove", drop("dataChange"), "line 2: remove.dataChange is required"),
    ("remove", put("deletionTimestamp", "now"), "line 2: remove.deletionTimestamp must be an integer"),
    ("remove", put("partitionValues", "day=1"), "line 2: remove.partitionValues must be a map"),
    ("remove", put("extendedFileMetadata", 1), "line 2: remove.extendedFileMetadata must be true or false"),
    # metaData
    ("metaData", drop("id"), "line 2: metaData.id is required"),
    ("metaData", drop("format"), "line 2: metaData.format is required"),
    ("metaData", put("format", {"options": {}}), "line 2: metaData.format.provider is required"),
    ("metaData", drop("schemaString"), "line 2: metaData.schemaString is required"),
    ("metaData", put("schemaString", json.loads(SCHEMA)), "line 2: metaData.schemaString must be a string"),
    ("metaData", schema("{not json"), "line 2: metaData.schemaString is not JSON"),
    ("metaData", schema('{"type": "array"}'), "line 2: metaData.schemaString must be a struct type"),
    ("metaData", schema([{"name": "id", "type": "long"}]), "column 'id' must say nullable"),
    ("metaData", schema([col("id", "int64")]), "column 'id' has unknown type 'int64'"),
    ("metaData", schema([col("id", "long"), col("id", "string")]), "column 'id' appears twice"),
    ("metaData", schema([col("a", "decimal(40,2)")]), "decimal(40,2) needs 1 <= precision <= 38"),
    ("metaData", schema([col("s", {"type": "struct", "fields": [col("x", "bogus")]})]),
     "column 's.x' has unknown type 'bogus'"),
    ("metaData", schema([col("l", {"type": "array", "elementType": "long"})]), "needs containsNull"),
    ("metaData", drop("partitionColumns"), "line 2: metaData.partitionColumns is required"),
    ("metaData", put("partitionColumns", ["nope"]), "partitionColumns names 'nope', which is not a top-level"),
    ("metaData", put("partitionColumns", ["tags"]), "partitionColumns names 'tags', which is not of a primitive"),
    ("metaData", put("partitionColumns", ["day", "day"]), "partitionColumns names a column twice"),
    ("metaData", drop("configuration"), "line 2: metaData.configuration is required"),
    ("metaData", put("configuration", {"delta.appendOnly": True}), "line 2: metaData.configuration must be a map"),
    ("metaData", put("configuration", [1]), "line 2: metaData.configuration must be a map"),
    # protocol
    ("protocol", drop("minReaderVersion"), "line 2: protocol.minReaderVersion is required"),
    ("protocol", put("minReaderVersion", 4), "protocol.minReaderVersion must be 1, 2 or 3"),
    ("protocol", put("minWriterVersion", 8), "protocol.minWriterVersion must be 1 to 7"),
    ("protocol", put("minWriterVersion", 6), "protocol.minWriterVersion must be 7 when minReaderVersion is 3"),
    ("protocol", drop("readerFeatures"), "line 2: protocol.readerFeatures is required"),
    ("protocol", drop("writerFeatures"), "line 2: protocol.writerFeatures is required"),
    ("protocol", lambda f: f.update(minReaderVersion=1), "protocol.readerFeatures may only be present when"),
    ("protocol", lambda f: (f.update(minReaderVersion=1, minWriterVersion=4), f.pop("readerFeatures")),
     "protocol.writerFeatures may only be present when minWriterVersion is 7"),
    ("protocol", put("writerFeatures", ["inCommitTimestamp"]), "must also list the reader features"),
    ("protocol", put("writerFeatures", "deletionVectors"), "protocol.writerFeatures must be a list of strings"),
    # txn, domainMetadata, cdc
    ("txn", drop("appId"), "line 2: txn.appId is required"),
    ("txn", put("version", "3"), "line 2: txn.version must be an integer"),
    ("domainMetadata", drop("removed"), "line 2: domainMetadata.removed is required"),
    ("domainMetadata", put("configuration", {}), "line 2: domainMetadata.configuration must be a string"),
    ("cdc", drop("size"), "line 2: cdc.size is required"),
    ("cdc", put("partitionValues", None), "line 2: cdc.partitionValues must be a map"),
]


def test_the_issue_example_add_with_only_a_path_is_refused_and_the_table_stays_readable(svc: Service) -> None:
    table_id, loc = ready_table(svc)
    picture = state(svc)
    before = picture.take()
    status, payload = post_commit(svc, table_id, 2,
                                  line("commitInfo", commit_info()) + b"\n" + b'{"add":{"path":"x"}}\n')
    assert status == 400 and payload["error"]["code"] == "INVALID_COMMIT"
    assert payload["error"]["message"].startswith("line 2: add.partitionValues is required"), payload
    assert picture.take() == before
    delta_rs_reads(svc, loc, 1)


@pytest.fixture(scope="module")
def refusing_table(svc: Service) -> tuple[str, str]:
    return ready_table(svc)


@pytest.mark.parametrize("action,change,fragment", REFUSED, ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(REFUSED)])
def test_an_action_that_breaks_its_schema_is_refused_naming_line_and_field(
        svc: Service, refusing_table: tuple[str, str], action: str, change: Callable, fragment: str) -> None:
    table_id, _ = refusing_table
    picture = state(svc)
    before = picture.take()
    status, payload = post_commit(svc, table_id, 2, body_with(action, change))
    assert (status, payload["error"]["code"]) == (400, "INVALID_COMMIT"), payload
    assert fragment in payload["error"]["message"], payload["error"]["message"]
    assert (payload["error"]["retryable"], payload["error"]["conflict"]) == (False, False)
    assert picture.take() == before


@pytest.mark.parametrize("body,fragment", [
    (b'{"commitInfo":{"inCommitTimestamp":%d}}\n{"checkpointMetadata":{"version":1}}\n',
     "line 2 holds unknown action 'checkpointMetadata'"),
    (b'{"commitInfo":{"inCommitTimestamp":%d}}\n{"frobnicate":{}}\n', "line 2 holds unknown action 'frobnicate'"),
    (b'{"add":{"path":"x"}}\n', "line 1: the first action must be commitInfo"),
    (b'{"commitInfo":{"inCommitTimestamp":%d}}\n' + line("metaData", metadata()) + b"\n"
     + line("metaData", metadata()) + b"\n", "line 3: a second metaData action"),
    (b'{"commitInfo":{"inCommitTimestamp":%d}}\n' + line("protocol", protocol()) + b"\n"
     + line("protocol", protocol()) + b"\n", "line 3: a second protocol action"),
    (b'{"commitInfo":{"inCommitTimestamp":%d}}\n' + line("add", {**add(), "path": "p"}) + b"\n"
     + line("add", {**add(), "path": "p"}) + b"\n", "line 3: a second add of path 'p' (line 2 has the first)"),
    (b'{"commitInfo":{"inCommitTimestamp":%d}}\n' + line("domainMetadata", BUILDERS["domainMetadata"]()) + b"\n"
     + line("domainMetadata", BUILDERS["domainMetadata"]()) + b"\n", "a second domainMetadata for domain"),
    (b'{"commitInfo":{"inCommitTimestamp":%d}}\n' + line("metaData", {**metadata(), "partitionColumns": ["day"]})
     + b"\n" + line("add", add()) + b"\n",
     "line 3: add.partitionValues must name exactly the partition columns of the metaData on line 2 (['day'])"),
    (b'{"commitInfo":{"inCommitTimestamp":%d}}\n' + line("cdc", {**BUILDERS["cdc"](), "partitionValues": {"x": "1"}})
     + b"\n" + line("metaData", metadata()) + b"\n", "line 2: cdc.partitionValues must name exactly"),
    (b'{"commitInfo":{"inCommitTimestamp":%d}}\n' + line("metaData", {
        **metadata(), "partitionColumns": ["day"],
        "schemaString": json.dumps({"type": "struct", "fields": [col("day", "string", nullable=False)]})})
     + b"\n" + line("add", {**add(), "partitionValues": {"day": ""}}) + b"\n",
     "line 3: add.partitionValues holds null for 'day', which the metaData on line 2 declares not nullable"),
])
def test_commit_level_rules_are_refused_and_change_nothing(svc: Service, refusing_table: tuple[str, str],
                                                          body: bytes, fragment: str) -> None:
    table_id, _ = refusing_table
    if b"%d" in body:
        body = body.replace(b"%d", str(next_ict()).encode(), 1)
    picture = state(svc)
    before = picture.take()
    status, payload = post_commit(svc, table_id, 2, body)
    assert (status, payload["error"]["code"]) == (400, "INVALID_COMMIT"), payload
    assert fragment in payload["error"]["message"], payload["error"]["message"]
    assert picture.take() == before


def test_what_real_writers_send_is_accepted_byte_for_byte_and_delta_rs_reads_it(svc: Service) -> None:
    """Null or absent optional fields, fields the protocol does not name, every action kind in one commit."""
    table_id, loc = ready_table(svc)
    md = {**metadata(), "partitionColumns": ["day"], "name": None, "description": None, "createdTime": 1,
          "somethingNew": {"nested": [1, 2]}}
    md["configuration"]["delta.enableDeletionVectors"] = "true"
    body = b"\n".join([
        line("commitInfo", {**commit_info(), "engineInfo": "x", "operationMetrics": {"n": "1"}, "future": None}),
        line("protocol", {**protocol(), "aFutureField": True}),
        line("metaData", md),
        line("add", {**add(), "partitionValues": {"day": None}, "stats": None, "tags": {"INSERTION_TIME": "1"},
                     "deletionVector": dv(), "baseRowId": 0, "defaultRowCommitVersion": 2,
                     "clusteringProvider": None, "unknownField": 1}),
        line("add", {**add(), "partitionValues": {"day": "2024-01-01"},
                     "stats": json.dumps({"numRecords": 6, "minValues": {"id": 1}})}),
        line("remove", {**remove(), "extendedFileMetadata": True, "partitionValues": {}, "size": 100,
                        "tags": None, "deletionVector": None}),
        line("remove", {"path": "part-other.parquet", "dataChange": False}),
        line("txn", {"appId": "stream-1", "version": 7, "lastUpdated": 1}),
        line("domainMetadata", {"domain": "user.app", "configuration": "{\"k\":5}",
                                "removed": False}),
        line("cdc", {"path": "_change_data/c.parquet", "partitionValues": {"day": "2024-01-01"}, "size": 5,
                     "dataChange": False, "tags": {}}),
    ]) + b"\n"
    status, payload = post_commit(svc, table_id, 2, body)
    assert status == 200, payload
    published(svc, table_id, 2)
    assert svc.backend.read(delta_file(loc, 2)) == body
    dt = delta_rs_reads(svc, loc, 2)
    assert dt.metadata().partition_columns == ["day"]


def test_a_protocol_with_writer_features_only_and_legacy_versions_is_accepted(svc: Service) -> None:
    """The lifecycle's own shapes: reader 1 with writer 7 (features for writers only), and a legacy (1, 2)."""
    table_id, loc = ready_table(svc)
    for v, proto in ((2, {"minReaderVersion": 1, "minWriterVersion": 7,
                          "writerFeatures": ["appendOnly", "inCommitTimestamp", "invariants", "managedCommit"]}),
                     (3, {"minReaderVersion": 1, "minWriterVersion": 7,
                          "writerFeatures": ["inCommitTimestamp", "managedCommit"]})):
        body = line("commitInfo", commit_info()) + b"\n" + line("protocol", proto) + b"\n"
        status, payload = post_commit(svc, table_id, v, body)
        assert status == 200, payload
    published(svc, table_id, 3)
    wait_until(lambda: svc.backend.exists(delta_file(loc, 3)), what="version 3 published")
    delta_rs_reads(svc, loc, 3)
