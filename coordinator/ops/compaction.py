"""Bin-packing compaction of an owned table (`commit-owner optimize`): which files to rewrite, the rewrite, the
commit's actions and Delta's conflict rule for it. The command around it (reading the table, committing through
the commit service, giving up) is ``coordinator/ops/optimize.py``; why: docs/decisions.md, entry 76.

* **Plan.** Per partition, the files smaller than the target size are sorted by size and packed greedily into
  bins of at most the target size; a bin of one file is left alone, and so is a partition with fewer than the
  minimum number of small files. A file with a deletion vector is purged: rewritten when it is small or when
  its DV deletes at least ``MAX_DELETED_ROWS_RATIO`` of its rows (Delta's default), even alone in its bin.
* **Rewrite.** Each bin becomes one Parquet file (pyarrow, as ``client.write_table`` writes them), the rows a
  deletion vector marks deleted left out (``deletion_vectors.py``), its statistics from its own footer
  (``client.stats``). A table with row tracking keeps each row's stable row id and row commit version in the
  file's materialized columns (``row_tracking.py``).
* **Commit.** ``commitInfo`` (operation ``OPTIMIZE``, Delta's parameters and metric names), a ``remove`` of every
  rewritten file and an ``add`` of every new one, all with ``dataChange=false``; with row tracking, the adds'
  fresh ``baseRowId`` / ``defaultRowCommitVersion`` and the raised high-water mark, assigned per proposal.
* **Conflicts** (Delta's rule for a compaction): commits that landed after the version it read are fine when
  they only add files; one that removed a file it rewrote (DELETE, UPDATE, MERGE, an overwrite, another
  compaction) or changed the table's metadata or protocol makes it give up.

pyarrow is imported inside the functions that need it (the ``maintain`` extra; the service never imports it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from client.contract.delta_log import table_features
from client.contract.errors import InvalidArgumentError
from client.contract.layout import data_file_name
from client.stats import parquet_footer_stats
from client.write import nan_leaves, partition_folders
from coordinator.ops.deletion_vectors import DeletionVectorError, read_deletion_vector
from coordinator.ops.maintenance import relative_to_table
from coordinator.ops.row_tracking import PRESERVED_TAG, RowTracking, assign, with_stable_columns
from coordinator.ops.row_tracking import refusal as row_tracking_refusal
from coordinator.storage import StorageBackend

OPTIMIZE = "OPTIMIZE"
ENGINE_INFO = "delta-commit-owner optimize"
#: A file whose deletion vector deletes at least this share of its rows is purged whatever its size (Delta's
#: default ``maxDeletedRowsRatio``).
MAX_DELETED_ROWS_RATIO = 0.05


def check_target_size(value: Any) -> int:
    """A target file size in bytes: a whole number above 0. Raises InvalidArgumentError."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgumentError(f"the target file size must be a number of bytes above 0, got {value!r}; "
                                   "nothing changed")
    return value


def check_min_files(value: Any) -> int:
    """The fewest small files of a partition worth a rewrite: at least 2. Raises InvalidArgumentError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise InvalidArgumentError(f"the minimum number of small files per partition must be 2 or more, got "
                                   f"{value!r}; nothing changed")
    return value


def unsupported(protocol: Mapping[str, Any] | None, metadata: Mapping[str, Any] | None) -> str | None:
    """Why this table cannot be compacted here, or None."""
    _, writer = table_features(protocol or {})
    conf = (metadata or {}).get("configuration") or {}
    if "columnMapping" in writer and conf.get("delta.columnMapping.mode", "none") != "none":
        return "it uses column mapping (physical column names)"
    return row_tracking_refusal(protocol, metadata)


def _partition_key(add: Mapping[str, Any]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted((add.get("partitionValues") or {}).items()))


@dataclass
class Bin:
    """Files of one partition rewritten into one file."""

    partition_values: dict[str, str | None]
    files: list[dict[str, Any]] = field(default_factory=list)  # their ``add`` bodies

    @property
    def size(self) -> int:
        return sum(int(f.get("size") or 0) for f in self.files)


@dataclass
class Plan:
    bins: list[Bin]
    considered: int  # files of the table

    @property
    def files(self) -> list[dict[str, Any]]:
        return [f for b in self.bins for f in b.files]

    @property
    def deletion_vectors(self) -> int:
        """Files of the plan with a deletion vector (purged by the rewrite)."""
        return sum(1 for f in self.files if f.get("deletionVector"))


def _purge(add: Mapping[str, Any]) -> bool:
    """Whether a file's deletion vector deletes so many of its rows that it is rewritten whatever its size."""
    dv = add.get("deletionVector")
    if not dv:
        return False
    try:
        records = int(json.loads(add.get("stats") or "{}").get("numRecords") or 0)
    except (TypeError, ValueError):
        return False
    return records > 0 and int(dv.get("cardinality") or 0) >= MAX_DELETED_ROWS_RATIO * records


