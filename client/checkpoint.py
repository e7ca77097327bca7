"""Reading classic Parquet checkpoints (single file or multi-part) into plain action dicts.

pyarrow is an optional import here and only here: a table whose snapshot needs a checkpoint cannot be
read without it, and the error says so. A classic-named V2 checkpoint (one file with a ``checkpointMetadata``
action, as `commit-owner maintain` writes for tables with ``v2Checkpoint``) is read like any other; UUID-named
V2 checkpoints are not listed, and one that points at sidecar files is refused rather than read in part.
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
        if "sidecar" in table.column_names and table.column("sidecar").null_count < table.num_rows:
            # A V2 checkpoint whose file actions live in _sidecars/: reading only this file would miss them.
            raise CheckpointUnreadableError("the checkpoint keeps its file actions in sidecar files, which this "
                                            "reader does not read")
        wanted = (*_ACTION_COLUMNS, "remove") if tombstones else _ACTION_COLUMNS
        columns = [c for c in wanted if c in table.column_names]
        for row in table.select(columns).to_pylist():
            for col in columns:
                if row.get(col) is not None:
                    actions.append({col: _normalize(row[col])})
    return actions
