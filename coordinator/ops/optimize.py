"""`commit-owner optimize TABLE`: one bin-packing compaction of an owned table, committed by the owner through
its own commit path (``coordinator/core/service.py``, the same ratification every writer's commit goes
through), straight against the database and storage like the other maintenance commands. The plan, the
rewrite, the actions and the conflict rule are ``coordinator/ops/compaction.py``; docs/maintenance.md shows it
run; docs/decisions.md, entry 76, says why.

Order of work: check the request (target size, the table is the owner's and live, its features), read the
table at its latest ratified version, plan; a dry run stops there. Write the new files (a fresh ``batch-*``
folder), then propose the commit at the next version. A version conflict hands over the commits it missed
(the owner's unseen commits, else the log read again): when none of them removed a file it rewrote nor changed
the metadata or protocol, it moves onto them and proposes again; else it gives up, deletes the files it wrote
(nothing referenced them) and raises TableChangedError. Once committed, the version is published so that every
Delta reader sees it.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from client.actions import next_in_commit_timestamp
from client.contract.delta_log import parse_actions
from client.contract.errors import (
    CommitFailedError,
    CommitOwnerError,
    CommitStateUnknownError,
    CommitVersionConflictError,
    InvalidArgumentError,
    PermissionDeniedError,
    TableChangedError,
    TableNotFoundError,
)
from client.contract.layout import delta_file, new_batch_folder
from client.http import encode_actions
from coordinator.ops.checkpoints import TableState
from coordinator.ops.compaction import (
    Plan,
    check_min_files,
    check_target_size,
    conflict,
    optimize_actions,
    plan,
    rewrite,
    unsupported,
)
from coordinator.ops.context import opened, resolve_table
from coordinator.ops.maintenance import read_log, relative_to_table, remove_empty_dirs, versions_since
from coordinator.ops.row_tracking import RowTracking
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageBackend, StorageRouter
from coordinator.store import OwnershipStore, TableRow
from coordinator.store.maintenance import MaintenanceLog

log = logging.getLogger("commit_owner.optimize")

#: Proposals of one compaction before it stops (each lost race moves it onto the commits that won).
MAX_ATTEMPTS = 50

BeforeCommit = Callable[[int], Awaitable[None] | None]


@dataclass
class _Table:
    """A table as the compaction reads it: its state at ``state.version`` and the actions of each version replayed."""

    state: TableState
    versions: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


async def _read_table(store: OwnershipStore, backend: StorageBackend, t: TableRow) -> _Table:
    """The table at its latest ratified version: the published log (from its newest checkpoint, else version 0)
    and then the ratified commits not yet published (from their rows), and those published between the two reads
    from their ``<v>.json``: one pass, however busy the table (it once started over, and under a steady writer
    never caught up). Raises InvalidArgumentError (an incomplete log)."""
    log_ = await read_log(store, backend, t, newest=True)
    s = log_.start_state
    state = TableState(version=s.version, protocol=s.protocol, metadata=s.metadata, adds=dict(s.adds),
                       txns=dict(s.txns), domains=dict(s.domains), ict=s.ict, timestamp=s.timestamp)
    out = _Table(state)
    for v, _, actions in log_.versions:
        state.apply(v, actions)
        out.versions[v] = actions
    pending = dict(log_.unpublished)
    for v in range(state.version + 1, log_.latest + 1):  # ratified after the published log's newest version
        found = pending.get(v)
        if found is None:  # published between the listing of the log and the read of the rows
            try:
                found = parse_actions(await backend.read(delta_file(t.location, v)))
            except FileNotFoundError:
                raise InvalidArgumentError(f"{t.location}: version {v} is neither published nor a ratified "
                                           "commit waiting to be; nothing changed") from None
        state.apply(v, found)
        out.versions[v] = found
    return out


@dataclass
class OptimizeReport:
    location: str
    table_id: str
    target_size: int
    dry_run: bool
    read_version: int
    files_before: int
    bytes_before: int
    plan: Plan
    added: list[dict[str, Any]] = field(default_factory=list)
    version: int | None = None
    published_version: int | None = None
    rebases: int = 0
    seconds: float = 0.0
    reason: str | None = None  # why the policy asked for it (commit-owner maintain)

    def to_json(self) -> dict[str, Any]:
        removed = self.plan.files if (self.version is not None or self.dry_run) else []
        # a dry run counts one new file per bin (what a run would write)
        added = len(self.plan.bins) if self.dry_run else len(self.added) if self.version is not None else 0
        return {
            "location": self.location, "tableId": self.table_id, "dryRun": self.dry_run,
            "targetSize": self.target_size, "readVersion": self.read_version, "version": self.version,
            "publishedVersion": self.published_version, "rebases": self.rebases,
            "partitions": len({tuple(sorted(b.partition_values.items())) for b in self.plan.bins}),
            "bins": len(self.plan.bins), "deletionVectorsPurged": self.plan.deletion_vectors if removed else 0,
            "filesBefore": self.files_before, "bytesBefore": self.bytes_before,
            "filesRemoved": len(removed), "bytesRemoved": sum(int(f.get("size") or 0) for f in removed),
            "filesAdded": added, "bytesAdded": sum(int(a["size"]) for a in self.added),
            "filesAfter": self.files_before - len(removed) + added,
            "seconds": round(self.seconds, 3),
            **({"reason": self.reason} if self.reason is not None else {}),
        }


async def run_optimize(settings: Settings, ref: str, *, target_size: int | None = None,
                       min_files: int | None = None, dry_run: bool = False,
                       before_commit: BeforeCommit | None = None, metrics_file: str | None = None) -> dict[str, Any]:
    """``compact`` (below), with its figures written to ``metrics_file`` (Prometheus text format) when given."""
    if metrics_file is None:
        return await compact(settings, ref, target_size=target_size, min_files=min_files, dry_run=dry_run,
                             before_commit=before_commit)
    from coordinator.runtime.metrics import MaintenanceMetrics

    metrics = MaintenanceMetrics()
    try:
        out = await compact(settings, ref, target_size=target_size, min_files=min_files, dry_run=dry_run,
                            before_commit=before_commit)
    except TableChangedError:
        metrics.compaction_gave_up.inc()
        metrics.write(metrics_file)
        raise
    if out["version"] is not None:
        metrics.compaction_files_removed.inc(out["filesRemoved"])
        metrics.compaction_files_added.inc(out["filesAdded"])
        metrics.compaction_bytes_removed.inc(out["bytesRemoved"])
        metrics.compaction_bytes_added.inc(out["bytesAdded"])
    metrics.write(metrics_file)
    return out


async def compact(settings: Settings, ref: str, *, target_size: int | None = None, min_files: int | None = None,
                  dry_run: bool = False, before_commit: BeforeCommit | None = None) -> dict[str, Any]:
    """Compact ``ref`` (a table id, name or location) once; returns the report (``OptimizeReport.to_json``).

    ``target_size`` (bytes) and ``min_files`` default to the settings ``optimize_target_file_bytes`` and
    ``optimize_min_small_files``. ``before_commit`` is called (and awaited) with the version about to be
    proposed, before every proposal. Raises InvalidArgumentError (bad input, a table that is not the owner's
    live table, or one it cannot compact; nothing changed), TableNotFoundError, TableChangedError (a concurrent
    commit removed a file it rewrote: nothing committed, its files deleted), CommitFailedError (refused: its
    files deleted), UnavailableError (before its commit), CommitStateUnknownError (the database or storage
    failed during its commit: its files are kept, the commit may have landed).
    """
    target = check_target_size(settings.optimize_target_file_bytes if target_size is None else target_size)
    least = check_min_files(settings.optimize_min_small_files if min_files is None else min_files)
    async with opened(settings) as (store, storage):
        t = await resolve_table(store, ref)
        runs, started = MaintenanceLog(store.db), int(time.time() * 1000)
        try:
            out = await compact_table(settings, store, storage, t, target=target, min_files=least, dry_run=dry_run,
                                      before_commit=before_commit)
        except (TableChangedError, CommitFailedError, CommitStateUnknownError) as e:
            await runs.note(t.table_id, "optimize", "failed", trigger="command", started_at=started, message=str(e))
            raise
        assert out is not None  # (no ``due``: always a report)
        if out["version"] is not None:
            await runs.note(t.table_id, "optimize", "done", trigger="command", started_at=started,
                            figures=record_figures(out))
        return out


def record_figures(report: dict[str, Any]) -> dict[str, Any]:
    """What the maintenance record keeps of a compaction's report."""
    return {k: report[k] for k in ("version", "reason", "filesRemoved", "filesAdded", "bytesRemoved", "bytesAdded",
                                   "deletionVectorsPurged", "rebases", "seconds") if k in report}


