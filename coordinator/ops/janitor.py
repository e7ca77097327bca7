"""The orphan janitor: removes staged commit files that will never be ratified (and, given the name store,
expires old staging reservations: coordinator/ops/staging.py).

A commit writes ``_commits/<v>.<key>.json`` before its ratification transaction (K01). When the
refusal is certain the service removes the file at once; when the outcome is unknown (the process
died, the database or storage failed between the write and the answer) the file stays: it is an
orphan no reader uses (readers only follow ratified rows). The janitor removes such a file only when
all of these hold, checked per file just before the delete:

* no ratified row names it (it is never a ratified file);
* its version is decided: ``version <= latest ratified version`` with another file ratified there,
  or the table no longer accepts commits. A file above the latest version is kept, because a retry
  with its idempotency key may still ratify it (the service would find the file and use it);
* it is older than ``janitor_min_age_seconds``, never less than 3 x ``request_timeout_seconds``
  (the storage write, the pool wait and the ratification statement of one request) + 5 s of clock
  margin, so a request still in flight never loses its file.

Which tables a round looks at. Listing a table's commit folder is one storage request, so a round over every
table costs a request per table: a million tables every ten minutes would be 1,700 LISTs a second. The
service's rounds (``run_once(every_table=False)``) look at the tables whose row changed or took a commit
within the last round's interval + the minimum age (+ margin), which holds every table where a decision
since the last look may have freed an orphan, and a slice of the others, in table-id order, sized so that
every live table is looked at within ``janitor_full_round_seconds`` (a writer that died for good, a version
decided before its orphan was written). `commit-owner janitor` looks at every table.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from client.contract.errors import CommitOwnerError
from client.contract.layout import commit_dir_uri, parse_staged_file, staged_file
from coordinator.ops.staging import StagingReport, expire_reservations
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter
from coordinator.store import OwnershipStore, TableRow
from coordinator.store.names import NameStore

log = logging.getLogger("commit_owner.janitor")

CLOCK_MARGIN_SECONDS = 5.0
JITTER = (0.8, 1.2)  # a round's interval is the setting times a factor drawn from here


def safe_min_age(settings: Settings) -> float:
    """The age below which no orphan is touched, whatever the setting says."""
    return max(float(settings.janitor_min_age_seconds), 3 * float(settings.request_timeout_seconds) + CLOCK_MARGIN_SECONDS)


@dataclass
class JanitorReport:
    tables: int = 0
    staged_files: int = 0
    orphans: int = 0
    removed: int = 0
    kept_too_young: int = 0
    kept_undecided: int = 0
    errors: int = 0
    dry_run: bool = False
    removed_files: list[str] = field(default_factory=list)
    staging: StagingReport | None = None  # expired staging reservations (coordinator/ops/staging.py)

    def to_json(self) -> dict[str, Any]:
        out = {"tables": self.tables, "stagedFiles": self.staged_files, "orphans": self.orphans,
               "removed": self.removed, "keptTooYoung": self.kept_too_young, "keptUndecided": self.kept_undecided,
               "errors": self.errors, "dryRun": self.dry_run, "removedFiles": self.removed_files[:1000]}
        if self.staging is not None:
            out["staging"] = self.staging.to_json()
        return out


class Janitor:
    """One pass over every owned table (``run_once``), or a background loop (``start``/``stop``).

    ``removed_files_total`` counts the files this process removed; ``on_removed`` (the service's metrics
    counter) is called at each removal, so a scrape answered by any worker sums every worker's.
    """

    def __init__(self, store: OwnershipStore, storage: StorageRouter, settings: Settings, *,
                 names: NameStore | None = None, on_removed: Callable[[], None] | None = None) -> None:
        self.store = store
        self.storage = storage
        self.settings = settings
        self.names = names  # with it, each pass also expires old staging reservations
        self.removed_files_total = 0
        self.on_removed = on_removed
        self._cursor = ""  # the last table id of the round robin's previous slice
        self._task: asyncio.Task[None] | None = None

    async def run_once(self, *, dry_run: bool = False, every_table: bool = True) -> JanitorReport:
        rep = JanitorReport(dry_run=dry_run)
        min_age_ms = int(safe_min_age(self.settings) * 1000)
        for table in await self.store.list_tables() if every_table else await self._due(min_age_ms):
            if table.dropped_at is not None:
                continue  # DROP TABLE left its files as they are: not the owner's to clean any more
            rep.tables += 1
            try:
                await self._table(table, rep, min_age_ms, dry_run)
            except (OSError, CommitOwnerError) as e:
                rep.errors += 1
                log.warning("janitor: table %s skipped this round: %s", table.table_id, e)
        if self.names is not None:
            rep.staging = await expire_reservations(self.names, self.store, self.storage, self.settings,
                                                    dry_run=dry_run)
            rep.errors += rep.staging.errors
        return rep

    async def _table(self, table: TableRow, rep: JanitorReport, min_age_ms: int, dry_run: bool) -> None:
        folder = commit_dir_uri(table.location, table.commit_dir)
        storage = self.storage.for_uri(folder)
        staged: dict[str, int] = {}
        for name in await storage.list_names(folder):
            parsed = parse_staged_file(name)
            if parsed and parsed.version > table.base_version:
                staged[name] = parsed.version
        rep.staged_files += len(staged)
        if not staged:
            return
        ratified = await self.store.ratified_file_names(table.table_id, min(staged.values()), max(staged.values()))
        names = set(ratified.values())
        for name, version in sorted(staged.items(), key=lambda kv: kv[1]):
            if name in names:
                continue
            rep.orphans += 1
            if table.accepting and version > table.latest_version:
                rep.kept_undecided += 1  # the attempt that wrote it may still be in flight
                continue
            path = staged_file(table.location, table.commit_dir, name)
            try:
                info = await storage.info(path)
            except FileNotFoundError:
                continue
            # S3 (and moto) report whole seconds, truncated: such a time may be up to 1 s before the real write.
            written = info.modification_time + (1000 if info.modification_time % 1000 == 0 else 0)
            if int(time.time() * 1000) - written < min_age_ms:
                rep.kept_too_young += 1
                continue
            # Ask again right before the delete: the answer that matters is the one of this moment.
            row = await self.store.get_commit(table.table_id, version)
            if row is not None and row.file_name == name:
                continue  # ratified: never removed
            if row is None and table.accepting:
                rep.kept_undecided += 1
                continue
            if not dry_run:
                await storage.delete(path)
                self.removed_files_total += 1
                if self.on_removed is not None:
                    self.on_removed()
                log.info("janitor: removed orphan %s (version %d is %s)", path, version,
                         row.file_name if row else "never ratified; the table no longer accepts commits")
            rep.removed += 1
            rep.removed_files.append(path)

    async def _due(self, min_age_ms: int) -> list[TableRow]:
        """The tables of a service round: the recently active ones and the next slice of the round robin."""
        interval = float(self.settings.janitor_interval_seconds)
        window_ms = int(interval * JITTER[1] * 1000) + min_age_ms + int(CLOCK_MARGIN_SECONDS * 1000)
        due = {t.table_id: t for t in await self.store.tables_active_since(int(time.time() * 1000) - window_ms)}
        counts = await self.store.table_counts()
        live = sum(n for status, n in counts.items() if status != "DROPPED")
        rounds = max(1.0, float(self.settings.janitor_full_round_seconds) / max(interval, 1.0))
        want = min(live, math.ceil(live / rounds))
        slice_: list[TableRow] = []
        wrapped = False
        while len(slice_) < want:
            page = await self.store.live_tables_after(self._cursor, want - len(slice_))
            if not page:
                if wrapped or not self._cursor:
                    break  # every live table is in already (some were dropped since they were counted)
                wrapped, self._cursor = True, ""  # past the last id: the round robin starts over
                continue
            slice_.extend(page)
            self._cursor = page[-1].table_id
        due.update((t.table_id, t) for t in slice_)
        return sorted(due.values(), key=lambda t: t.table_id)

    # -- background loop ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is None and self.settings.janitor_interval_seconds > 0:
            self._task = asyncio.create_task(self._run(), name="commit-owner-janitor")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        interval = float(self.settings.janitor_interval_seconds)
        while True:
            # Jitter so that several processes on one database do not scan in lockstep.
            await asyncio.sleep(interval * random.uniform(*JITTER))
            try:
                rep = await self.run_once(every_table=False)
                if rep.removed or rep.errors:
                    log.info("janitor: %d orphan(s) removed, %d kept (young %d, undecided %d), %d error(s)",
                             rep.removed, rep.orphans - rep.removed, rep.kept_too_young, rep.kept_undecided, rep.errors)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a background task must survive anything
                log.exception("janitor round failed")
