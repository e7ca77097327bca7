"""`commit-owner maintain`: one pass (or a worker's passes) over the owned tables: checkpoints, log cleanup, then
the policy's compaction and vacuum (coordinator/ops/policy.py), each step that did something or failed recorded
(coordinator/store/maintenance.py) for the table page. docs/maintenance.md shows it run; decision 77 says why."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from client.contract.errors import CommitOwnerError, InvalidArgumentError, TableChangedError
from coordinator.ops.checkpoints import CheckpointError, TableState, checkpoint_table
from coordinator.ops.context import opened, resolve_table
from coordinator.ops.maintenance import clean_table_log, now_ms, vacuum_figures, vacuum_table
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter, Wrap
from coordinator.store import OwnershipStore, TableRow
from coordinator.store.maintenance import MaintenanceLog

log = logging.getLogger("commit_owner.maintain")


# -- checkpoints ------------------------------------------------------------------------------------------------

async def run_maintain(settings: Settings, tables: tuple[str, ...] = (), *, every: float | None = None,
                 metrics_file: str | None = None, cleanup: bool = True, cleanup_dry_run: bool = False,
                 policy: bool = True, storage_inner: Wrap | None = None) -> dict[str, Any]:
    """Checkpoint the given tables (every registered one but FENCED ones when none), then clean their expired
    log files (unless not ``cleanup``; only listed with ``cleanup_dry_run``), then (unless not ``policy``)
    compact and vacuum them as the policy says (coordinator/ops/policy.py), once or every ``every`` seconds;
    with ``metrics_file``, the figures are written there after each pass (``storage_inner``: ``StorageRouter``'s).
    Each step that did something or failed is recorded (coordinator/store/maintenance.py)."""
    from coordinator.runtime.metrics import MaintenanceMetrics

    metrics = MaintenanceMetrics()

    async def once() -> dict[str, Any]:
        out: dict[str, Any] = {"tables": [], "failures": [], "skipped": [], "checkpointsWritten": 0, "maxLag": 0,
                               "logFilesRemoved": 0, "compactions": 0, "vacuumedFiles": 0}
        async with opened(settings, storage_inner=storage_inner) as (store, storage):
            runs = MaintenanceLog(store.db)
            targets = [await resolve_table(store, t) for t in tables] if tables else await store.list_tables()
            for t in targets:
                if t.status == "FENCED":
                    out["failures"].append({"table": t.location, "reason": "FENCED: its log is not the owner's"})
                    continue
                if t.status in ("RELEASED", "DROPPED"):  # handed back, or dropped: no longer the owner's log
                    out["skipped"].append({"table": t.location, "reason": t.status})
                    continue
                steps = _Steps(runs, t, out, metrics)
                started = now_ms()
                try:
                    rep = await checkpoint_table(storage.for_uri(t.location), t.location, t.latest_backfilled_version,
                                                 now_ms=now_ms())
                except (CheckpointError, CommitOwnerError) as e:  # storage failures included (UnavailableError)
                    await steps.failed("checkpoint", started, str(e))
                    continue
                row = rep.to_json()
                out["tables"].append(row)
                if rep.written:
                    await steps.done("checkpoint", started, {"written": rep.written, "lag": rep.lag})
                if cleanup and rep.skipped is None:
                    started = now_ms()
                    try:
                        cleaned = await clean_table_log(storage.for_uri(t.location), t, rep.properties, cleanup_dry_run)
                    except InvalidArgumentError as e:
                        await steps.failed("log_cleanup", started, f"log cleanup: {e}; no log file deleted")
                    except CommitOwnerError as e:  # storage failed part-way (UnavailableError): older files may be gone
                        await steps.failed("log_cleanup", started, f"log cleanup: {e}")
                    else:
                        row["logCleanup"] = cleaned.to_json()
                        out["logFilesRemoved"] += cleaned.deleted
                        metrics.log_files_removed.inc(cleaned.deleted)
                        if cleaned.deleted:
                            await steps.done("log_cleanup", started, {"deleted": cleaned.deleted,
                                                                      "bytes": row["logCleanup"]["bytes"]})
                if policy:
                    await _policy_steps(settings, store, storage, t, rep, row, steps)
                out["checkpointsWritten"] += len(rep.written)
                out["maxLag"] = max(out["maxLag"], rep.lag)
                metrics.checkpoints_written.inc(len(rep.written))
                metrics.checkpoint_lag.labels(t.table_id).set(rep.lag)
                try:
                    await runs.prune(t.table_id)
                except CommitOwnerError as e:
                    log.warning("%s: pruning its maintenance record failed: %s", t.location, e)
        metrics.checkpoint_lag_max.set(out["maxLag"])
        if metrics_file:
            metrics.write(metrics_file)
        return out

    if every is None:
        return await once()
    import json
    import signal
    import sys

    # A worker (e.g. docker-compose's `maintain` service): SIGTERM or SIGINT ends it after the pass in
    # progress (a checkpoint is put-if-absent either way), exiting with that pass's result.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    last: dict[str, Any] = {"tables": [], "failures": [], "skipped": []}
    while not stop.is_set():  # a failed pass (database or storage down) is logged; the next one tries again
        try:
            last = await once()
            print(json.dumps(last), file=sys.stderr, flush=True)
        except (CommitOwnerError, OSError) as e:
            log.error("maintenance pass failed: %s", e)
        try:
            await asyncio.wait_for(stop.wait(), every)
        except asyncio.TimeoutError:
            pass
    return last


class _Steps:
    """What one table's pass did, told to the record (``MaintenanceLog``), the pass's output and the metrics. A
    failure the record already shows as the newest of its kind is not recorded again (a worker running every
    minute on a table with a bad property would otherwise fill it)."""

    def __init__(self, runs: MaintenanceLog, t: TableRow, out: dict[str, Any], metrics: Any) -> None:
        self.runs, self.t, self.out, self.metrics = runs, t, out, metrics

    async def done(self, kind: str, started: int, figures: dict[str, Any]) -> None:
        self.metrics.maintenance_steps.labels(kind, "done").inc()
        await self._record(kind, "done", started, figures, None)

    async def failed(self, kind: str, started: int, reason: str) -> None:
        self.out["failures"].append({"table": self.t.location, "step": kind, "reason": reason})
        self.metrics.maintenance_steps.labels(kind, "failed").inc()
        try:
            newest = await self.runs.newest(self.t.table_id, kind)
        except CommitOwnerError:
            newest = None
        if newest is not None and newest.outcome == "failed" and newest.message == reason[:2000]:
            return
        await self._record(kind, "failed", started, {}, reason)

    async def _record(self, kind: str, outcome: str, started: int, figures: dict[str, Any], reason: str | None) -> None:
        await self.runs.note(self.t.table_id, kind, outcome, trigger="policy", started_at=started, figures=figures,
                             message=reason)


async def _policy_steps(settings: Settings, store: OwnershipStore, storage: StorageRouter, t: TableRow,
                        rep: Any, row: dict[str, Any], steps: _Steps) -> None:
    """Compaction when the table's policy finds it due, then vacuum when the policy's interval has passed since
    the table's last vacuum (coordinator/ops/policy.py)."""
    from coordinator.ops.compaction import unsupported
    from coordinator.ops.optimize import compact_table, record_figures
    from coordinator.ops.policy import compaction_due, optimize_policy, vacuum_policy

    out, metrics = steps.out, steps.metrics
    if t.status == "ACTIVE" and t.accepting:
        started = now_ms()
        cannot: list[str] = []

        def due(state: TableState) -> tuple[str, int] | None:
            p = optimize_policy(settings, state.properties)
            why = compaction_due(list(state.adds.values()), p) if p.enabled else None
            if why is None:
                return None
            blocked = unsupported(state.protocol, state.metadata)
            if blocked is not None:
                cannot.append(f"{why}, but the owner cannot compact it: {blocked}")
                return None
            return why, p.target_size

        try:
            done = await compact_table(settings, store, storage, t, target=settings.optimize_target_file_bytes,
                                       min_files=settings.optimize_min_small_files, due=due)
        except TableChangedError as e:
            metrics.compaction_gave_up.inc()
            await steps.failed("optimize", started, str(e))
        except CommitOwnerError as e:
            await steps.failed("optimize", started, f"compaction: {e}")
        else:
            if cannot:
                out["skipped"].append({"table": t.location, "reason": f"compaction: {cannot[0]}"})
            if done is not None:
                row["optimize"] = done
                if done["version"] is not None:
                    out["compactions"] += 1
                    metrics.compaction_files_removed.inc(done["filesRemoved"])
                    metrics.compaction_files_added.inc(done["filesAdded"])
                    metrics.compaction_bytes_removed.inc(done["bytesRemoved"])
                    metrics.compaction_bytes_added.inc(done["bytesAdded"])
                    await steps.done("optimize", started, record_figures(done))
    started = now_ms()
    try:
        v = vacuum_policy(settings, rep.properties)
    except InvalidArgumentError as e:
        await steps.failed("vacuum", started, f"vacuum: {e}; nothing deleted")
        return
    if not v.enabled:
        return
    last = await steps.runs.last_done(t.table_id, "vacuum")
    if last is not None and started - last < v.interval_seconds * 1000:
        return
    try:
        fresh = await store.get_table(t.table_id)  # (a compaction above may have added a version)
        vrep = await vacuum_table(store, storage.for_uri(t.location), fresh, None, dry_run=False, force=False)
    except CommitOwnerError as e:
        await steps.failed("vacuum", started, f"vacuum: {e}")
        return
    figures = vacuum_figures(vrep)
    row["vacuum"] = figures
    out["vacuumedFiles"] += vrep.deleted
    metrics.vacuum_files.inc(vrep.deleted)
    metrics.vacuum_bytes.inc(figures["bytes"])
    await steps.done("vacuum", started, figures)