async def compact_table(settings: Settings, store: OwnershipStore, storage: StorageRouter, t: TableRow, *,
                        target: int, min_files: int, dry_run: bool = False,
                        before_commit: BeforeCommit | None = None,
                        due: Callable[[TableState], tuple[str, int] | None] | None = None) -> dict[str, Any] | None:
    """``compact`` of the table ``t`` on an open store and storage, with a checked ``target`` and ``min_files``.
    With ``due`` (the maintain worker's policy), the table's state is handed to it once read: when it answers
    None, nothing is done and None is returned; else it answers why (in the report's ``reason``) and the target
    size to use instead of ``target``. What ``due`` raises (a bad table property) goes through, nothing done."""
    from backfill.worker import Backfiller
    from coordinator.core.service import CommitService

    started = time.monotonic()
    least = min_files
    if t.status != "ACTIVE" or not t.accepting:
        raise InvalidArgumentError(f"{t.location} is {t.status}: the owner takes no commits for it (dropped, "
                                   "handed back or fenced), so it compacts nothing; nothing changed")
    backend = storage.for_uri(t.location)
    table = await _read_table(store, backend, t)
    state = table.state
    files = list(state.adds.values())
    reason = None
    if due is not None:
        asked = due(state)
        if asked is None:
            return None
        reason, target = asked
    why = unsupported(state.protocol, state.metadata)
    if why is not None:
        raise InvalidArgumentError(f"{t.location} cannot be compacted by the owner: {why}; nothing changed")
    p = plan(files, target, least)
    rep = OptimizeReport(location=t.location, table_id=t.table_id, target_size=target, dry_run=dry_run,
                         read_version=state.version, files_before=len(files),
                         bytes_before=sum(int(f.get("size") or 0) for f in files), plan=p, reason=reason)
    if dry_run or not p.bins:
        rep.seconds = time.monotonic() - started
        return rep.to_json()
    metadata = state.metadata or {}
    partition_columns = list(metadata.get("partitionColumns") or [])
    folder = new_batch_folder()
    tracking = RowTracking.of(state.protocol, state.metadata)  # (``unsupported`` refused what it cannot keep)
    committed = False
    try:
        for i, b in enumerate(p.bins):
            try:
                rep.added.append(await rewrite(backend, t.location, b, folder=folder, index=i,
                                               schema_string=metadata.get("schemaString") or "{}",
                                               partition_columns=partition_columns, tracking=tracking))
            except ValueError as e:  # files it cannot put together, a deletion vector it cannot read
                raise InvalidArgumentError(f"{t.location} cannot be compacted: {e}; nothing changed") from None
        service = CommitService(settings, store, storage)
        while True:
            version = state.version + 1
            if before_commit is not None:
                maybe = before_commit(version)
                if inspect.isawaitable(maybe):
                    await maybe
            try:  # built again for each proposal: fresh row ids over the high-water mark the winners left
                actions = optimize_actions(in_commit_timestamp=next_in_commit_timestamp(state.ict),
                                           read_version=state.version, version=version, removed=p.files,
                                           added=rep.added, tracking=tracking, domains=state.domains)
            except ValueError as e:  # a new file without numRecords, a high-water mark it cannot read
                raise InvalidArgumentError(f"{t.location} cannot be compacted: {e}; nothing changed") from None
            try:
                await service.commit(t.table_id, version, encode_actions(actions), None)
            except CommitVersionConflictError as e:
                rep.rebases += 1
                missed = await _missed(service, store, backend, t, version, e)
                reason = conflict(t.location, missed, p.files)
                if reason is not None:
                    raise TableChangedError(
                        f"compaction of {t.location} gave up: {reason} after it read version "
                        f"{rep.read_version}; nothing was committed and its new files are deleted",
                        latest_table_version=e.latest_table_version) from None
                if rep.rebases >= MAX_ATTEMPTS:
                    raise
                for v, acts in missed:
                    state.apply(v, list(acts))
                continue
            except (CommitFailedError, TableNotFoundError, InvalidArgumentError, PermissionDeniedError):
                raise  # refused for certain (a location outside the allowed roots too): nothing references its files
            except BaseException as e:  # the database or storage failed mid-way: the version may have landed
                committed = True  # so its files stay (vacuum removes them if it did not)
                if not isinstance(e, Exception):
                    raise  # cancelled, interrupted
                raise CommitStateUnknownError(
                    f"{t.location}: the outcome of the compaction's commit of version {version} is unknown "
                    f"({type(e).__name__}: {e}); its new files under {folder}/ are kept: look at the table's "
                    "latest version before running it again") from e
            committed = True
            rep.version = version
            break
    finally:
        if not committed:
            await _discard(backend, t.location, rep.added)
    try:
        after = await Backfiller(store, storage, settings, background=False).backfill(t.table_id, rep.version)
        rep.published_version = after.latest_backfilled_version
    except CommitOwnerError as e:  # committed all the same: the service's backfiller publishes it
        log.warning("%s: compaction committed as version %s; publishing it failed (%s)", t.location,
                    rep.version, e.message)
    rep.seconds = time.monotonic() - started
    return rep.to_json()


