"""`commit-owner maintain` (checkpoints) and `commit-owner vacuum` (unreferenced data files), straight against
the database and storage. docs/maintenance.md shows both as run."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from client.checkpoint import read_checkpoint_parts
from client.contract.delta_log import parse_actions
from client.contract.errors import InvalidArgumentError
from client.contract.layout import LOG_DIR, deletion_vector_file, delta_file, log_dir, parse_delta_file, staged_file
from client.snapshot import complete_checkpoints
from coordinator.ops.checkpoints import (
    DEFAULT_DELETED_FILE_RETENTION,
    DELETED_FILE_RETENTION,
    TableState,
    parse_duration,
)
from coordinator.ops.context import opened, resolve_table
from coordinator.ops.logcleanup import CleanupReport
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageBackend
from coordinator.store import CommitRow, OwnershipStore, TableRow
from coordinator.store.maintenance import MaintenanceLog

log = logging.getLogger("commit_owner.maintain")


def now_ms() -> int:
    return int(time.time() * 1000)


async def clean_table_log(backend: StorageBackend, t: TableRow, properties: dict[str, str], dry_run: bool) -> CleanupReport:
    """Log cleanup of one table (coordinator/ops/logcleanup.py). Raises InvalidArgumentError (a bad
    ``delta.logRetentionDuration``: nothing deleted), UnavailableError (storage failed)."""
    from coordinator.ops.logcleanup import clean_log, log_retention_seconds

    seconds = log_retention_seconds(properties)
    return await clean_log(backend, t.location, t.latest_backfilled_version, seconds, now_ms=now_ms(),
                           dry_run=dry_run)


# -- vacuum -----------------------------------------------------------------------------------------------------

@dataclass
class VacuumReport:
    location: str
    retention_seconds: float
    oldest_kept_version: int
    latest_version: int
    dry_run: bool
    files: list[dict[str, Any]] = field(default_factory=list)  # {path, size, modificationTime}
    deleted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"location": self.location, "dryRun": self.dry_run, "retentionSeconds": self.retention_seconds,
                "oldestKeptVersion": self.oldest_kept_version, "latestVersion": self.latest_version,
                "files": self.files, "fileCount": len(self.files), "bytes": sum(f["size"] for f in self.files),
                "deleted": self.deleted}


def relative_to_table(location: str, path: str) -> str:
    """A data file path of an action (a URI: relative or absolute, URL-encoded either way) relative to the table
    root, decoded (the name storage lists)."""
    if "://" in path:
        return unquote(path[len(location) + 1:]) if path.startswith(location + "/") else path
    return unquote(path)


def _files_of(location: str, add: dict[str, Any]) -> list[str]:
    """The files an ``add`` needs, relative to the table: its data file and its deletion vector's file."""
    out = [relative_to_table(location, add["path"])]
    dv = add.get("deletionVector") or {}
    dv_file = deletion_vector_file(dv.get("storageType"), dv.get("pathOrInlineDv")) if dv else None
    if dv_file is not None:
        out.append(dv_file if dv.get("storageType") == "u" else relative_to_table(location, dv_file))
    return out


async def _version_time(backend: StorageBackend, location: str, v: int, actions: list[dict[str, Any]]) -> int:
    """When version ``v`` was committed: its inCommitTimestamp, else commitInfo.timestamp, else the file's mtime."""
    for a in actions:
        ci = a.get("commitInfo")
        if ci:
            for key in ("inCommitTimestamp", "timestamp"):
                if ci.get(key) is not None:
                    return int(ci[key])
    return (await backend.info(delta_file(location, v))).modification_time


