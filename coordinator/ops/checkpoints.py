"""Classic Parquet checkpoints of owned tables, written off the commit path (`commit-owner maintain`).

A checkpoint is written only of a PUBLISHED version (the Delta managed-commits rule, docs/protocol.md: checkpoints cover backfilled
versions only): the newest version considered is the table's ``latest_backfilled_version`` in the database,
and every ``<v>.json`` replayed must be in ``_delta_log``. One checkpoint per multiple of the table property
``delta.checkpointInterval`` (default 10), each ``<v:020>.checkpoint.parquet`` written put-if-absent (a crash
leaves no partial file a reader can see), then ``_last_checkpoint`` (a hint, overwritten, never moved back).

pyarrow is imported here only: it is not a dependency of the service (extra ``maintain``), so checkpoints
run in the maintenance command, never in ``serve`` (docs/decisions.md, "Checkpoints and vacuum run in a maintenance command").
"""

from __future__ import annotations

import io
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from client.checkpoint import read_checkpoint_parts
from client.contract.delta_log import parse_actions
from client.contract.errors import InvalidArgumentError
from client.contract.layout import (
    LAST_CHECKPOINT,
    checkpoint_file_names,
    delta_file,
    delta_file_name,
    log_dir,
    parse_delta_file,
)
from client.snapshot import LogState, complete_checkpoints
from coordinator.storage import StorageBackend

log = logging.getLogger("commit_owner.maintain")

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
DEFAULT_CHECKPOINT_INTERVAL = 10


DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
DEFAULT_DELETED_FILE_RETENTION = "interval 7 days"

_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
          "d": 86400, "day": 86400, "w": 604800, "week": 604800}
_DURATION = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*$", re.I)


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds of ``7d``, ``12h``, ``30m``, ``90s`` or Delta's ``interval 7 days``. Raises InvalidArgumentError."""
    m = _DURATION.match(text or "")
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise InvalidArgumentError(f"{what} {text!r} is not a duration: write e.g. 7d, 12h, 30m, 90s or "
                                   "'interval 7 days'")
    return float(m.group(1)) * _UNITS[unit]


class CheckpointError(Exception):
    """A table whose checkpoint cannot be written now (the reason is the message); nothing was written."""


class TableState(LogState):
    """The replayed log of a table (client.snapshot.LogState) with the table properties maintenance reads."""

    @property
    def properties(self) -> dict[str, str]:
        return dict((self.metadata or {}).get("configuration") or {})

    @property
    def interval(self) -> int:
        raw = self.properties.get(CHECKPOINT_INTERVAL)
        try:
            n = int(raw) if raw is not None else DEFAULT_CHECKPOINT_INTERVAL
        except ValueError:
            n = DEFAULT_CHECKPOINT_INTERVAL
        return n if n > 0 else DEFAULT_CHECKPOINT_INTERVAL

    @property
    def tombstone_retention_ms(self) -> int:
        """``delta.deletedFileRetentionDuration`` (default 7 days): how long a tombstone stays in checkpoints."""
        text = self.properties.get(DELETED_FILE_RETENTION, DEFAULT_DELETED_FILE_RETENTION)
        try:
            return int(parse_duration(text) * 1000)
        except InvalidArgumentError:
            return int(parse_duration(DEFAULT_DELETED_FILE_RETENTION) * 1000)

    @property
    def v2_checkpoints(self) -> bool:
        p = self.protocol or {}
        return "v2Checkpoint" in (p.get("readerFeatures") or []) or "v2Checkpoint" in (p.get("writerFeatures") or [])


# -- the Parquet layout of a classic checkpoint (field names from Delta's PROTOCOL.md) -----------------------

