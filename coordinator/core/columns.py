"""A table's columns as the catalog keeps them: Unity Catalog ColumnInfo rows made from a Delta schema.

The one conversion between Delta's schema format (a ``metaData.schemaString``, a Delta REST Catalog struct) and
the ColumnInfo rows every catalog API answers: log order, ``position``, ``type_name`` (Unity Catalog's
ColumnTypeName), ``type_text`` in Spark's spelling (``bigint``, ``int``, ``decimal(10,2)``,
``array<string>``: the only spelling DuckDB's ``unity_catalog`` extension accepts), ``type_json`` (the log's
field, verbatim), ``partition_index`` and, for decimals, ``type_precision`` / ``type_scale``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from client.contract.delta_log import TABLE_ID_PROPERTIES
from client.contract.delta_schema import SchemaError, parse_schema
from client.contract.errors import InvalidArgumentError

# Unity Catalog's ColumnTypeName and Spark's type text of each Delta primitive
TYPE_NAMES = {"integer": "INT", "long": "LONG", "short": "SHORT", "byte": "BYTE", "float": "FLOAT",
              "double": "DOUBLE", "boolean": "BOOLEAN", "string": "STRING", "binary": "BINARY", "date": "DATE",
              "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ", "variant": "VARIANT"}
SPARK_TEXT = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def type_name(t: Any) -> str:
    """Unity Catalog's ColumnTypeName of a Delta type."""
    if isinstance(t, str):
        return "DECIMAL" if _DECIMAL.match(t) else TYPE_NAMES.get(t, t.upper())
    return str(t.get("type", "")).upper() if isinstance(t, dict) else "NULL"


def type_text(t: Any) -> str:
    """Spark's spelling of a Delta type (its ``catalogString``): ``bigint``, ``decimal(10,2)``, ``map<string,int>``."""
    if isinstance(t, str):
        m = _DECIMAL.match(t)
        return f"decimal({m.group(1)},{m.group(2)})" if m else SPARK_TEXT.get(t, t)
    if t.get("type") == "array":
        return f"array<{type_text(t.get('elementType'))}>"
    if t.get("type") == "map":
        return f"map<{type_text(t.get('keyType'))},{type_text(t.get('valueType'))}>"
    return "struct<" + ",".join(f"{f.get('name')}:{type_text(f.get('type'))}" for f in t.get("fields", [])) + ">"


def to_columns(fields: list[dict[str, Any]], partition_columns: list[str]) -> list[dict[str, Any]]:
    """ColumnInfo rows of Delta struct fields, in their order. Raises InvalidArgumentError when a partition
    column is not among the fields."""
    lower = [f["name"].lower() for f in fields]
    for p in partition_columns:
        if p.lower() not in lower:
            raise InvalidArgumentError(f"partition column {p[:80]!r} is not a column of the table")
    parts = [p.lower() for p in partition_columns]
    out = []
    for i, f in enumerate(fields):
        col: dict[str, Any] = {"name": f["name"], "type_text": type_text(f["type"]), "type_json": json.dumps(f),
                               "type_name": type_name(f["type"]), "position": i,
                               "nullable": bool(f.get("nullable", True))}
        m = _DECIMAL.match(f["type"]) if isinstance(f["type"], str) else None
        if m:
            col["type_precision"], col["type_scale"] = int(m.group(1)), int(m.group(2))
        comment = (f.get("metadata") or {}).get("comment")
        if isinstance(comment, str):
            col["comment"] = comment
        if f["name"].lower() in parts:
            col["partition_index"] = parts.index(f["name"].lower())
        out.append(col)
    return out


def columns_of_metadata(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ColumnInfo rows of a Delta log's ``metaData`` action (its ``schemaString`` and ``partitionColumns``).
    Raises InvalidArgumentError when the schema is not one a reader could parse."""
    try:
        schema = parse_schema(metadata.get("schemaString") or "")
    except SchemaError as e:
        raise InvalidArgumentError(f"the log's schema is not a valid Delta schema: {e}") from None
    parts = metadata.get("partitionColumns") or []
    return to_columns(list(schema["fields"]), [p for p in parts if isinstance(p, str)])


def properties_of_metadata(metadata: Mapping[str, Any], table_id: str) -> dict[str, str]:
    """A ``metaData`` action's ``configuration`` as the catalog's record of table ``table_id``'s properties (string
    values). A table id property naming another table is not recorded: every answer shows the table's own id, and
    the record never says otherwise (decision 65)."""
    conf = metadata.get("configuration")
    if not isinstance(conf, dict):
        return {}
    return {str(k): str(v) for k, v in conf.items() if k not in TABLE_ID_PROPERTIES or str(v) == table_id}


def struct_of(columns: list[dict[str, Any]]) -> dict[str, Any]:
    """The Delta struct type of ColumnInfo rows (their ``type_json``; a bare type name without one)."""
    fields = []
    for c in sorted(columns, key=lambda c: c.get("position", 0)):
        try:
            field = json.loads(c["type_json"]) if isinstance(c.get("type_json"), str) else None
        except ValueError:
            field = None
        if not isinstance(field, dict):
            field = {"name": c["name"], "type": str(c.get("type_name", "string")).lower(),
                     "nullable": c.get("nullable", True), "metadata": {}}
        fields.append(field)
    return {"type": "struct", "fields": fields}


def partition_columns_of(columns: list[dict[str, Any]]) -> list[str]:
    parts = [c for c in columns if isinstance(c.get("partition_index"), int)]
    return [c["name"] for c in sorted(parts, key=lambda c: c["partition_index"])]


def with_partitions(columns: list[dict[str, Any]], partition_columns: list[str]) -> list[dict[str, Any]]:
    return to_columns(struct_of(columns)["fields"], partition_columns)


__all__ = ["columns_of_metadata", "partition_columns_of", "struct_of", "to_columns", "type_name", "type_text",
           "with_partitions"]
