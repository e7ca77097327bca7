"""The maintenance policy `commit-owner maintain` runs on each table (decision 77): when to compact, when to
vacuum, read from the settings and overridden per table by table properties (``metaData.configuration``, set
with e.g. Spark's ``ALTER TABLE ... SET TBLPROPERTIES``). Checkpoints and log cleanup follow Delta's own
properties (``delta.checkpointInterval``, ``delta.logRetentionDuration``) as before.

A property with a bad value is refused by name for that table's step and nothing is done by it; the other
tables and steps go on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from client.contract.errors import InvalidArgumentError
from coordinator.ops.checkpoints import parse_duration
from coordinator.runtime.settings import Settings

PREFIX = "commitowner."
AUTO_OPTIMIZE = "commitowner.autoOptimize.enabled"
TARGET_FILE_SIZE = "commitowner.autoOptimize.targetFileSize"
PARTITION_SMALL_FILES = "commitowner.autoOptimize.partitionSmallFiles"
TABLE_SMALL_FILES = "commitowner.autoOptimize.tableSmallFiles"
AUTO_VACUUM = "commitowner.autoVacuum.enabled"
VACUUM_INTERVAL = "commitowner.autoVacuum.interval"
PROPERTIES = (AUTO_OPTIMIZE, TARGET_FILE_SIZE, PARTITION_SMALL_FILES, TABLE_SMALL_FILES, AUTO_VACUUM, VACUUM_INTERVAL)


@dataclass(frozen=True)
class OptimizePolicy:
    enabled: bool
    target_size: int
    partition_files: int  # compact when a partition has more small files than this
    table_files: int  # ... or the table has


@dataclass(frozen=True)
class VacuumPolicy:
    enabled: bool
    interval_seconds: float  # least time between two vacuums of the table


def _lookup(properties: Mapping[str, str]) -> dict[str, str]:
    """The policy's properties, found whatever the case of their keys (some catalogs lower-case them)."""
    wanted = {p.lower(): p for p in PROPERTIES}
    return {wanted[k.lower()]: v for k, v in properties.items() if k.lower() in wanted}


def _flag(props: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in props:
        return default
    text = str(props[key]).strip().lower()
    if text not in ("true", "false"):
        raise InvalidArgumentError(f"table property {key} must be true or false, got {props[key]!r}")
    return text == "true"


def _count(props: Mapping[str, str], key: str, default: int, least: int) -> int:
    if key not in props:
        return default
    try:
        n = int(str(props[key]).strip())
    except ValueError:
        n = least - 1
    if n < least:
        raise InvalidArgumentError(f"table property {key} must be a whole number of at least {least}, "
                                   f"got {props[key]!r}")
    return n


def optimize_policy(settings: Settings, properties: Mapping[str, str]) -> OptimizePolicy:
    """When a table with these properties is compacted. Raises InvalidArgumentError naming a bad property."""
    props = _lookup(properties)
    return OptimizePolicy(
        enabled=_flag(props, AUTO_OPTIMIZE, settings.maintain_optimize),
        target_size=_count(props, TARGET_FILE_SIZE, settings.optimize_target_file_bytes, 1),
        partition_files=_count(props, PARTITION_SMALL_FILES, settings.maintain_optimize_partition_files, 2),
        table_files=_count(props, TABLE_SMALL_FILES, settings.maintain_optimize_table_files, 2),
    )


def vacuum_policy(settings: Settings, properties: Mapping[str, str]) -> VacuumPolicy:
    """When a table with these properties is vacuumed. Raises InvalidArgumentError naming a bad property."""
    props = _lookup(properties)
    interval = settings.maintain_vacuum_interval_seconds
    if VACUUM_INTERVAL in props:
        interval = parse_duration(props[VACUUM_INTERVAL], f"table property {VACUUM_INTERVAL}")
    return VacuumPolicy(enabled=_flag(props, AUTO_VACUUM, settings.maintain_vacuum), interval_seconds=interval)


def compaction_due(files: Sequence[Mapping[str, Any]], policy: OptimizePolicy) -> str | None:
    """Why the live files ``files`` (``add`` bodies) call for a compaction under ``policy``, or None."""
    small: dict[str, int] = {}
    for f in files:
        if int(f.get("size") or 0) < policy.target_size:
            key = json.dumps(f.get("partitionValues") or {}, sort_keys=True)
            small[key] = small.get(key, 0) + 1
    if not small:
        return None
    key, most = max(small.items(), key=lambda kv: kv[1])
    if most > policy.partition_files:
        where = "the table" if key == "{}" else f"partition {key}"
        return (f"{where} has {most} files smaller than {policy.target_size} bytes (more than "
                f"{policy.partition_files})")
    total = sum(small.values())
    if total > policy.table_files:
        return f"the table has {total} files smaller than {policy.target_size} bytes (more than {policy.table_files})"
    return None


__all__ = ["AUTO_OPTIMIZE", "AUTO_VACUUM", "PARTITION_SMALL_FILES", "PROPERTIES", "TABLE_SMALL_FILES", "TARGET_FILE_SIZE",
           "VACUUM_INTERVAL", "OptimizePolicy", "VacuumPolicy", "compaction_due", "optimize_policy", "vacuum_policy"]
