"""The Delta REST Catalog API's shapes: Delta structs and protocols in, load-table replies out.

The catalog keeps a table's columns as Unity Catalog ColumnInfo rows (``type_json`` holds the Delta struct
field, ``partition_index`` the partitioning), so a table reads the same through both APIs. The protocol and the
domain metadata a writer reports live in the table's properties under the keys this API calls server-derived
(``delta.minReaderVersion``, ``delta.feature.<f>``, ``delta.clusteringColumns``, ...).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

from client.contract.delta_schema import SchemaError, parse_schema
from client.contract.errors import InvalidArgumentError
from coordinator.core.catalog import MANAGED, RESERVED
from coordinator.core.columns import partition_columns_of, struct_of
from coordinator.core.last_commit import LAST_COMMIT_TIMESTAMP, LAST_UPDATE_VERSION, answered_properties
from coordinator.store.rows import CommitRow, NameRow, TableRow

CATALOG_MANAGED = "delta.feature.catalogManaged"
READER_VERSION, WRITER_VERSION = "delta.minReaderVersion", "delta.minWriterVersion"
FEATURE_PREFIX = "delta.feature."
# domain metadata -> the property this API derives from it
DOMAIN_PROPERTIES = {"delta.clustering": "delta.clusteringColumns",
                     "delta.rowTracking": "delta.rowTracking.rowIdHighWaterMark"}
# The properties this API derives (the spec's server-derived ones): from protocol / set-protocol, from the
# commits (every API answers those two as the table holds them: coordinator/core/last_commit.py), from the
# domain metadata. A property map may only repeat the value they come to (decision 65).
DERIVED = frozenset({READER_VERSION, WRITER_VERSION, LAST_UPDATE_VERSION, LAST_COMMIT_TIMESTAMP,
                     *DOMAIN_PROPERTIES.values()})


def derived(key: str) -> bool:
    return key in DERIVED or key.startswith(FEATURE_PREFIX)


def reserved(key: str) -> bool:
    """The keys a property map of this API may only repeat: every API's reserved ones, and what it derives."""
    return key in RESERVED or derived(key)


# This API spells the keys of array and map types in kebab case; Delta's schema format in camel case.
_WIRE_KEYS = {"element-type": "elementType", "contains-null": "containsNull", "key-type": "keyType",
              "value-type": "valueType", "value-contains-null": "valueContainsNull"}
_DELTA_KEYS = {v: k for k, v in _WIRE_KEYS.items()}


def _respell(t: Any, keys: dict[str, str]) -> Any:
    if isinstance(t, list):
        return [_respell(x, keys) for x in t]
    if not isinstance(t, dict):
        return t
    return {keys.get(k, k): (v if k in ("metadata", "name") else _respell(v, keys)) for k, v in t.items()}


def check_struct(value: Any, what: str = "columns") -> list[dict[str, Any]]:
    """The fields of a struct type as this API sends it, in Delta's schema format, checked as a schema."""
    if not isinstance(value, dict) or value.get("type") != "struct" or not isinstance(value.get("fields"), list):
        raise InvalidArgumentError(f"{what} must be a Delta struct type: {{\"type\": \"struct\", \"fields\": [...]}}")
    delta = _respell(value, _WIRE_KEYS)
    try:
        parse_schema(delta)
    except SchemaError as e:
        raise InvalidArgumentError(f"{what} is not a valid Delta schema: {e}") from None
    return list(delta["fields"])


def wire_struct(struct: dict[str, Any]) -> dict[str, Any]:
    """A struct type in Delta's schema format, spelled as this API sends it."""
    return _respell(struct, _DELTA_KEYS)  # type: ignore[no-any-return]


