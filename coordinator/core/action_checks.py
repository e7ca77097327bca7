"""The Delta protocol's action schemas, checked one action at a time.

Facts from the "Actions" section of Delta's PROTOCOL.md: which fields each action must carry and their types
(Long and Int are JSON integers in range, Map[String, String] a JSON object of strings, ...). A required field
that is missing, or any field of the wrong type, is refused with an InvalidCommitError naming the line and the
field; an optional field may be absent or null. Fields the protocol does not name are kept as sent (forward
compatibility: readers ignore what they do not know). Rules that need more than one line (at most one
``metaData``, one action per file path, ...) live in :mod:`coordinator.core.commit_body`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson

from client.contract.delta_schema import SchemaError, is_primitive, parse_schema, top_level_types
from client.contract.errors import InvalidCommitError

LONG = (-(2**63), 2**63 - 1)
INT = (-(2**31), 2**31 - 1)
READER_VERSIONS = range(1, 4)  # reader 3: table features
WRITER_VERSIONS = range(1, 8)  # writer 7: table features
DV_STORAGE_TYPES = ("u", "i", "p")


class Fields:
    """Typed reads of one action's fields; every refusal names ``line <n>: <action>.<field>``."""

    __slots__ = ("line", "action", "value")

    def __init__(self, line: int, action: str, value: Mapping[str, Any]) -> None:
        self.line, self.action, self.value = line, action, value

    def fail(self, name: str, what: str) -> NoReturn:
        raise InvalidCommitError(f"line {self.line}: {self.action}.{name} {what}")

    def _get(self, name: str, required: bool, expected: str) -> Any:
        v = self.value.get(name)
        if v is None and required:
            self.fail(name, f"is required ({expected})" if name not in self.value else f"must be {expected}, not null")
        return v

    def string(self, name: str, *, required: bool = True, nonempty: bool = False) -> str | None:
        v = self._get(name, required, "a string")
        if v is None:
            return None
        if not isinstance(v, str):
            self.fail(name, f"must be a string, got {_kind(v)}")
        if nonempty and not v:
            self.fail(name, "must not be empty")
        return v

    def integer(self, name: str, *, required: bool = True, minimum: int | None = None,
                bounds: tuple[int, int] = LONG) -> int | None:
        expected = "an integer" if minimum is None else f"an integer >= {minimum}"
        v = self._get(name, required, expected)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(name, f"must be {expected}, got {_kind(v)}")
        lo, hi = bounds
        if not lo <= v <= hi:
            self.fail(name, f"is out of range ({'a 32' if bounds == INT else 'a 64'}-bit integer)")
        if minimum is not None and v < minimum:
            self.fail(name, f"must be {expected}, got {v}")
        return v

    def boolean(self, name: str, *, required: bool = True) -> bool | None:
        v = self._get(name, required, "true or false")
        if v is not None and not isinstance(v, bool):
            self.fail(name, f"must be true or false, got {_kind(v)}")
        return v

    def string_map(self, name: str, *, required: bool = True, null_values: bool = False) -> dict[str, Any] | None:
        expected = "a map of string to string" + (" or null" if null_values else "")
        v = self._get(name, required, expected)
        if v is None:
            return None
        if not isinstance(v, dict):
            self.fail(name, f"must be {expected}, got {_kind(v)}")
        for key, val in v.items():
            if not isinstance(val, str) and not (null_values and val is None):
                self.fail(name, f"must be {expected}: key {key[:60]!r} holds {_kind(val)}")
        return v

    def string_list(self, name: str, *, required: bool = True) -> list[str] | None:
        v = self._get(name, required, "a list of strings")
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            self.fail(name, "must be a list of strings")
        return v

    def json_object_string(self, name: str) -> None:
        """An optional string holding a JSON object (``stats``)."""
        v = self.string(name, required=False)
        if v is None:
            return
        try:
            parsed = orjson.loads(v)
        except orjson.JSONDecodeError:
            self.fail(name, "must be a string holding a JSON object: it is not JSON")
        if not isinstance(parsed, dict):
            self.fail(name, f"must be a string holding a JSON object, got {_kind(parsed)} inside")

    def struct(self, name: str, *, required: bool = True) -> Fields | None:
        v = self._get(name, required, "an object")
        if v is None:
            return None
        if not isinstance(v, dict):
            self.fail(name, f"must be an object, got {_kind(v)}")
        return Fields(self.line, f"{self.action}.{name}", v)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number with a fraction"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    return "an object"


# -- one function per action ---------------------------------------------------------------------------------

def check_deletion_vector(f: Fields) -> None:
    storage = f.string("storageType")
    if storage not in DV_STORAGE_TYPES:
        f.fail("storageType", f"must be one of {', '.join(DV_STORAGE_TYPES)}, got {(storage or '')[:20]!r}")
    f.string("pathOrInlineDv", nonempty=True)
    f.integer("offset", required=False, minimum=0, bounds=INT)
    f.integer("sizeInBytes", minimum=0, bounds=INT)
    f.integer("cardinality", minimum=0)


