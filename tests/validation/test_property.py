"""Property: every commit body the owner accepts leaves a table delta-rs reads; every refused one changes nothing.

Hypothesis draws commits of every action kind (valid ones, and near-valid ones: one field dropped, one field of
the wrong type, an unknown action name, an unknown field) and sends them to a running `commit-owner serve`.
Accepted: after backfill, delta-rs opens the table at that version and lists its files. Refused: the database
rows and the files under the table are exactly as before.

The model below keeps the table's current partition columns, so the drawn ``add`` actions carry partition values
that fit them: the owner checks each commit on its own and does not read the table's earlier metadata (see
docs/decisions.md).
"""

from __future__ import annotations

import json
import os
import string
import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import Service, delta_file, delta_rs_table, next_ict
from tests.validation.helpers import delta_rs_reads, post_commit, published, ready_table, state

OWNER_CONF = {"delta.enableInCommitTimestamps": "true", "delta.managedCommit.commitOwner": "commit-owner"}
PRIMITIVES = ["string", "long", "integer", "short", "byte", "float", "double", "boolean", "binary", "date",
              "timestamp", "decimal(10,2)"]
# Partition values, serialized as the protocol says, per primitive type.
PARTITION_VALUE = {
    # an empty string reads as null (Delta's rule), so it only goes where a null may
    "string": st.text(alphabet=string.ascii_letters + string.digits + " -_", min_size=1, max_size=6),
    "long": st.integers(-10**6, 10**6).map(str), "integer": st.integers(-1000, 1000).map(str),
    "short": st.integers(-100, 100).map(str), "byte": st.integers(-100, 100).map(str),
    "float": st.floats(-1e3, 1e3, allow_nan=False).map(repr), "double": st.floats(-1e3, 1e3).map(repr),
    "boolean": st.sampled_from(["true", "false"]), "binary": st.just("abc"), "date": st.just("2024-02-29"),
    "timestamp": st.just("2024-02-29 10:11:12.123456"), "decimal(10,2)": st.just("12.34"),
}
WRONG = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                  st.text(max_size=5), st.lists(st.integers(), max_size=2))
EXAMPLES = int(os.environ.get("VALIDATION_EXAMPLES", "60"))
NAMES = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=6)


@dataclass
class Model:
    version: int
    partitions: dict[str, tuple[str, bool]] = field(default_factory=dict)  # column -> (primitive type, nullable)
    live: set[str] = field(default_factory=set)  # paths of the table's files
    accepted: int = 0
    refused: int = 0


def types(depth: int = 0) -> st.SearchStrategy[Any]:
    prim = st.sampled_from(PRIMITIVES)
    if depth >= 2:
        return prim
    nested = types(depth + 1)
    return st.one_of(
        prim,
        st.builds(lambda e, n: {"type": "array", "elementType": e, "containsNull": n}, nested, st.booleans()),
        st.builds(lambda k, v, n: {"type": "map", "keyType": k, "valueType": v, "valueContainsNull": n},
                  prim, nested, st.booleans()),
        columns(depth + 1).map(lambda cols: {"type": "struct", "fields": cols}),
    )


def columns(depth: int = 0) -> st.SearchStrategy[list[dict[str, Any]]]:
    col = st.builds(lambda n, t, nl: {"name": n, "type": t, "nullable": nl, "metadata": {}},
                    NAMES, types(depth), st.booleans())
    return st.lists(col, min_size=1, max_size=4, unique_by=lambda c: c["name"])


@st.composite
def metadata(draw: st.DrawFn) -> dict[str, Any]:
    cols = draw(columns())
    prims = [c["name"] for c in cols if isinstance(c["type"], str)]
    parts = draw(st.lists(st.sampled_from(prims), unique=True, max_size=2)) if prims else []
    extra = draw(st.dictionaries(st.sampled_from(["delta.appendOnly", "user.note"]),
                                 st.sampled_from(["true", "false", "x"]), max_size=1))
    if "delta.appendOnly" in extra:
        extra["delta.appendOnly"] = "false"  # an append-only table refuses removes: not what is tested here
    return {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": cols}), "partitionColumns": parts,
            "configuration": {**extra, **OWNER_CONF}, "createdTime": draw(st.integers(0, 2**40))}


PROTOCOLS = st.sampled_from([
    {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp", "managedCommit"]},
    {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
     "writerFeatures": ["deletionVectors", "inCommitTimestamp", "managedCommit"]},
    {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [],
     "writerFeatures": ["domainMetadata", "inCommitTimestamp", "managedCommit"]},
])


@st.composite
def file_path(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(["", "sub/"])) + f"part-{draw(st.uuids()).hex}.parquet"


@st.composite
def add(draw: st.DrawFn) -> dict[str, Any]:
    """An ``add`` whose ``partitionValues`` holds, for now, one value per primitive type; :func:`fit` picks the
    table's columns from it when the commit is sent (what is drawn never depends on the table's state)."""
    values = {t: (draw(st.booleans()), draw(PARTITION_VALUE[t])) for t in PRIMITIVES}  # (null?, value)
    a: dict[str, Any] = {"path": draw(file_path()), "partitionValues": values, "size": draw(st.integers(0, 2**40)),
                         "modificationTime": draw(st.integers(0, 2**42)), "dataChange": draw(st.booleans())}
    if draw(st.booleans()):
        a["stats"] = json.dumps({"numRecords": draw(st.integers(0, 1000))})
    if draw(st.booleans()):
        a["tags"] = draw(st.dictionaries(NAMES, st.text(max_size=4), max_size=2))
    return {"add": a}


@st.composite
def others(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["remove", "txn", "cdc"]))
    if kind == "remove":
        return {"remove": {"path": draw(file_path()), "dataChange": draw(st.booleans()),
                           "deletionTimestamp": draw(st.integers(0, 2**42))}}
    if kind == "txn":
        return {"txn": {"appId": draw(NAMES), "version": draw(st.integers(0, 2**40))}}
    return {"cdc": {"path": "_change_data/" + draw(file_path()), "partitionValues": {}, "size": 1,
                    "dataChange": False}}