def check_names(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidArgumentError(f"{what} must be a list of names")
    return list(value)


def protocol_properties(value: Any) -> dict[str, str]:
    """The properties a Delta protocol stands for: the two versions and ``delta.feature.<f> = supported``."""
    if not isinstance(value, dict):
        raise InvalidArgumentError("protocol must be an object with min-reader-version and min-writer-version")
    out = {}
    for key, prop in (("min-reader-version", READER_VERSION), ("min-writer-version", WRITER_VERSION)):
        v = value.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InvalidArgumentError(f"protocol.{key} is required and must be a positive integer")
        out[prop] = str(v)
    for key in ("reader-features", "writer-features"):
        for f in check_names(value.get(key), f"protocol.{key}"):
            out[FEATURE_PREFIX + f] = "supported"
    return out


def wire_protocol(protocol: dict[str, Any]) -> dict[str, Any]:
    """A Delta protocol action (``minReaderVersion``, ``readerFeatures``, ...) as this API spells a protocol
    (``min-reader-version``, ``reader-features``, ...)."""
    keys = {"minReaderVersion": "min-reader-version", "minWriterVersion": "min-writer-version",
            "readerFeatures": "reader-features", "writerFeatures": "writer-features"}
    return {keys[k]: v for k, v in protocol.items()}


def without_protocol(properties: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in properties.items()
            if k not in (READER_VERSION, WRITER_VERSION) and not k.startswith(FEATURE_PREFIX)}


def domain_properties(value: Any) -> dict[str, str]:
    """The properties derived from domain metadata updates (``delta.clustering``, ``delta.rowTracking``)."""
    if not isinstance(value, dict):
        raise InvalidArgumentError("domain metadata must be an object keyed by domain name")
    out = {}
    for domain, conf in value.items():
        if domain not in DOMAIN_PROPERTIES:
            raise InvalidArgumentError(f"domain {domain[:80]!r} is not one this API carries "
                                       f"({', '.join(DOMAIN_PROPERTIES)})")
        if domain == "delta.clustering":
            cols = conf.get("clusteringColumns") if isinstance(conf, dict) else None
            if not isinstance(cols, list) or not all(isinstance(p, list) and all(isinstance(x, str) for x in p)
                                                     for p in cols):
                raise InvalidArgumentError("delta.clustering.clusteringColumns must be a list of column paths")
            out[DOMAIN_PROPERTIES[domain]] = json.dumps(cols)
        else:
            mark = conf.get("rowIdHighWaterMark") if isinstance(conf, dict) else None
            if isinstance(mark, bool) or not isinstance(mark, int):
                raise InvalidArgumentError("delta.rowTracking.rowIdHighWaterMark must be an integer")
            out[DOMAIN_PROPERTIES[domain]] = str(mark)
    return out


def etag(table: TableRow, name: NameRow) -> str:
    """Changes whenever the table's name row or its latest version does (a commit or a metadata change)."""
    raw = orjson.dumps([table.table_id, table.latest_version, name.name, name.comment, name.columns, name.properties],
                       option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(raw).hexdigest()[:32]


def commit_json(c: CommitRow) -> dict[str, Any]:
    return {"version": c.version, "timestamp": c.commit_timestamp, "file-name": c.file_name,
            "file-size": c.file_size, "file-modification-timestamp": c.file_modification_time}


#: The maintenance operations (``DATA_REORGANIZATION``, ``DATA_CLEANUP``, ``METADATA_CLEANUP``) a client may run
#: on an owned table: none, since the owner does them itself (`commit-owner maintain`'s policy, decision 77). A
#: client that reads the list (delta-spark past 4.4.0) is told so; 4.4.0 refuses them on catalog-managed tables
#: whatever the catalog says.
ALLOWED_MAINTENANCE_OPERATIONS: tuple[str, ...] = ()


def load_reply(table: TableRow, name: NameRow, commits: list[CommitRow]) -> dict[str, Any]:
    """A DeltaLoadTableResponse: the metadata, the ratified-but-unpublished commits (newest first) and the latest
    ratified version, all from one read of the table."""
    props = answered_properties(table, name)
    if name.table_type == MANAGED:
        props[CATALOG_MANAGED] = "supported"
    metadata: dict[str, Any] = {
        "etag": etag(table, name), "table-type": name.table_type, "table-uuid": table.table_id,
        "location": table.location, "created-time": name.created_at,
        "updated-time": max(name.updated_at, table.updated_at), "columns": wire_struct(struct_of(name.columns)),
        "partition-columns": partition_columns_of(name.columns), "properties": props,
    }
    if name.comment is not None:
        metadata["comment"] = name.comment
    if LAST_UPDATE_VERSION in props:
        metadata["last-commit-version"] = int(props[LAST_UPDATE_VERSION])
    if LAST_COMMIT_TIMESTAMP in props:
        metadata["last-commit-timestamp-ms"] = int(props[LAST_COMMIT_TIMESTAMP])
    return {"metadata": metadata, "commits": [commit_json(c) for c in sorted(commits, key=lambda c: -c.version)],
            "latest-table-version": table.catalog_latest,
            "allowed-maintenance-operations": list(ALLOWED_MAINTENANCE_OPERATIONS)}
