"""The background backfiller of one service process.

Triggers: after commit v when ``v % batch_size == 0`` (batch size 1 = after every commit), every
``interval_ms`` when set, and a slow sweep that picks up tables left behind (failures being retried
with backoff, or a dead process's tables once its lease expired; in a process that ratifies, a table whose
oldest unpublished commit is younger than a sweep is left to the runs its commits ask for, unless this process
holds its lease, decision 59). Across processes sharing a
database, a per-table lease (a conditional UPDATE with expiry) lets one process at a time publish a
table; within a process a per-table lock does the same.

The background runs record what they published a moment later (``backfill_mark_delay_ms``), the marks of every
table pending then in one grouped round trip: the files are published at once, only their bookkeeping waits
(decision 44). An explicit backfill, a lease handed back and ``stop`` record the pending marks first.

A process refused a table's lease nudges the holder when it runs on the same host (``nudges.py``, decision 66):
the holder runs the table at once, not at its sweep, and answers an explicit backfill waiting in the sender.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from backfill.nudges import Nudges
from backfill.publisher import BackfillResult, backfill_table, repair_hole
from client.contract.errors import CommitOwnerError, InvalidArgumentError, UnavailableError
from coordinator.runtime.settings import Settings
from coordinator.storage import Prepared, StorageRouter
from coordinator.store import CommitRow, OwnershipStore, TableRow
from coordinator.store.rows import now_ms

if TYPE_CHECKING:
    from coordinator.runtime.metrics import Metrics

log = logging.getLogger("commit_owner.backfill")

SWEEP_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
LEASE_RETRY_SECONDS = 0.1  # another process holds the table's lease: look again this soon (not a failure)
WAIT_POLL_SECONDS = 0.05  # an explicit backfill refused the lease looks again this soon, or when the holder answers
HOLDER_SECONDS = 1.0  # who holds a table's lease, as a refusal read it, is asked again without a read this long


def _merged(a: int | None, b: int | None) -> int | None:
    """Two asks for a run of one table as one: through the later version; None (everything ratified) wins,
    and -2 (a sweep's: the batch policy decides) gives way to any other."""
    if a == -2 or b == -2:
        return b if a == -2 else a
    return None if a is None or b is None else max(a, b)


#: A timed flush of the marks leaves a table whose row is held for the next flush this many times at most.
MARK_TRIES = 3

#: A timed flush leaves the mark of a table this process committed to this recently for the table's next
#: ratification to carry (decision 62), not counted against MARK_TRIES; the flush takes it once the table is
#: quiet for as long.
CARRY_SECONDS = 0.25

#: ... and only while its mark is fewer than this many versions past the mark last recorded: a table other
#: processes commit to as well (whose ratifications carry nothing of this one) must not pile up a backlog that
#: refuses commits (``max_unbackfilled_commits``).
CARRY_VERSIONS = 8

#: A commit that publishes itself renews its table's lease when it is surely held for less than this.
PUBLISH_MARGIN_SECONDS = 1.0


class LeaseHeldElsewhere(UnavailableError):
    """Another process (another worker of `serve --workers N`, a `backfill-worker`) is backfilling the table."""


class _Ask:
    """An ask this process sent to a table's holder (decision 66), awaited until ``until`` (monotonic time)."""

    def __init__(self, until: float) -> None:
        self.until = until
        self.answered = asyncio.Event()
        self.recorded = -1  # the answer: through which version the holder recorded the table published


class Backfiller:
    def __init__(
        self,
        store: OwnershipStore,
        storage: StorageRouter,
        settings: Settings,
        *,
        holder: str | None = None,
        background: bool = True,
        metrics: Metrics | None = None,
        ratifies: bool = True,
    ) -> None:
        """``ratifies``: this process also ratifies commits (``serve``), so each process publishes its own and the
        sweep leaves a young backlog to them (decision 59); False for ``backfill-worker``, which publishes every
        table its sweep finds behind."""
        self.store = store
        self.storage = storage
        self.settings = settings
        self.background = background
        self.ratifies = ratifies
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._pending: dict[str, int | None] = {}
        self._wake = asyncio.Event()
        self._locks: dict[str, asyncio.Lock] = {}
        # What this process ratified and has not published yet: (table id, version) -> (its row, its bytes).
        self._cache: OrderedDict[tuple[str, int], tuple[CommitRow | None, bytes]] = OrderedDict()
        self._cache_bytes = 0
        # Each table as this process last read it, published version brought up to date (decision 44).
        self._known: OrderedDict[str, TableRow] = OrderedDict()
        self._backoff: dict[str, tuple[float, int]] = {}
        self._task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._sem = asyncio.Semaphore(16)
        # Tables with a run in flight. A table's runs take turns anyway (its lock), so the runs asked for
        # meanwhile wait in ``_pending`` as one, for one run afterwards: a run per commit, each reading the
        # table, fell behind a busy table's commits (decision 58).
        self._running: set[str] = set()
        # Leases this process holds: table id -> (monotonic time until which it is surely ours, last use).
        self._held: dict[str, tuple[float, float]] = {}
        self._progressed: set[str] = set()  # tables that published something in the current run
        self._triggered: dict[str, float] = {}  # table id -> when a commit of this process last asked for a run
        # Tables whose lease another process holds: one look again is due LEASE_RETRY_SECONDS after the refusal,
        # through this version (None: all); runs asked for meanwhile wait for it instead of asking again.
        self._retry: dict[str, int | None] = {}
        self.on_result: Callable[[BackfillResult], None] | None = None
        self.metrics = metrics
        # (table id, version) whose commit this process is ratifying and writing (``own_publication``).
        self.writing: set[tuple[str, int]] = set()
        # Published but not yet recorded (decision 44): table id -> the version published through.
        self._unmarked: dict[str, int] = {}
        self._flush: asyncio.TimerHandle | None = None
        self._mark_tries: dict[str, int] = {}  # tables left by timed flushes in a row (their row was held)
        self._recorded: dict[str, int] = {}  # the mark this process last recorded or carried, by table
        self._flushing: set[asyncio.Task[None]] = set()
        # This process's socket for nudges (decision 66), open while the background backfiller runs.
        self._nudges: Nudges | None = None
        # Processes of this host that asked for a run of a table and wait for its answer: table id -> addresses.
        self._waiting: dict[str, set[str]] = {}
        # Asks this process sent to a table's holder and awaits the answer of (a backfill waits): by table id.
        self._asks: dict[str, _Ask] = {}
        self._holders: dict[str, tuple[str, float]] = {}  # table id -> who a refusal found holding it, and when

    @contextlib.contextmanager
    def own_publication(self, table_id: str, version: int) -> Iterator[None]:
        """While this process ratifies and answers ``version``: a run that reads the row meanwhile leaves its
        publication to the commit's own ``after_commit``, which has the bytes in memory (decision 44)."""
        self.writing.add((table_id, version))
        try:
            yield
        finally:
            self.writing.discard((table_id, version))

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.background and self._task is None:
            self._nudges = Nudges.open(self.holder, self._asked, self._answered)
            self._task = asyncio.create_task(self._run(), name="commit-owner-backfiller")

    async def stop(self) -> None:
        task, self._task = self._task, None
        nudges, self._nudges = self._nudges, None
        if nudges is not None:
            nudges.close()
        self._waiting.clear()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        try:
            await self.mark_pending()
        except CommitOwnerError as e:  # the next holder publishes those versions again and finds them there
            log.warning("recording published versions at stop failed: %s", e.message)
        for table_id in list(self._held):
            await self._release(table_id)

    # -- leases -------------------------------------------------------------------------------------

    async def _lease(self, table_id: str, renew_within: float = 0.0) -> bool:
        """Hold the table's lease. A background backfiller keeps it while the table is busy and renews
        it once half its time is gone (or ``renew_within`` seconds before), so steady commits cost no lease
        statements (docs/decisions.md)."""
        now = time.monotonic()
        held = self._held.get(table_id)
        if held is not None and held[0] > now + renew_within:
            self._held[table_id] = (held[0], now)
            return True
        ttl = self.settings.backfill_lease_seconds
        if await self.store.acquire_lease(table_id, self.holder, ttl):
            self._held[table_id] = (now + ttl / 2, now)
            return True
        self._held.pop(table_id, None)
        return False

    async def _release(self, table_id: str) -> None:
        try:
            await self.mark_pending([table_id])  # the next holder then starts from what this one published
        except CommitOwnerError:
            pass  # it publishes those versions again and finds the same bytes there
        self._held.pop(table_id, None)
        self._recorded.pop(table_id, None)
        try:
            await self.store.release_lease(table_id, self.holder)
        except CommitOwnerError:
            pass  # it expires by itself

    def _idle_here(self, table_id: str) -> bool:
        """No commit of this process asked for ``table_id`` within a sweep: a run it made for another process (its
        sweep, a nudge) hands the lease back, so that the process whose commits drive the table takes it."""
        return time.monotonic() - self._triggered.get(table_id, 0.0) > SWEEP_SECONDS

    async def _release_idle(self, idle_seconds: float) -> None:
        """Hand back leases of tables this process has not backfilled for ``idle_seconds``."""
        now = time.monotonic()
        for table_id, (_, used) in list(self._held.items()):
            lock = self._locks.get(table_id)
            if now - used >= idle_seconds and table_id not in self._pending and not (lock and lock.locked()):
                await self._release(table_id)

    # -- nudges between the processes of one host (decision 66) -------------------------------------------

    async def _nudge_holder(self, table_id: str, up_to: int | None, *, answer: bool) -> bool:
        """Refused ``table_id``'s lease: ask its holder, when it runs on this host, to publish through ``up_to`` now
        (``answer``, for a backfill that waits: and to record it and say so, ``_until_answered``). Who holds it is
        read only on a refusal, and at most once per HOLDER_SECONDS while the asks reach it; never raises (the
        sweep stays the fallback). True when nobody held the lease any more by then."""
        if self._nudges is None:
            return False
        known = self._recent_holder(table_id, HOLDER_SECONDS)
        if known is not None and self._ask(known, table_id, up_to, answer=answer):
            return False
        try:
            holder = await self.store.lease_holder(table_id)
        except CommitOwnerError:
            return False
        if holder is None or holder == self.holder:
            self._holders.pop(table_id, None)
            return holder is None
        self._holders[table_id] = (holder, time.monotonic())
        self._ask(holder, table_id, up_to, answer=answer)
        return False

    def _ask(self, holder: str, table_id: str, up_to: int | None, *, answer: bool) -> bool:
        """Send the ask (``Nudges.ask``); whether it was delivered."""
        sent = self._nudges is not None and self._nudges.ask(holder, table_id, up_to, answer=answer)
        if sent and answer:
            self._asks[table_id] = _Ask(time.monotonic() + WAIT_POLL_SECONDS)
        return sent

    def _recent_holder(self, table_id: str, within: float) -> str | None:
        """Who held ``table_id``'s lease when a refusal of this process read it, ``within`` seconds ago at most."""
        known = self._holders.get(table_id)
        if known is None or table_id in self._held or time.monotonic() - known[1] > within:
            return None
        return known[0]

    async def _until_answered(self, table_id: str) -> int | None:
        """Until the holder this process asked to publish ``table_id`` answers, or WAIT_POLL_SECONDS after the ask;
        the version through which it recorded the table published (-1: no answer, or nothing it could say; None:
        no ask awaited)."""
        asked = self._asks.get(table_id)
        if asked is None:
            return None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asked.answered.wait(), asked.until - time.monotonic())
        if self._asks.get(table_id) is asked:
            del self._asks[table_id]
        return asked.recorded

    def _asked(self, table_id: str, up_to: int | None, waiting: str | None) -> None:
        """Another process of this host asks for a run of ``table_id`` (``Nudges``): one more ask for the
        background loop, merged with the others. When a backfill ``waiting`` there asks, the run that takes it
        records its mark at once and answers (else the mark waits, as the marks of its own runs do: decisions 44
        and 62; recorded at once, it would meet this process's ratifications on the table's row)."""
        if self._task is not None:
            if waiting is not None:
                self._waiting.setdefault(table_id, set()).add(waiting)
            self._enqueue(table_id, up_to)

    def _answered(self, table_id: str, recorded: int) -> None:
        if (asked := self._asks.pop(table_id, None)) is not None:
            asked.recorded = recorded
            asked.answered.set()

    async def _answer(self, table_id: str, senders: set[str]) -> None:
        """A run of ``table_id`` that ``senders`` asked for ended (published, refused or failed): record what it
        published, and tell them through which version the table is recorded published (everything this process
        published, once nothing of it is left unrecorded; -1 when it cannot say: they look at the table again)."""
        try:
            await self.mark_pending([table_id])
        except CommitOwnerError:
            pass
        recorded = -1 if table_id in self._unmarked else self.published_through(table_id)
        if self._nudges is not None:
            for to in senders:
                self._nudges.done(to, table_id, recorded)

    # -- publication with the commit (decision 61) ---------------------------------------------------

    def publishes_next(self, table_id: str, version: int) -> bool:
        """Whether this process can publish ``version`` as part of its commit, right after the ratifying
        statement (``publish_with_commit``): it publishes each commit as it comes (a serving process, no
        interval, no batch), holds the table's lease, knows the table, and every version before this one is
        published or its own, in memory."""
        if not (self.settings.publish_with_commit and self.background and self.ratifies) \
                or self.settings.backfill_interval_ms > 0 or self.settings.backfill_batch_size != 1:
            return False
        held = self._held.get(table_id)
        known = self._known.get(table_id)
        if held is None or known is None or held[0] <= time.monotonic():
            return False
        done = max(known.latest_backfilled_version, self._unmarked.get(table_id, -1))
        # The versions between are this process's own, in memory, and a run of it is publishing them.
        return done < version and all((self._cache.get((table_id, v)) or (None,))[0] is not None
                                      for v in range(done + 1, version))

    def published_through(self, table_id: str) -> int:
        """The version through which this process knows ``table_id`` is published (-1: it knows of none)."""
        known = self._known.get(table_id)
        return max(known.latest_backfilled_version if known is not None else -1, self._unmarked.get(table_id, -1))

    async def publish_own(self, row: CommitRow, data: bytes, prepared: Prepared | None = None) -> bool:
        """Publish ``row`` (just ratified by this process, ``data`` its bytes) as ``<v>.json`` now, its mark
        deferred as a background run's (``prepared``: that file's write, prepared meanwhile; used or dropped).
        False when this process can no longer publish it next (the commit's staged file is then written, and a
        background run publishes it); raises what ``backfill_table`` raises."""
        table_id = row.table_id
        self._remember(table_id, row.version, data, row)
        self._triggered[table_id] = time.monotonic()
        async with self._locks.setdefault(table_id, asyncio.Lock()):
            remembered = self._from_memory(table_id, row.version) if self.publishes_next(table_id, row.version) \
                else None
            go = False
            try:
                go = remembered is not None and await self._lease(table_id, renew_within=PUBLISH_MARGIN_SECONDS)
            finally:
                if not go and prepared is not None:
                    await self.storage.drop_prepared(prepared)
            if not go or remembered is None:
                return False
            table, rows = remembered
            metrics = self.metrics
            result = await backfill_table(
                self.store, self.storage, table, row.version, cached=self._cached, rows=rows,
                mark=self._defer_mark, prepared=prepared,
                on_row=(lambda r: metrics.observe_published(r.ratified_at)) if metrics else None,
            )
            self._learned(table, result.backfilled_through)
            return result.backfilled_through >= row.version

    # -- triggers -----------------------------------------------------------------------------------

    async def after_commit(self, table_id: str, version: int, data: bytes, gives_up_ownership: bool,
                           row: CommitRow | None = None) -> None:
        """Called once version ``version`` is ratified (as ``row``, when the caller has it). Never raises: a
        ratified commit stays ratified (K16)."""
        if gives_up_ownership:
            # The release commit is published at once, with everything before it (docs/lifecycle.md).
            self._remember(table_id, version, data, row)
            try:
                await self.backfill(table_id, version)
            except CommitOwnerError as e:
                log.warning("release backfill of table %s through %d failed (will retry): %s", table_id, version, e)
                self._enqueue(table_id, None)
            return
        if not self.background:
            return
        self._remember(table_id, version, data, row)
        self._triggered[table_id] = time.monotonic()
        if version % self.settings.backfill_batch_size == 0:
            self._enqueue(table_id, version)

    def _enqueue(self, table_id: str, up_to: int | None) -> None:
        self._pending[table_id] = _merged(self._pending.get(table_id, -2), up_to)
        self._wake.set()

    def _remember(self, table_id: str, version: int, data: bytes, row: CommitRow | None = None) -> None:
        if (known := self._cache.pop((table_id, version), None)) is not None:
            self._cache_bytes -= len(known[1])
        self._cache[(table_id, version)] = (row, data)
        self._cache_bytes += len(data)
        while self._cache_bytes > 64 * 1024 * 1024 or len(self._cache) > 10_000:
            _, (_, old) = self._cache.popitem(last=False)
            self._cache_bytes -= len(old)

    def _cached(self, table_id: str, version: int) -> bytes | None:
        entry = self._cache.pop((table_id, version), None)
        if entry is None:
            return None
        self._cache_bytes -= len(entry[1])
        return entry[1]

    def _from_memory(self, table_id: str, up_to: int | None) -> tuple[TableRow, list[CommitRow]] | None:
        """The table and the rows to publish next, without a read (decision 44), when this process knows them:
        it read the table before, holds its lease for sure, and ratified every version from the one after the
        published one on (through ``up_to``, or as far as they run). None: read them."""
        known = self._known.get(table_id)
        held = self._held.get(table_id)
        if known is None or held is None or held[0] <= time.monotonic():
            return None
        done = max(known.latest_backfilled_version, self._unmarked.get(table_id, -1))
        rows: list[CommitRow] = []
        while up_to is None or done + 1 + len(rows) <= up_to:
            entry = self._cache.get((table_id, done + 1 + len(rows)))
            if entry is None or entry[0] is None:
                break
            rows.append(entry[0])
        if not rows or (up_to is not None and rows[-1].version < up_to):
            return None
        return known.with_versions(max(known.latest_version, rows[-1].version), done), rows

    def _learned(self, table: TableRow, published: int) -> None:
        if published > table.latest_backfilled_version:  # (a copy only when it changes: this runs per commit)
            table = table.with_versions(table.latest_version, published)
        self._known[table.table_id] = table
        self._known.move_to_end(table.table_id)
        if len(self._known) > 100_000:
            self._known.popitem(last=False)

    # -- deferred marks (decision 44), carried by the next ratification (decision 62) ----------------------

    def mark_to_carry(self, table_id: str) -> int:
        """The mark a ratification of ``table_id`` by this process can carry (decision 62): the version through
        which this process published it and has not recorded that yet; -1 when there is none."""
        return self._unmarked.get(table_id, -1)

    def carried(self, table_id: str, up_to: int) -> None:
        """A ratification recorded the mark ``up_to`` (``mark_to_carry``): the timed flush has nothing left to
        record for the table, unless a later publication's mark came meanwhile."""
        if up_to < 0:
            return
        self._recorded[table_id] = max(up_to, self._recorded.get(table_id, -1))
        if self._unmarked.get(table_id) == up_to:
            del self._unmarked[table_id]
            self._mark_tries.pop(table_id, None)
        if (known := self._known.get(table_id)) is not None:
            self._learned(known, up_to)

    async def _defer_mark(self, table_id: str, up_to: int) -> None:
        """``backfill_table``'s mark, for the background runs: remembered, recorded with the others shortly."""
        if self.settings.backfill_mark_delay_ms <= 0:
            await self.store.mark_backfilled(table_id, up_to)
            return
        self._unmarked[table_id] = max(up_to, self._unmarked.get(table_id, -1))
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(
                self.settings.backfill_mark_delay_ms / 1000.0, self._start_flush)

    def _start_flush(self) -> None:
        self._flush = None
        task = asyncio.get_running_loop().create_task(self._flush_marks(), name="commit-owner-backfill-marks")
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)

    async def _flush_marks(self) -> None:
        try:
            await self.mark_pending(patient=True)
        except CommitOwnerError as e:
            log.warning("recording published versions failed (retried with the next ones): %s", e.message)
            if self._unmarked and self._flush is None:
                self._flush = asyncio.get_running_loop().call_later(1.0, self._start_flush)

    async def mark_pending(self, table_ids: list[str] | None = None, *, patient: bool = False) -> None:
        """Record the deferred marks (of ``table_ids``, or all) in one round trip. They stay pending until the
        database has them, so a run that reads the table meanwhile still starts from what was published; on
        failure they are kept for the next flush, and the error raised. ``patient`` (the timed flush): a table
        this process committed to within ``CARRY_SECONDS`` is left for its next ratification to carry while
        its mark is fewer than ``CARRY_VERSIONS`` versions past the one last recorded (decision 62); one this
        process is ratifying, or whose row a ratification holds, just then is left for the next flush, up to
        ``MARK_TRIES`` flushes in a row, instead of a statement of its own that waits for the row (or holds
        the ratification up: decision 61)."""
        pending = {t: self._unmarked[t] for t in (table_ids if table_ids is not None else list(self._unmarked))
                   if t in self._unmarked}
        if not pending:
            return
        # A table committed to a moment ago: its next ratification carries the mark (decision 62).
        recent = time.monotonic() - CARRY_SECONDS
        carry = {t for t, v in pending.items() if self._triggered.get(t, 0.0) >= recent
                 and v - self._recorded.get(t, v - CARRY_VERSIONS) < CARRY_VERSIONS} if patient else set()
        later = [t for t in pending if self._mark_tries.get(t, 0) < MARK_TRIES - 1] if patient else []
        # A table this process is ratifying just now: its mark would wait for the ratification's row, or hold
        # the ratification up; the next flush takes it, at the latest the MARK_TRIES-th.
        busy = {t for t, _ in self.writing}.intersection(later)
        for t in carry | busy:
            del pending[t]
        left = (await self.store.mark_backfilled_many(pending, later=later) if pending else set()) | busy
        for t in left:
            self._mark_tries[t] = self._mark_tries.get(t, 0) + 1
        for t, v in pending.items():
            if t in left:
                continue
            self._mark_tries.pop(t, None)
            self._recorded[t] = max(v, self._recorded.get(t, -1))
            if self._unmarked.get(t) == v:  # (a later publication's mark stays pending)
                del self._unmarked[t]
        if (left or carry) and self._flush is None:  # (a mark that outgrows CARRY_VERSIONS is recorded next)
            self._flush = asyncio.get_running_loop().call_later(
                self.settings.backfill_mark_delay_ms / 1000.0, self._start_flush)

    # -- the work -----------------------------------------------------------------------------------

    async def backfill(
        self, table_id: str, up_to: int | None = None, *, last_known_backfilled: int | None = None,
        wait_seconds: float = 30.0, defer_mark: bool = False,
    ) -> TableRow:
        """Publish every version <= ``up_to`` (all ratified when None) and return the table afterwards.

        Raises InvalidArgumentError when ``up_to`` was never ratified, ForeignCommitFileError,
        UnavailableError (storage/database down, or another process held the lease too long).
        ``defer_mark``: record what is published a moment later (the background runs); else it is recorded
        before this returns, with whatever an earlier run left pending.
        """
        deadline = time.monotonic() + wait_seconds
        again = 0  # refusals after which the table is looked at again at once (the lease was let go: a few times)
        hinted = wait_seconds <= 0  # (a background run asks the database: it is what takes a lease let go)
        lock = self._locks.setdefault(table_id, asyncio.Lock())
        async with lock:
            if not defer_mark:
                await self.mark_pending([table_id])
            table: TableRow | None = None
            target, needs_repair = -1, False
            while True:
                # This process asked the holder, which is publishing: its answer says how far it recorded.
                if table_id in self._asks and (recorded := await self._until_answered(table_id)) is not None:
                    if table is not None and recorded >= max(target, 0) and not needs_repair:
                        return table.with_versions(table.latest_version, recorded)
                    self._holders.pop(table_id, None)  # not that far: who holds the lease is read again
                remembered = self._from_memory(table_id, up_to) if defer_mark else None
                if remembered is not None:
                    table, rows = remembered
                else:  # the table and its unbackfilled rows through up_to, in one statement, settled before
                    # anything read is published (decision 54)
                    table, rows = await self.store.get_commits(table_id, None, up_to, settle=True)
                    self._learned(table, -1)
                if (published := self._unmarked.get(table_id, -1)) > table.latest_backfilled_version:
                    table = dataclasses.replace(table, latest_backfilled_version=published)  # not yet recorded
                if up_to is not None and up_to > table.latest_version:
                    raise InvalidArgumentError(
                        f"cannot backfill to version {up_to}: the latest ratified version is {table.reported_latest}",
                        latest_table_version=table.reported_latest,
                    )
                target = table.latest_version if up_to is None else up_to
                if defer_mark and self.writing:
                    # A version whose staged file this process is still writing (decision 43) is published by
                    # the run its own commit asks for; taken now, its file would be checked and written twice.
                    held_back = next((r.version for r in rows if (table_id, r.version) in self.writing), None)
                    if held_back is not None:
                        rows = [r for r in rows if r.version < held_back]
                        target = min(target, held_back - 1)
                needs_repair = (
                    last_known_backfilled is not None
                    and table.base_version < last_known_backfilled <= table.latest_backfilled_version
                )
                if table.latest_backfilled_version >= target and not needs_repair:
                    return table
                # A run of this process was refused the lease a moment ago (a commit's background run, just before
                # its writer's explicit backfill): ask that holder at once, once, without a statement. Wrong by now,
                # the run it asks for takes a lease let go, or asks the new holder; this loop looks again.
                hint = None if hinted else self._recent_holder(table_id, LEASE_RETRY_SECONDS)
                if hint is None and await self._lease(table_id):
                    try:
                        if needs_repair and last_known_backfilled is not None:
                            fixed = await repair_hole(self.store, self.storage, table, last_known_backfilled)
                            if fixed:
                                log.warning("table %s: re-published missing versions %s", table_id, fixed)
                            last_known_backfilled = None
                        metrics = self.metrics
                        result = await backfill_table(
                            self.store, self.storage, table, target, cached=self._cached, rows=rows,
                            mark=self._defer_mark if defer_mark else None,
                            on_version=lambda _v: self._progressed.add(table_id),
                            on_row=(lambda r: metrics.observe_published(r.ratified_at)) if metrics else None,  # noqa: B023
                        )
                    finally:
                        if not self.background:
                            await self._release(table_id)
                    self._learned(table, result.backfilled_through)
                    if self.on_result:
                        self.on_result(result)
                    if result.published:
                        log.info("table %s: published versions %d..%d", table_id, result.published[0], result.published[-1])
                    if result.backfilled_through >= target:
                        return dataclasses.replace(
                            table, latest_backfilled_version=max(table.latest_backfilled_version,
                                                                 result.backfilled_through))
                    continue
                waits = time.monotonic() <= deadline
                if hint is not None and waits:
                    hinted = True
                    free = not self._ask(hint, table_id, target, answer=True)  # (not delivered: ask the database)
                else:
                    free = await self._nudge_holder(table_id, target, answer=waits)
                if not waits:
                    raise LeaseHeldElsewhere(
                        f"table {table_id} is being backfilled by another process; try again",
                        latest_table_version=table.reported_latest,
                    )
                again = again + 1 if free else 0
                if table_id not in self._asks and not 0 < again <= 2:  # (asked: the loop waits for the answer)
                    await asyncio.sleep(WAIT_POLL_SECONDS)

    async def _run(self) -> None:
        interval = self.settings.backfill_interval_ms / 1000.0
        sweep_every = interval if interval > 0 else SWEEP_SECONDS
        next_sweep = time.monotonic() + sweep_every
        while True:
            timeout = max(0.0, next_sweep - time.monotonic())
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            work, self._pending = self._pending, {}
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + sweep_every
                await self._release_idle(SWEEP_SECONDS)
                self._asks = {t: a for t, a in self._asks.items() if a.until > time.monotonic()}  # (answers lost)
                self._holders = {t: h for t, h in self._holders.items() if h[1] > time.monotonic() - HOLDER_SECONDS}
                # In a process that ratifies, without an interval, the sweep is the fallback (decision 59): a
                # table whose oldest unpublished commit is younger than a sweep has a run of the process that
                # ratified it coming (or under way), and a process that committed nothing to it would only read
                # it and be refused its lease. Tables whose lease this process holds are taken at any age: it
                # publishes the other processes' commits too, and nothing else tells it of them. A table whose
                # unrecorded commits this process published itself (their marks wait for its next
                # ratification, decision 62) is not behind.
                young = now_ms() - int(SWEEP_SECONDS * 1000) if self.ratifies and interval <= 0 else None
                try:
                    for tid in await self.store.tables_behind(ratified_before=young, held=self._held.keys(),
                                                              published=self._unmarked):
                        work.setdefault(tid, -2)  # -2: decide the target from the batch policy
                except CommitOwnerError as e:
                    log.warning("backfill sweep could not list tables: %s", e)
            for tid, up_to in work.items():
                if tid in self._backoff and self._backoff[tid][0] > time.monotonic():
                    self._pending.setdefault(tid, up_to)
                    continue
                if tid in self._running:  # one run a table at a time: what it misses, the next one takes
                    self._pending[tid] = _merged(self._pending.get(tid, -2), up_to)
                    continue
                if tid in self._retry:  # another process holds its lease: the look again that is due covers it
                    if up_to != -2:
                        self._look_again(tid, up_to)
                    continue
                await self._sem.acquire()
                self._running.add(tid)
                t = asyncio.create_task(self._one(tid, up_to, interval > 0))
                self._inflight.add(t)
                t.add_done_callback(self._inflight.discard)

    def _look_again(self, table_id: str, up_to: int | None) -> None:
        """Ask for a run of ``table_id`` through ``up_to`` once, LEASE_RETRY_SECONDS from the first refusal of its
        lease: however many commits of this process ask meanwhile, a table another process publishes costs this
        one at most one read and one lease statement per LEASE_RETRY_SECONDS (each asking for a retry of its own,
        they were two statements per commit of this process, and more, as the retries begot retries)."""
        if table_id in self._retry:
            prev = self._retry[table_id]
            self._retry[table_id] = None if up_to is None or prev is None else max(prev, up_to)
            return
        self._retry[table_id] = up_to
        asyncio.get_running_loop().call_later(LEASE_RETRY_SECONDS, self._retry_due, table_id)

    def _retry_due(self, table_id: str) -> None:
        if table_id in self._retry:
            self._enqueue(table_id, self._retry.pop(table_id))

    async def _one(self, table_id: str, up_to: int | None, by_interval: bool) -> None:
        self._progressed.discard(table_id)
        swept = up_to == -2
        asked = self._waiting.pop(table_id, None)  # (the asks that come during the run wait for the next one)
        try:
            if up_to == -2:
                table = await self.store.get_table(table_id)
                b = self.settings.backfill_batch_size
                latest = table.latest_version
                up_to = latest if (by_interval or not table.accepting or b == 1) else latest - latest % b
                if up_to <= max(table.latest_backfilled_version, self._unmarked.get(table_id, -1)):
                    return
            elif up_to is not None and 0 <= up_to <= self.published_through(table_id):
                return  # published meanwhile, by a commit that published itself (decision 61); the rest: the sweep
            elif self.settings.backfill_batch_size == 1:
                up_to = None  # everything ratified: also what other processes (workers) ratified meanwhile
            await self.backfill(table_id, up_to, wait_seconds=0.0, defer_mark=True)
            self._backoff.pop(table_id, None)
            if table_id in self._held and self._idle_here(table_id):
                # A run for another process (a sweep, a nudge): hand the lease back to the process whose commits
                # drive the table, else a process that commits nothing to it keeps it and the committing one
                # waits (and nudges it) for every commit.
                await self._release(table_id)
        except asyncio.CancelledError:
            raise
        except LeaseHeldElsewhere:
            # The holder publishes in order what it was asked to; what this process ratified after the holder's
            # read is published by whichever process holds the lease next: look again soon (a sweep's table is
            # found again by the next sweep: not retried here, or a process that commits nothing to a busy table
            # would read it and ask for its lease ten times a second for as long as the holder is busy).
            if not swept and (up_to is None or up_to >= 0):
                self._look_again(table_id, up_to)
        except Exception as e:  # noqa: BLE001 - a background worker must survive anything
            if self.metrics is not None:
                self.metrics.backfill_failures.inc()
            _, attempts = self._backoff.get(table_id, (0.0, 0))
            if table_id in self._progressed:
                attempts = 0  # the run published versions before it failed: progress, not a stuck table
            delay = min(MAX_BACKOFF_SECONDS, 0.1 * (2**attempts))
            self._backoff[table_id] = (time.monotonic() + delay, attempts + 1)
            msg = e.message if isinstance(e, CommitOwnerError) else f"{type(e).__name__}: {e}"
            log.warning("backfill of table %s failed (retry in %.1fs): %s", table_id, delay, msg)
            try:
                await self.store.record_backfill_error(table_id, msg)
            except CommitOwnerError:
                pass
        finally:
            try:
                if asked:
                    await self._answer(table_id, asked)
            finally:
                self._sem.release()
                self._running.discard(table_id)
                if table_id in self._pending:
                    self._wake.set()