@st.composite
def commit(draw: st.DrawFn) -> list[dict[str, Any]]:
    """The actions after commitInfo."""
    acts: list[dict[str, Any]] = []
    if draw(st.integers(0, 3)) == 0:
        acts.append({"metaData": draw(metadata())})
    if draw(st.integers(0, 5)) == 0:
        acts.append({"protocol": draw(PROTOCOLS)})
    acts += draw(st.lists(add(), max_size=3, unique_by=lambda a: a["add"]["path"]))
    acts += draw(st.lists(others(), max_size=2))
    if draw(st.booleans()):
        acts.append({"domainMetadata": {"domain": "user." + draw(NAMES), "configuration": "{}",
                                        "removed": draw(st.booleans())}})
    return acts


def partitions_after(acts: list[dict[str, Any]], model: Model) -> dict[str, tuple[str, bool]]:
    for a in acts:
        md = a.get("metaData")
        if isinstance(md, dict) and isinstance(md.get("partitionColumns"), list):
            try:
                cols = {c["name"]: (c["type"], c["nullable"]) for c in json.loads(md["schemaString"])["fields"]}
                return {c: cols[c] for c in md["partitionColumns"]}
            except (TypeError, ValueError, KeyError):
                return model.partitions  # a broken metaData: the owner refuses the commit
    return model.partitions


def fit(acts: list[dict[str, Any]], model: Model) -> None:
    """Give each ``add`` the partition values of the table's partition columns after this commit."""
    partitions = partitions_after(acts, model)
    for a in acts:
        if "add" in a:
            by_type = a["add"]["partitionValues"]
            a["add"]["partitionValues"] = {
                c: None if nullable and by_type[t][0] else by_type[t][1] for c, (t, nullable) in partitions.items()}


def replacing(lines: list[dict[str, Any]], model: Model) -> list[dict[str, Any]]:
    """A commit that sets new metadata also removes every file of the table, as a writer replacing the table
    does: old files' partition values need not fit the new partition columns (the owner does not know them)."""
    if not any("metaData" in a for a in lines):
        return lines
    return lines + [{"remove": {"path": p, "dataChange": True}} for p in sorted(model.live)]


@st.composite
def near_valid(draw: st.DrawFn, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``lines`` (commitInfo first) with at most one change that may or may not break a schema."""
    how = draw(st.sampled_from(["none", "none", "drop", "wrong", "unknown-field", "unknown-action"]))
    if how == "none":
        return lines
    i = draw(st.integers(0, len(lines) - 1))
    (name, fields), = lines[i].items()
    fields = dict(fields)
    if how == "unknown-action":
        lines[i] = {draw(st.sampled_from(["sidecar", "checkpointMetadata", "addFile", "commitinfo"])): fields}
        return lines
    if how == "unknown-field":
        fields["x" + draw(NAMES)] = draw(WRONG)
    elif fields:
        key = draw(st.sampled_from(sorted(fields)))
        if how == "drop":
            del fields[key]
        else:
            fields[key] = draw(WRONG)
    lines[i] = {name: fields}
    return lines


def test_every_accepted_body_is_readable_by_delta_rs_and_every_refused_one_changes_nothing(svc: Service) -> None:
    table_id, loc = ready_table(svc)
    first = delta_rs_table(svc.backend, loc).get_add_actions(flatten=True)
    model = Model(version=1, live={str(p) for p in first.column("path").to_pylist()})
    picture = state(svc)

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def prop(data: st.DataObject) -> None:
        acts = data.draw(commit())
        fit(acts, model)
        info = {"commitInfo": {"inCommitTimestamp": 0, "operation": "WRITE"}}
        lines = replacing(data.draw(near_valid([info, *acts])), model)
        if "commitInfo" in lines[0] and lines[0]["commitInfo"].get("inCommitTimestamp") == 0:
            lines[0]["commitInfo"]["inCommitTimestamp"] = next_ict()
        body = b"".join(json.dumps(a, separators=(",", ":")).encode() + b"\n" for a in lines)
        before = picture.take()
        v = model.version + 1
        status, payload = post_commit(svc, table_id, v, body)
        if status == 200:
            model.version, model.partitions = v, partitions_after(lines, model)
            for a in lines:
                if "remove" in a:
                    model.live.discard(a["remove"]["path"])
            model.live.update(a["add"]["path"] for a in lines if "add" in a)
            model.accepted += 1
            published(svc, table_id, v)
            assert svc.backend.read(delta_file(loc, v)) == body
            try:
                delta_rs_reads(svc, loc, v)
            except Exception as e:
                raise AssertionError(f"delta-rs cannot read version {v}, accepted as {body!r}: {e}") from e
        else:
            assert (status, payload["error"]["code"]) == (400, "INVALID_COMMIT"), payload
            model.refused += 1
            assert picture.take() == before

    prop()
    # both sides of the property were exercised
    assert model.accepted >= 5 and model.refused >= 5, model