def _file_action_extras(f: Fields) -> None:
    """The optional fields ``add`` and ``remove`` share."""
    f.json_object_string("stats")
    f.string_map("tags", required=False, null_values=True)
    dv = f.struct("deletionVector", required=False)
    if dv is not None:
        check_deletion_vector(dv)
    f.integer("baseRowId", required=False, minimum=0)
    f.integer("defaultRowCommitVersion", required=False, minimum=0)


def check_add(f: Fields) -> None:
    f.string("path", nonempty=True)
    f.string_map("partitionValues", null_values=True)
    f.integer("size", minimum=0)
    f.integer("modificationTime", minimum=0)
    f.boolean("dataChange")
    _file_action_extras(f)
    f.string("clusteringProvider", required=False)


def check_remove(f: Fields) -> None:
    f.string("path", nonempty=True)
    f.boolean("dataChange")
    f.integer("deletionTimestamp", required=False, minimum=0)
    f.boolean("extendedFileMetadata", required=False)
    f.string_map("partitionValues", required=False, null_values=True)
    f.integer("size", required=False, minimum=0)
    _file_action_extras(f)


def check_cdc(f: Fields) -> None:
    f.string("path", nonempty=True)
    f.string_map("partitionValues", null_values=True)
    f.integer("size", minimum=0)
    f.boolean("dataChange")
    f.string_map("tags", required=False, null_values=True)


@dataclass(frozen=True)
class TableMetadata:
    """What the rest of the commit is checked against: the configuration and the partition columns (name ->
    nullable) of a ``metaData`` action."""

    configuration: dict[str, str]
    partition_columns: dict[str, bool]


def check_metadata(f: Fields) -> TableMetadata:
    """Check a ``metaData`` action."""
    f.string("id", nonempty=True)
    f.string("name", required=False)
    f.string("description", required=False)
    fmt = f.struct("format")
    assert fmt is not None
    fmt.string("provider", nonempty=True)
    fmt.string_map("options", required=False, null_values=True)
    text = f.string("schemaString")
    assert text is not None
    try:
        schema = parse_schema(text)
    except SchemaError as e:
        f.fail("schemaString", str(e))
    columns = top_level_types(schema)
    parts = f.string_list("partitionColumns")
    assert parts is not None
    for c in parts:
        if c not in columns:
            f.fail("partitionColumns", f"names {c[:60]!r}, which is not a top-level column of schemaString")
        if not is_primitive(columns[c]):
            f.fail("partitionColumns", f"names {c[:60]!r}, which is not of a primitive type")
    if len(set(parts)) != len(parts):
        f.fail("partitionColumns", "names a column twice")
    f.integer("createdTime", required=False, minimum=0)
    conf = f.string_map("configuration")
    assert conf is not None
    nullable = {c["name"]: c["nullable"] for c in schema["fields"]}
    return TableMetadata(conf, {c: nullable[c] for c in parts})


def check_protocol(f: Fields) -> None:
    reader = f.integer("minReaderVersion", minimum=1, bounds=INT)
    writer = f.integer("minWriterVersion", minimum=1, bounds=INT)
    assert reader is not None and writer is not None
    if reader not in READER_VERSIONS:
        f.fail("minReaderVersion", f"must be 1, 2 or 3 (the reader versions Delta defines), got {reader}")
    if writer not in WRITER_VERSIONS:
        f.fail("minWriterVersion", f"must be 1 to 7 (the writer versions Delta defines), got {writer}")
    if reader == 3 and writer != 7:
        f.fail("minWriterVersion", "must be 7 when minReaderVersion is 3 (reader features need writer features)")
    readers = _features(f, "readerFeatures", listed=reader == 3, version="minReaderVersion is 3")
    writers = _features(f, "writerFeatures", listed=writer == 7, version="minWriterVersion is 7")
    missing = sorted(set(readers) - set(writers))
    if missing:
        f.fail("writerFeatures", f"must also list the reader features {missing}")


def _features(f: Fields, name: str, *, listed: bool, version: str) -> list[str]:
    if not listed:
        if f.value.get(name) is not None:
            f.fail(name, f"may only be present when {version}")
        return []
    features = f.string_list(name)
    assert features is not None
    return features


def check_txn(f: Fields) -> None:
    f.string("appId", nonempty=True)
    f.integer("version")
    f.integer("lastUpdated", required=False)


def check_domain_metadata(f: Fields) -> None:
    f.string("domain", nonempty=True)
    f.string("configuration")
    f.boolean("removed")


def check_commit_info(f: Fields) -> int:
    """Check the first line's ``commitInfo``; returns its ``inCommitTimestamp`` (required for owned tables)."""
    ict = f.integer("inCommitTimestamp", minimum=1)
    assert ict is not None
    return ict


#: Every action a commit file may hold, with its check (checkpoint-only actions such as sidecar are not here).
CHECKS: dict[str, Callable[[Fields], Any]] = {
    "commitInfo": check_commit_info,
    "add": check_add,
    "remove": check_remove,
    "metaData": check_metadata,
    "protocol": check_protocol,
    "txn": check_txn,
    "domainMetadata": check_domain_metadata,
    "cdc": check_cdc,
}
