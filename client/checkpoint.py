"""Reading classic Parquet checkpoints (single file or multi-part) into plain action dicts.

pyarrow is an optional import here and only here: a table whose snapshot needs a checkpoint cannot be
read without it, and the error says so. V2 checkpoints (UUID-named, with sidecars) are not read; the
reader then falls back to replaying JSON commits when they are still present.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from .errors import CheckpointUnreadableError

# Fields that are Parquet maps in a checkpoint and JSON objects in a commit file.
_MAP_FIELDS = frozenset({"partitionValues", "configuration", "options", "tags"})
_ACTION_COLUMNS = ("add", "metaData", "protocol", "txn", "domainMetadata")


def _pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise CheckpointUnreadableError(
            "reading a Parquet checkpoint needs pyarrow, which is not installed: pip install pyarrow"
        ) from None
    return pq


def _normalize(value: Any, key: str | None = None) -> Any:
    if key in _MAP_FIELDS and isinstance(value, list):
        return {k: v for k, v in value}
    if isinstance(value, dict):
        return {k: _normalize(v, k) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


def read_checkpoint_parts(parts: Iterable[bytes], *, tombstones: bool = False) -> list[dict[str, Any]]:
    """The actions of a checkpoint, given the bytes of each of its parts.

    Returns one single-key dict per row that carries an ``add``, ``metaData``, ``protocol``, ``txn`` or
    ``domainMetadata`` (tombstones are not part of a snapshot's state); with ``tombstones`` also the
    ``remove`` rows (the checkpoint writer carries them into the next checkpoint). Raises
    CheckpointUnreadableError.
    """
    pq = _pyarrow_parquet()
    actions: list[dict[str, Any]] = []
    for data in parts:
        try:
            table = pq.read_table(io.BytesIO(data))
        except Exception as e:  # pyarrow raises several unrelated types for a damaged file
            raise CheckpointUnreadableError(f"cannot read checkpoint part: {e}") from e
        wanted = (*_ACTION_COLUMNS, "remove") if tombstones else _ACTION_COLUMNS
        columns = [c for c in wanted if c in table.column_names]
        for row in table.select(columns).to_pylist():
            for col in columns:
                if row.get(col) is not None:
                    actions.append({col: _normalize(row[col])})
    return actions