def plan(adds: Sequence[Mapping[str, Any]], target: int, min_files: int) -> Plan:
    """The bins of a compaction of the live files ``adds`` (``add`` bodies)."""
    parts: dict[tuple[tuple[str, str | None], ...], list[dict[str, Any]]] = {}
    for a in adds:
        if int(a.get("size") or 0) < target or _purge(a):
            parts.setdefault(_partition_key(a), []).append(dict(a))
    bins: list[Bin] = []
    for key in sorted(parts, key=lambda k: [(c, "" if v is None else v) for c, v in k]):
        files = parts[key]
        if len(files) < min_files and not any(f.get("deletionVector") for f in files):
            continue
        values = dict(files[0].get("partitionValues") or {})  # in the table's order of partition columns
        current = Bin(dict(values))
        packed = [current]
        for f in sorted(files, key=lambda f: (int(f.get("size") or 0), str(f["path"]))):
            if current.files and current.size + int(f.get("size") or 0) > target:
                current = Bin(dict(values))
                packed.append(current)
            current.files.append(f)
        bins.extend(b for b in packed if len(b.files) > 1 or any(f.get("deletionVector") for f in b.files))
    return Plan(bins=bins, considered=len(adds))


def _data_schema(schema_string: str, partition_columns: Sequence[str], present: Sequence[str]) -> dict[str, Any]:
    """The Delta struct type of a rewritten file's columns: the table's, less partition columns and any column
    none of its files holds (no statistics for those: a missing bound is always safe)."""
    schema = json.loads(schema_string or "{}")
    fields = [f for f in schema.get("fields", []) if f["name"] not in partition_columns and f["name"] in present]
    return {"type": "struct", "fields": fields}


async def rewrite(backend: StorageBackend, location: str, b: Bin, *, folder: str, index: int, schema_string: str,
                  partition_columns: Sequence[str], tracking: RowTracking | None = None) -> dict[str, Any]:
    """Read the files of ``b``, write them as one Parquet file under ``<location>/<folder>/`` and return its
    ``add`` body (``dataChange`` false, statistics from its footer; row ids are assigned at commit, by
    ``optimize_actions``). With ``tracking`` that preserves row tracking, the file holds each row's stable row
    id and row commit version (``row_tracking.with_stable_columns``). Raises OSError (storage), ValueError
    (files whose columns cannot be put together, rows whose row id cannot be told)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for f in b.files:
        data = await backend.read(f"{location}/{relative_to_table(location, f['path'])}")
        t = pq.read_table(pa.BufferReader(data))
        if tracking is not None:  # by physical row index: before the deletion vector drops rows
            t = with_stable_columns(t, f, tracking)
        if f.get("deletionVector"):
            try:
                deleted = await read_deletion_vector(backend, location, f["deletionVector"])
            except DeletionVectorError as e:
                raise ValueError(f"the deletion vector of {f['path']} cannot be read: {e}") from None
            keep = [True] * t.num_rows
            for i in deleted:
                if i >= t.num_rows:
                    raise ValueError(f"the deletion vector of {f['path']} names row {i} of {t.num_rows}")
                keep[i] = False
            t = t.filter(pa.array(keep, pa.bool_()))
        tables.append(t.drop_columns([c for c in partition_columns if c in t.column_names]))
    try:
        merged = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise ValueError(f"the files of partition {b.partition_values} cannot be put together: {e}") from None
    order = [f["name"] for f in json.loads(schema_string or "{}").get("fields", []) if f["name"] in merged.column_names]
    merged = merged.select(order + [c for c in merged.column_names if c not in order])
    sink = pa.BufferOutputStream()
    try:  # timestamps as Delta keeps them (microseconds; Spark's INT96 reads back as nanoseconds here)
        pq.write_table(merged, sink, compression="snappy", write_statistics=True, coerce_timestamps="us")
    except pa.ArrowInvalid as e:
        raise ValueError(f"the files of partition {b.partition_values} cannot be rewritten: {e}") from None
    buf = sink.getvalue()
    footer = pq.read_metadata(pa.BufferReader(buf))
    data_schema = _data_schema(schema_string, partition_columns, merged.column_names)
    rel = f"{folder}/{partition_folders(b.partition_values)}{data_file_name(index)}"
    info = await backend.put_if_absent(f"{location}/{rel}", buf.to_pybytes())
    stats = parquet_footer_stats(footer, data_schema, nan_leaves(merged, data_schema))
    return {"path": quote(rel, safe="/="), "partitionValues": dict(b.partition_values), "size": int(buf.size),
            "modificationTime": int(info.modification_time or time.time() * 1000), "dataChange": False,
            "stats": json.dumps(stats, separators=(",", ":"))}


def _percentile(sizes: list[int], p: float) -> int:
    s = sorted(sizes)
    return s[min(len(s) - 1, int(p * len(s)))] if s else 0


def operation_metrics(removed: Sequence[Mapping[str, Any]], added: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Delta's OPTIMIZE metrics (its names; values as strings, as delta-spark writes them); the file sizes are
    those of the files added."""
    sizes = [int(a["size"]) for a in added]
    return {
        "numRemovedFiles": str(len(removed)),
        "numAddedFiles": str(len(added)),
        "numRemovedBytes": str(sum(int(r.get("size") or 0) for r in removed)),
        "numAddedBytes": str(sum(sizes)),
        "minFileSize": str(min(sizes, default=0)),
        "p25FileSize": str(_percentile(sizes, 0.25)),
        "p50FileSize": str(_percentile(sizes, 0.5)),
        "p75FileSize": str(_percentile(sizes, 0.75)),
        "maxFileSize": str(max(sizes, default=0)),
        "numDeletionVectorsRemoved": str(sum(1 for r in removed if r.get("deletionVector"))),
    }


