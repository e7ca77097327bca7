"""Delta actions for the data files a writer wrote: add (with statistics), remove, commitInfo (in-commit
timestamp first). Shared by the Spark pipeline and the pyarrow writer (:mod:`client.write`).

Pure functions over plain values (standard library only), so they are tested without Spark or a service.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
ENGINE_INFO = "delta-commit-owner pyspark-pipeline"
ARROW_ENGINE_INFO = "delta-commit-owner pyarrow-writer"

Mode = Literal["append", "overwrite"]


@dataclass(frozen=True)
class DataFile:
    """One Parquet file a writer wrote, described the way an ``add`` action needs it."""

    path: str  # relative to the table root, URI-encoded (Delta's add.path)
    size: int
    modification_time: int  # ms since epoch
    partition_values: dict[str, str | None]
    stats: dict[str, Any] = field(default_factory=dict)


def partition_values_from_path(relative_path: str, partition_columns: Sequence[str]) -> dict[str, str | None]:
    """Partition values encoded in the ``col=value`` folders of a URI-encoded relative path.

    Spark writes partition folders Hive-escaped (``%XX``) and the path is URI-encoded on top, so each
    segment is decoded twice. ``__HIVE_DEFAULT_PARTITION__`` is null. Raises ValueError when a partition
    column has no folder in the path.
    """
    found: dict[str, str | None] = {}
    for segment in relative_path.split("/")[:-1]:
        name, sep, value = unquote(segment).partition("=")
        if not sep:
            continue
        key = unquote(name)
        if key in partition_columns:
            raw = unquote(value)
            found[key] = None if raw == HIVE_NULL else raw
    missing = [c for c in partition_columns if c not in found]
    if missing:
        raise ValueError(f"file {relative_path!r} has no folder for partition column(s) {missing}")
    return {c: found[c] for c in partition_columns}


def commit_info(
    *,
    in_commit_timestamp: int,
    mode: Mode,
    read_version: int,
    partition_by: Sequence[str],
    num_files: int,
    num_records: int,
    engine_info: str = ENGINE_INFO,
) -> dict[str, Any]:
    """The first action of a commit: ``commitInfo`` with ``inCommitTimestamp`` as its first field."""
    return {
        "commitInfo": {
            "inCommitTimestamp": int(in_commit_timestamp),
            "timestamp": int(in_commit_timestamp),
            "operation": "WRITE",
            "operationParameters": {
                "mode": "Append" if mode == "append" else "Overwrite",
                "partitionBy": json.dumps(list(partition_by)),
            },
            "readVersion": int(read_version),
            "isolationLevel": "Serializable",
            "isBlindAppend": mode == "append",
            "operationMetrics": {"numFiles": str(num_files), "numOutputRows": str(num_records)},
            "engineInfo": engine_info,
            "txnId": str(uuid.uuid4()),
        }
    }


def add_action(f: DataFile) -> dict[str, Any]:
    """An ``add`` action; ``stats`` is the JSON string Delta readers expect."""
    action: dict[str, Any] = {
        "path": f.path,
        "partitionValues": dict(f.partition_values),
        "size": int(f.size),
        "modificationTime": int(f.modification_time),
        "dataChange": True,
    }
    if f.stats:
        action["stats"] = json.dumps(f.stats, separators=(",", ":"))
    return {"add": action}


def remove_action(
    path: str, *, partition_values: Mapping[str, str | None], size: int | None, deletion_timestamp: int
) -> dict[str, Any]:
    """A ``remove`` action for an active file (overwrite)."""
    action: dict[str, Any] = {
        "path": path,
        "deletionTimestamp": int(deletion_timestamp),
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": dict(partition_values),
    }
    if size is not None:
        action["size"] = int(size)
    return {"remove": action}


def next_in_commit_timestamp(previous: int | None) -> int:
    """Now in ms, but strictly greater than the previous commit's in-commit timestamp."""
    now = int(time.time() * 1000)
    return now if previous is None else max(now, int(previous) + 1)


__all__ = [
    "ARROW_ENGINE_INFO",
    "ENGINE_INFO",
    "HIVE_NULL",
    "DataFile",
    "Mode",
    "add_action",
    "commit_info",
    "next_in_commit_timestamp",
    "partition_values_from_path",
    "remove_action",
]