def _schema(v2: bool = False) -> Any:
    """The checkpoint's columns; ``v2`` adds ``checkpointMetadata`` (a V2-spec checkpoint, for tables with the
    ``v2Checkpoint`` feature)."""
    import pyarrow as pa

    s, i64, i32, b = pa.string(), pa.int64(), pa.int32(), pa.bool_()
    smap = pa.map_(s, s)
    dv = pa.struct([("storageType", s), ("pathOrInlineDv", s), ("offset", i32), ("sizeInBytes", i32),
                    ("cardinality", i64)])
    columns = [
        ("txn", pa.struct([("appId", s), ("version", i64), ("lastUpdated", i64)])),
        ("add", pa.struct([("path", s), ("partitionValues", smap), ("size", i64), ("modificationTime", i64),
                           ("dataChange", b), ("stats", s), ("tags", smap), ("deletionVector", dv),
                           ("baseRowId", i64), ("defaultRowCommitVersion", i64), ("clusteringProvider", s)])),
        ("remove", pa.struct([("path", s), ("deletionTimestamp", i64), ("dataChange", b),
                              ("extendedFileMetadata", b), ("partitionValues", smap), ("size", i64), ("tags", smap),
                              ("deletionVector", dv), ("baseRowId", i64), ("defaultRowCommitVersion", i64)])),
        ("metaData", pa.struct([("id", s), ("name", s), ("description", s),
                                ("format", pa.struct([("provider", s), ("options", smap)])),
                                ("schemaString", s), ("partitionColumns", pa.list_(s)), ("configuration", smap),
                                ("createdTime", i64)])),
        ("protocol", pa.struct([("minReaderVersion", i32), ("minWriterVersion", i32),
                                ("readerFeatures", pa.list_(s)), ("writerFeatures", pa.list_(s))])),
        ("domainMetadata", pa.struct([("domain", s), ("configuration", s), ("removed", b)])),
    ]
    if v2:
        columns.append(("checkpointMetadata", pa.struct([("version", i64), ("tags", smap)])))
    return pa.schema(columns)


def _as_row(value: Any, typ: Any) -> Any:
    """A JSON action body shaped for its Arrow type: maps as (key, value) pairs, unknown fields dropped."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(typ):
        return [(str(k), None if v is None else str(v)) for k, v in dict(value).items()]
    if pa.types.is_struct(typ):
        return {typ.field(i).name: _as_row(value.get(typ.field(i).name), typ.field(i).type) for i in range(typ.num_fields)}
    if pa.types.is_list(typ):
        return [_as_row(v, typ.value_type) for v in value]
    if pa.types.is_string(typ) and not isinstance(value, str):
        return json.dumps(value)  # e.g. stats given as an object
    return value


def checkpoint_bytes(state: TableState, *, min_tombstone_ms: int) -> tuple[bytes, int, int]:
    """The Parquet bytes of a checkpoint of ``state``, its number of actions and of add files.

    Tombstones whose ``deletionTimestamp`` is older than ``min_tombstone_ms`` have expired and are left out.
    A table with the ``v2Checkpoint`` feature gets a classic-named V2-spec checkpoint: the same single file
    with one ``checkpointMetadata`` action naming the version (every action inline, so no sidecar).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema(state.v2_checkpoints)
    rows: list[dict[str, Any]] = []

    def row(kind: str, body: dict[str, Any]) -> None:
        rows.append({kind: _as_row(body, schema.field(kind).type)})

    if state.v2_checkpoints:
        row("checkpointMetadata", {"version": state.version})
    row("protocol", state.protocol or {})
    row("metaData", state.metadata or {})
    for t in state.txns.values():
        row("txn", t)
    for d in state.domains.values():
        row("domainMetadata", d)
    for a in state.adds.values():
        row("add", a)
    for r in state.removes.values():
        if int(r.get("deletionTimestamp") or 0) >= min_tombstone_ms:
            row("remove", r)
    table = pa.Table.from_pylist(rows, schema=schema)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue(), len(rows), len(state.adds)


# -- finding and writing ---------------------------------------------------------------------------------------

@dataclass
class CheckpointReport:
    location: str
    written: list[int] = field(default_factory=list)
    already_present: list[int] = field(default_factory=list)
    last_checkpoint: int | None = None
    published: int = -1
    skipped: str | None = None
    properties: dict[str, str] = field(default_factory=dict)  # the table's, at ``published``

    @property
    def lag(self) -> int:
        """Published versions a reader replays as JSON on top of the newest checkpoint."""
        return max(0, self.published - (-1 if self.last_checkpoint is None else self.last_checkpoint))

    def to_json(self) -> dict[str, Any]:
        return {"location": self.location, "written": self.written, "alreadyPresent": self.already_present,
                "lastCheckpoint": self.last_checkpoint, "publishedThrough": self.published,
                "lag": self.lag,
                **({"skipped": self.skipped} if self.skipped else {})}


