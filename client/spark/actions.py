"""The Delta actions of the Spark pipeline: they live in :mod:`client.actions`, shared with the pyarrow writer."""

from __future__ import annotations

from client.actions import (
    ENGINE_INFO,
    HIVE_NULL,
    DataFile,
    Mode,
    add_action,
    commit_info,
    next_in_commit_timestamp,
    partition_values_from_path,
    remove_action,
)

__all__ = [
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