@dataclass
class _Log:
    """A table's published log as vacuum needs it: where replay starts and every version after it."""

    start: int  # a checkpoint's version, or -1 (replay from version 0)
    start_state: TableState
    versions: list[tuple[int, int, list[dict[str, Any]]]]  # (version, commit time ms, actions)
    pending: set[str]  # files of ratified commits not yet published
    latest: int
    unpublished: list[tuple[int, list[dict[str, Any]]]] = field(default_factory=list)  # (version, actions)

    @property
    def properties(self) -> dict[str, str]:
        state = TableState(metadata=self.start_state.metadata)
        for v, _, actions in self.versions:
            state.apply(v, [a for a in actions if "metaData" in a])
        return state.properties

    def referenced(self, location: str, horizon_ms: int) -> tuple[set[str], int]:
        """The files that a version from the newest one committed at or before ``horizon_ms`` onward needs,
        and that version (versions older than it need not stay readable)."""
        state = TableState(protocol=self.start_state.protocol, metadata=self.start_state.metadata,
                         adds=dict(self.start_state.adds))
        oldest = max(self.start, 0)
        keep = {f for a in state.adds.values() for f in _files_of(location, a)}
        for v, when, actions in self.versions:
            state.apply(v, actions)
            if when <= horizon_ms:
                oldest = v
                keep = {f for a in state.adds.values() for f in _files_of(location, a)}
            else:
                keep.update(f for a in actions if "add" in a for f in _files_of(location, a["add"]))
        return keep | self.pending, oldest


async def read_log(store: OwnershipStore, backend: StorageBackend, t: TableRow, *, newest: bool = False) -> _Log:
    """Read the published log once, from the oldest point it is complete from: version 0, or a checkpoint
    followed by every later ``<v>.json`` (a table whose early commits are gone); with ``newest``, from the newest
    such point (the latest state is all that is needed). Raises InvalidArgumentError."""
    names = await backend.list_names(log_dir(t.location))
    top = t.latest_backfilled_version
    deltas = {v for v in map(parse_delta_file, names) if v is not None and v <= top}
    checkpoints = complete_checkpoints(names)
    starts = [-1] if 0 in deltas else []
    starts += sorted(v for v in checkpoints if v <= top)
    if newest:
        starts.reverse()
    start = next((c for c in starts if all(v in deltas for v in range(c + 1, top + 1))), None)
    if start is None:
        raise InvalidArgumentError(f"{t.location}: the published log is incomplete (no version 0 nor checkpoint "
                                   f"from which every <v>.json up to {top} is present); nothing "
                                   f"{'changed' if newest else 'deleted'}")
    state = TableState()
    if start >= 0:
        parts = [await backend.read(f"{log_dir(t.location)}/{n}") for n in checkpoints[start]]
        state.apply(start, read_checkpoint_parts(parts))
    versions = []
    for v in range(start + 1, top + 1):
        actions = parse_actions(await backend.read(delta_file(t.location, v)))
        versions.append((v, await _version_time(backend, t.location, v, actions), actions))
    pending: set[str] = set()
    unpublished: list[tuple[int, list[dict[str, Any]]]] = []
    latest = top
    for row in await store.unbackfilled(t.table_id):  # ratified, not yet published: their files stay
        actions = parse_actions(await ratified_bytes(backend, t, row))
        pending.update(f for a in actions if "add" in a for f in _files_of(t.location, a["add"]))
        latest = max(latest, row.version)
        unpublished.append((row.version, actions))
    return _Log(start=start, start_state=state, versions=versions, pending=pending, latest=latest,
                unpublished=sorted(unpublished, key=lambda va: va[0]))


async def ratified_bytes(backend: StorageBackend, t: TableRow, row: CommitRow) -> bytes:
    """A ratified commit's bytes: the row keeps them until it is published (decision 43), else its staged file."""
    if row.body is not None:
        return row.body
    return await backend.read(staged_file(t.location, t.commit_dir, row.file_name))


async def versions_since(store: OwnershipStore, backend: StorageBackend, t: TableRow, start: int,
                         end: int | None = None) -> list[tuple[int, list[dict[str, Any]]]]:
    """The actions of versions ``start`` to ``end`` (default: the table's latest ratified version), ascending:
    those not yet published from their rows, the others from their ``<v>.json``. The rows are read after the
    table's latest version, so a version missing from them was published before. Raises FileNotFoundError (a
    version cleaned up below a checkpoint), UnavailableError."""
    if end is None:
        end = (await store.get_table(t.table_id)).latest_version
    rows = {r.version: r for r in await store.unbackfilled(t.table_id, up_to=end)}
    out = []
    for v in range(start, end + 1):
        row = rows.get(v)
        data = await ratified_bytes(backend, t, row) if row is not None else await backend.read(delta_file(t.location, v))
        out.append((v, parse_actions(data)))
    return out