async def _read_hint(backend: StorageBackend, location: str) -> dict[str, Any] | None:
    try:
        hint = json.loads(await backend.read(f"{log_dir(location)}/{LAST_CHECKPOINT}"))
    except (FileNotFoundError, ValueError):
        return None
    return hint if isinstance(hint, dict) else None


async def checkpoint_table(backend: StorageBackend, location: str, published: int, *, now_ms: int) -> CheckpointReport:
    """Write the missing checkpoints of ``location`` up to its published version ``published``.

    Replays from the newest complete checkpoint at or below ``published`` (or version 0) and writes one
    checkpoint at each multiple of the table's interval above it, and brings ``_last_checkpoint`` up to the
    newest one. Raises CheckpointError, OSError.
    """
    rep = CheckpointReport(location=location, published=published)
    names = await backend.list_names(log_dir(location))
    deltas = {v for v in map(parse_delta_file, names) if v is not None}
    checkpoints = complete_checkpoints(names)
    have = sorted(v for v in checkpoints if v <= published)
    rep.last_checkpoint = have[-1] if have else None
    if published < 1:
        return rep
    state = TableState()
    start = 0
    if have:
        base = have[-1]
        parts = [await backend.read(f"{log_dir(location)}/{n}") for n in checkpoints[base]]
        state.apply(base, read_checkpoint_parts(parts, tombstones=True))
        start = base + 1
    for v in range(start, published + 1):
        if v not in deltas:
            raise CheckpointError(f"{location}: _delta_log/{delta_file_name(v)} is not published; no checkpoint "
                                  f"above version {state.version} can be written")
        state.apply(v, parse_actions(await backend.read(delta_file(location, v))))
        if v == 0 or v % state.interval or v in checkpoints:
            if v in checkpoints:
                rep.already_present.append(v)
            continue
        data, size, n_add = checkpoint_bytes(state, min_tombstone_ms=now_ms - state.tombstone_retention_ms)
        (name,) = checkpoint_file_names(v)
        log.info("checkpoint of %s: writing version %d (%d actions, %d bytes)", location, v, size, len(data))
        try:
            await backend.put_if_absent(f"{log_dir(location)}/{name}", data)
            rep.written.append(v)
        except FileExistsError:  # another maintenance run wrote it first (the same state, so as good as ours)
            rep.already_present.append(v)
        rep.last_checkpoint = v
        await _advance_hint(backend, location, {"version": v, "size": size, "sizeInBytes": len(data),
                                                "numOfAddFiles": n_add})
    rep.properties = state.properties
    if rep.last_checkpoint is not None:  # e.g. a run killed between the checkpoint and its hint
        hint = await _read_hint(backend, location)
        stale = hint is None or not isinstance(hint.get("version"), int) or hint["version"] < rep.last_checkpoint
        if stale and len(checkpoints.get(rep.last_checkpoint, ["single"])) == 1:
            await _advance_hint(backend, location, await _hint_of(backend, location, rep.last_checkpoint))
    return rep


async def _hint_of(backend: StorageBackend, location: str, version: int) -> dict[str, Any]:
    """The ``_last_checkpoint`` content for an existing single-file checkpoint (its size from the footer)."""
    import pyarrow.parquet as pq

    (name,) = checkpoint_file_names(version)
    data = await backend.read(f"{log_dir(location)}/{name}")
    return {"version": version, "size": pq.ParquetFile(io.BytesIO(data)).metadata.num_rows, "sizeInBytes": len(data)}


async def _advance_hint(backend: StorageBackend, location: str, hint: dict[str, Any]) -> None:
    """Overwrite ``_last_checkpoint`` unless it already names a newer checkpoint."""
    old = await _read_hint(backend, location)
    if old is not None and isinstance(old.get("version"), int) and old["version"] > hint["version"]:
        return
    await backend.replace(f"{log_dir(location)}/{LAST_CHECKPOINT}", json.dumps(hint).encode())
