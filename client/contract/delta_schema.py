"""Delta's schema serialization format (a ``metaData.schemaString``), checked.

Standard library only, shared by the owner (which refuses a commit whose schema no reader could parse) and the
client (which builds the ``metaData`` of a new table). Facts from the Delta protocol's "Schema Serialization
Format": a schema is a struct type ``{"type": "struct", "fields": [...]}``; a field has ``name``, ``type``,
``nullable`` and a ``metadata`` object; a type is a primitive name, ``decimal(p,s)``, or an array, map or struct
object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

PRIMITIVE_TYPES = frozenset({
    "string", "long", "integer", "short", "byte", "float", "double", "boolean", "binary", "date", "timestamp",
    "timestamp_ntz", "variant",
})
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
MAX_DECIMAL_PRECISION = 38
#: Deeper nesting than this is refused (no real table comes near; it bounds the work of one check).
MAX_DEPTH = 100


class SchemaError(ValueError):
    """A schema that does not follow Delta's serialization format; the message names the column."""


def parse_schema(schema: str | Mapping[str, Any]) -> dict[str, Any]:
    """The schema as a dict, after checking every field and type. Raises SchemaError naming what is wrong."""
    if isinstance(schema, str):
        try:
            obj = json.loads(schema)
        except (ValueError, RecursionError) as e:
            raise SchemaError(f"is not JSON ({e})") from None
    else:
        obj = dict(schema)
    if not isinstance(obj, dict) or obj.get("type") != "struct":
        raise SchemaError('must be a struct type: {"type": "struct", "fields": [...]}')
    _check_struct(obj, "", 0)
    return obj


def top_level_types(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``{column name: type}`` of a checked schema's top-level columns."""
    return {f["name"]: f["type"] for f in schema["fields"]}


def is_primitive(type_: Any) -> bool:
    return isinstance(type_, str)


def _check_struct(obj: Mapping[str, Any], where: str, depth: int) -> None:
    fields = obj.get("fields")
    if not isinstance(fields, list):
        raise SchemaError(f"struct{_at(where)} must have a list of fields")
    seen: set[str] = set()
    for i, f in enumerate(fields):
        if not isinstance(f, dict):
            raise SchemaError(f"field {i}{_at(where)} must be an object")
        name = f.get("name")
        if not isinstance(name, str):
            raise SchemaError(f"field {i}{_at(where)} must have a string name")
        path = f"{where}.{name}" if where else name
        if name in seen:
            raise SchemaError(f"column {path!r} appears twice")
        seen.add(name)
        if not isinstance(f.get("nullable"), bool):
            raise SchemaError(f"column {path!r} must say nullable: true or false")
        if not isinstance(f.get("metadata", {}), dict):
            raise SchemaError(f"column {path!r}: metadata must be an object")
        if "type" not in f:
            raise SchemaError(f"column {path!r} has no type")
        _check_type(f["type"], path, depth + 1)


def _check_type(t: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise SchemaError(f"column {path!r} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(t, str):
        m = _DECIMAL.match(t)
        if m:
            precision, scale = int(m.group(1)), int(m.group(2))
            if not 1 <= precision <= MAX_DECIMAL_PRECISION or scale > precision:
                raise SchemaError(f"column {path!r}: {t} needs 1 <= precision <= 38 and scale <= precision")
            return
        if t not in PRIMITIVE_TYPES:
            raise SchemaError(f"column {path!r} has unknown type {t[:60]!r}")
        return
    if not isinstance(t, dict):
        raise SchemaError(f"column {path!r}: a type is a name or an object")
    kind = t.get("type")
    if kind == "struct":
        _check_struct(t, path, depth)
    elif kind == "array":
        if not isinstance(t.get("containsNull"), bool):
            raise SchemaError(f"column {path!r}: an array type needs containsNull: true or false")
        if "elementType" not in t:
            raise SchemaError(f"column {path!r}: an array type needs elementType")
        _check_type(t["elementType"], f"{path}.element", depth + 1)
    elif kind == "map":
        if not isinstance(t.get("valueContainsNull"), bool):
            raise SchemaError(f"column {path!r}: a map type needs valueContainsNull: true or false")
        if "keyType" not in t or "valueType" not in t:
            raise SchemaError(f"column {path!r}: a map type needs keyType and valueType")
        _check_type(t["keyType"], f"{path}.key", depth + 1)
        _check_type(t["valueType"], f"{path}.value", depth + 1)
    else:
        raise SchemaError(f"column {path!r} has unknown type {str(kind)[:60]!r}")


def _at(where: str) -> str:
    return f" of column {where!r}" if where else ""