def _hidden(rel: str) -> bool:
    """Paths vacuum never touches: the log, and any folder or file starting with ``_`` or ``.`` (Delta's rule)."""
    parts = rel.split("/")
    return parts[0] == LOG_DIR or any(p.startswith(("_", ".")) for p in parts)


async def run_vacuum(settings: Settings, ref: str, *, retention: str | None, dry_run: bool, force: bool,
               metrics_file: str | None = None) -> dict[str, Any]:
    """List (dry run) or delete the data files of ``ref`` that no version inside the retention window references
    and that are older than the retention. Raises InvalidArgumentError (refused, nothing deleted),
    TableNotFoundError, UnavailableError."""

    async with opened(settings) as (store, storage):
        t = await resolve_table(store, ref)
        if t.status in ("FENCED", "RELEASED", "DROPPED"):
            raise InvalidArgumentError(f"{t.location} is {t.status}: its log is not (or no longer) the owner's; "
                                       "nothing deleted")
        started = now_ms()
        rep = await vacuum_table(store, storage.for_uri(t.location), t, retention, dry_run, force)
        if not dry_run:
            await MaintenanceLog(store.db).note(t.table_id, "vacuum", "done", trigger="command", started_at=started,
                                                figures=vacuum_figures(rep))
        if metrics_file:
            from coordinator.runtime.metrics import MaintenanceMetrics

            metrics = MaintenanceMetrics()
            if not dry_run:
                metrics.vacuum_files.inc(rep.deleted)
                metrics.vacuum_bytes.inc(sum(f["size"] for f in rep.files))
            metrics.write(metrics_file)
        return rep.to_json()


async def vacuum_table(store: OwnershipStore, backend: StorageBackend, t: TableRow, retention: str | None, dry_run: bool,
                  force: bool) -> VacuumReport:
    now = now_ms()
    log_ = await read_log(store, backend, t)
    table_min_text = log_.properties.get(DELETED_FILE_RETENTION, DEFAULT_DELETED_FILE_RETENTION)
    table_min = parse_duration(table_min_text, f"table property {DELETED_FILE_RETENTION}")
    seconds = table_min if retention is None else parse_duration(retention, "--retention")
    if seconds < table_min and not force:
        raise InvalidArgumentError(f"--retention {retention} is shorter than the table's {DELETED_FILE_RETENTION} "
                                   f"({table_min_text}): time travel and running readers could lose files; pass "
                                   "--force to do it anyway; nothing deleted")
    horizon = now - int(seconds * 1000)
    keep, oldest = log_.referenced(t.location, horizon)
    latest = log_.latest
    rep = VacuumReport(location=t.location, retention_seconds=seconds, oldest_kept_version=oldest,
                       latest_version=latest, dry_run=dry_run)
    for f in sorted(await backend.walk(t.location), key=lambda f: f.path):
        rel = f.path[len(t.location) + 1:]
        if _hidden(rel) or rel in keep or f.modification_time > horizon:
            continue
        rep.files.append({"path": rel, "size": f.size, "modificationTime": f.modification_time})
    if not dry_run:
        for item in rep.files:
            await backend.delete(f"{t.location}/{item['path']}")
            rep.deleted += 1
        if t.location.startswith("file://"):
            remove_empty_dirs(t.location, [i["path"] for i in rep.files])
    return rep


def vacuum_figures(rep: VacuumReport) -> dict[str, Any]:
    """What the record keeps of a vacuum (its report less the file list)."""
    return {"deleted": rep.deleted, "bytes": sum(f["size"] for f in rep.files),
            "retentionSeconds": rep.retention_seconds, "oldestKeptVersion": rep.oldest_kept_version}


def remove_empty_dirs(location: str, removed: list[str]) -> None:
    """Local tables: the folders (e.g. ``batch-*/``) that vacuum emptied go too; object stores have no folders."""
    import os

    from client.contract.layout import local_path

    root = local_path(location)
    dirs = {os.path.dirname(p) for p in removed if "/" in p}
    for d in sorted(dirs, key=lambda d: -d.count("/")):
        path = os.path.join(root, d)
        while path != root:
            try:
                os.rmdir(path)  # only succeeds when empty
            except OSError:
                break
            path = os.path.dirname(path)