def optimize_actions(*, in_commit_timestamp: int, read_version: int, version: int,
                     removed: Sequence[Mapping[str, Any]], added: Sequence[Mapping[str, Any]], auto: bool = False,
                     tracking: RowTracking | None = None,
                     domains: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The actions of the compaction commit proposed as ``version``: ``commitInfo`` first (its in-commit timestamp
    first), then a ``remove`` of each rewritten file (with its size, partition values and statistics) and an
    ``add`` of each new one, all ``dataChange`` false. With ``tracking`` that assigns row ids, the adds get fresh
    ``baseRowId`` / ``defaultRowCommitVersion`` over ``domains`` (the table's domain metadata as of
    ``version - 1``) and a ``domainMetadata`` action raises the high-water mark (``row_tracking.assign``).
    Raises ValueError (a new file without ``numRecords``, a high-water mark that cannot be read)."""
    tracking = tracking or RowTracking()
    adds, marks = assign(added, tracking, version=version, domains=domains or {})
    info = {
        "inCommitTimestamp": int(in_commit_timestamp),
        "timestamp": int(in_commit_timestamp),
        "operation": OPTIMIZE,
        "operationParameters": {"predicate": "[]", "zOrderBy": "[]", "clusterBy": "[]", "auto": bool(auto)},
        "readVersion": int(read_version),
        "isolationLevel": "SnapshotIsolation",
        "isBlindAppend": False,
        "operationMetrics": operation_metrics(removed, added),
        "engineInfo": ENGINE_INFO,
    }
    if tracking.preserves:
        info["tags"] = {PRESERVED_TAG: "true"}
    removes = []
    for r in removed:
        body: dict[str, Any] = {"path": r["path"], "deletionTimestamp": int(in_commit_timestamp), "dataChange": False,
                                "extendedFileMetadata": True, "partitionValues": dict(r.get("partitionValues") or {}),
                                "size": int(r.get("size") or 0)}
        for key in ("stats", "tags", "deletionVector", "baseRowId", "defaultRowCommitVersion"):
            if r.get(key) is not None:
                body[key] = r[key]
        removes.append({"remove": body})
    return [{"commitInfo": info}, *removes, *({"add": a} for a in adds), *marks]


def conflict(location: str, missed: Sequence[tuple[int, Sequence[Mapping[str, Any]]]],
             rewritten: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the compaction of ``rewritten`` (``add`` bodies) cannot be committed after the commits it ``missed``
    (``(version, actions)``), or None when it can (they only added files, or removed others)."""
    mine = {relative_to_table(location, str(f["path"])) for f in rewritten}
    for version, actions in missed:
        for a in actions:
            if "remove" in a and relative_to_table(location, str(a["remove"]["path"])) in mine:
                return f"version {version} removed {a['remove']['path']}, one of the files it rewrote"
            if "metaData" in a or "protocol" in a:
                return f"version {version} changed the table's {'metadata' if 'metaData' in a else 'protocol'}"
    return None


__all__ = ["Bin", "MAX_DELETED_ROWS_RATIO", "OPTIMIZE", "Plan", "check_min_files", "check_target_size", "conflict", "operation_metrics",
           "optimize_actions", "plan", "rewrite", "unsupported"]