async def _missed(service: Any, store: OwnershipStore, backend: StorageBackend, t: TableRow, version: int,
                  e: CommitVersionConflictError) -> list[tuple[int, list[dict[str, Any]]]]:
    """The commits from ``version`` on that beat the compaction, ascending: those the refusal carries (the owner's
    unseen commits, their files read), else the table read again."""
    await service.add_unseen_commits(e, t.table_id, version)
    if e.unseen_commits_complete and e.unseen_commits:
        try:
            missed = [(int(c["version"]), parse_actions(await backend.read(c["path"]))) for c in e.unseen_commits]
            log.info("%s: version %d was taken; the conflict carried versions %s", t.location, version,
                     [v for v, _ in missed])
            return missed
        except FileNotFoundError:
            pass  # published and cleaned up meanwhile: the log has it
    try:
        missed = await versions_since(store, backend, t, version)
    except FileNotFoundError:  # cleaned up below a checkpoint
        raise TableChangedError(f"compaction of {t.location} gave up: the commits from version {version} on "
                                "cannot all be read to check them; nothing was committed and its new files are "
                                "deleted", latest_table_version=e.latest_table_version) from None
    log.info("%s: version %d was taken; versions %s read from the log", t.location, version, [v for v, _ in missed])
    return missed


async def _discard(backend: StorageBackend, location: str, added: list[dict[str, Any]]) -> None:
    """Delete the files of a compaction that committed nothing (no version references them), and on local disk
    the folders they leave empty."""
    paths = [relative_to_table(location, a["path"]) for a in added]
    for path in paths:
        try:
            await backend.delete(f"{location}/{path}")
        except OSError:  # vacuum removes what stays (it is referenced by no version)
            log.warning("%s: could not delete %s of a compaction that committed nothing", location, path)
    if location.startswith("file://"):
        remove_empty_dirs(location, paths)


__all__ = ["OptimizeReport", "compact", "compact_table", "run_optimize"]
