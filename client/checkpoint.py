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

from client.contract.errors import CheckpointUnreadableError

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


def _without_nulls(value: dict[str, Any]) -> dict[str, Any]:
    """A struct as a commit file spells it: unset (null) fields left out, at every depth, and the map fields
    (key-value pairs from Arrow) as JSON objects, kept whole: a null partition value is a value."""
    out = {}
    for k, v in value.items():
        if v is None:
            continue
        if type(v) is dict:
            v = _without_nulls(v)
        elif type(v) is list:
            v = dict(v) if k in _MAP_FIELDS else [_without_nulls(x) if type(x) is dict else x for x in v]
        out[k] = v
    return out


def read_checkpoint_parts(parts: Iterable[bytes], *, tombstones: bool = False) -> list[dict[str, Any]]:
    """The actions of a checkpoint, given the bytes of each of its parts.

    Returns one single-key dict per row that carries an ``add``, ``metaData``, ``protocol``, ``txn`` or
    ``domainMetadata`` (tombstones are not part of a snapshot's state); with ``tombstones`` also the
    ``remove`` rows (the checkpoint writer carries them into the next checkpoint). Raises
    CheckpointUnreadableError.
    """
    pq = _pyarrow_parquet()
    actions: list[dict[str, Any]] = []
    wanted = (*_ACTION_COLUMNS, "remove") if tombstones else _ACTION_COLUMNS
    for data in parts:
        try:
            # Only the columns asked for are decoded (the tombstones too are left alone unless asked for).
            part = pq.ParquetFile(io.BytesIO(data))
            present = set(part.schema_arrow.names)
            columns = [c for c in wanted if c in present]
            table = part.read(columns=[*columns, "sidecar"] if "sidecar" in present else columns)
        except Exception as e:  # pyarrow raises several unrelated types for a damaged file
            raise CheckpointUnreadableError(f"cannot read checkpoint part: {e}") from e
        if "sidecar" in present and table.column("sidecar").null_count < table.num_rows:
            # A V2 checkpoint whose file actions live in _sidecars/: reading only this file would miss them.
            raise CheckpointUnreadableError("the checkpoint keeps its file actions in sidecar files, which this "
                                            "reader does not read")
        # Column by column (cheap in Arrow), then row by row to keep the file's order.
        values = [(c, table.column(c).to_pylist()) for c in columns]
        for i in range(table.num_rows):
            for col, column in values:
                v = column[i]
                if v is not None:
                    actions.append({col: _without_nulls(v)})
    return actions
