"""Unity Catalog 2.1's shapes: its request fields parsed into the catalog's values, its replies built from rows.

Field names are Unity Catalog OSS 0.6's (docs/unity-catalog.md); every rule behind them lives in the catalog
(coordinator/core/catalog.py) or the commit service.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from client.contract.errors import InvalidArgumentError
from coordinator.core.catalog import check_comment, check_properties
from coordinator.core.last_commit import answered_properties
from coordinator.store.rows import CatalogRow, CommitRow, NameRow, SchemaRow, TableRow

PAGE_MAX = 1000
COLUMN_KEYS = frozenset({"name", "type_text", "type_json", "type_name", "type_precision", "type_scale",
                         "type_interval_type", "position", "comment", "nullable", "partition_index"})


def check_columns(value: Any) -> list[dict[str, Any]]:
    """A list of ColumnInfo objects, with their positions and nullability filled in."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidArgumentError("columns must be a list of ColumnInfo objects")
    out = []
    for i, col in enumerate(value):
        if not isinstance(col, dict) or not isinstance(col.get("name"), str) or not col["name"]:
            raise InvalidArgumentError(f"columns[{i}] must be an object with a name")
        unknown = sorted(set(col) - COLUMN_KEYS)
        if unknown:
            raise InvalidArgumentError(f"columns[{i}] has unknown field(s): {', '.join(unknown[:5])}")
        out.append({**col, "position": col.get("position", i), "nullable": col.get("nullable", True)})
    return out


def commit_metadata(metadata: Any) -> dict[str, Any] | None:
    """The schema, properties and comment a writer reports with a preview commit (advisory: the log rules)."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise InvalidArgumentError("metadata must be an object")
    schema, props = metadata.get("schema"), metadata.get("properties")
    return {
        "columns": check_columns(schema.get("columns")) if isinstance(schema, dict) else None,
        "properties": check_properties(props.get("properties"), "metadata.properties")
        if isinstance(props, dict) else None,
        "comment": check_comment(metadata.get("description")),
    }


@dataclasses.dataclass(frozen=True)
class Page:
    after: str | None
    limit: int

    @classmethod
    def parse(cls, max_results: str | None, page_token: str | None) -> Page:
        """``max_results``: absent or 0 = the server's page size; negative is refused."""
        limit = PAGE_MAX
        if max_results not in (None, ""):
            try:
                n = int(max_results)  # type: ignore[arg-type]
            except ValueError:
                raise InvalidArgumentError("max_results must be an integer") from None
            if n < 0:
                raise InvalidArgumentError("max_results must be >= 0")
            limit = min(n, PAGE_MAX) if n > 0 else PAGE_MAX
        after = None
        if page_token:
            try:
                after = base64.urlsafe_b64decode(page_token.encode("ascii") + b"==").decode("utf-8")
            except (ValueError, UnicodeError):
                raise InvalidArgumentError("page_token is not a token this server gave out") from None
        return cls(after, limit)

    def next_token(self, names: list[str]) -> str | None:
        if len(names) < self.limit or not names:
            return None
        return base64.urlsafe_b64encode(names[-1].encode("utf-8")).decode("ascii").rstrip("=")

    def reply(self, key: str, items: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {key: items}
        token = self.next_token(names)
        if token is not None:
            out["next_page_token"] = token
        return out


def catalog_json(c: CatalogRow) -> dict[str, Any]:
    return {"name": c.name, "id": c.id, "comment": c.comment, "properties": c.properties,
            "created_at": c.created_at, "updated_at": c.updated_at}


def schema_json(s: SchemaRow) -> dict[str, Any]:
    return {"name": s.name, "catalog_name": s.catalog_name, "full_name": f"{s.catalog_name}.{s.name}",
            "schema_id": s.id, "comment": s.comment, "properties": s.properties,
            "created_at": s.created_at, "updated_at": s.updated_at}


def table_json(t: TableRow, n: NameRow) -> dict[str, Any]:
    return {
        "name": n.name, "catalog_name": n.catalog_name, "schema_name": n.schema_name,
        "table_type": n.table_type, "data_source_format": n.data_source_format,
        "columns": n.columns, "storage_location": t.location, "comment": n.comment,
        "properties": answered_properties(t, n),
        "created_at": n.created_at, "updated_at": max(n.updated_at, t.updated_at), "table_id": t.table_id,
    }


def commit_json(c: CommitRow) -> dict[str, Any]:
    return {"version": c.version, "timestamp": c.commit_timestamp, "file_name": c.file_name,
            "file_size": c.file_size, "file_modification_timestamp": c.file_modification_time}
