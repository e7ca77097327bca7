"""Ratification: turn a writer's commit request into exactly one ratified version.

Order of work for version v (K01, decision 43): the staged file ``<v:020>.<uuid>.json`` is written with
put-if-absent while the one ratification transaction runs, and the commit row keeps the bytes until the
version is published: the database is the staged file's write-ahead log. The answer waits for both. A
ratified row is never handed to a reader before its file is there (``staged.py`` writes it from the row
when it is not). A file whose transaction lost is an orphan no reader uses; it is removed at once when the
refusal is certain, and never when the outcome is unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from client.contract.errors import (
    CommitFailedError,
    CommitOwnerError,
    CommitVersionConflictError,
    ForeignCommitFileError,
    InvalidArgumentError,
    InvalidCommitError,
    LocationNotAllowedError,
    OwnershipPublishedError,
    PayloadTooLargeError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnavailableError,
)
from client.contract.layout import (
    STAGED_COMMITS_DIR,
    check_commit_dir,
    delta_file,
    normalize_location,
    parse_staged_file,
    random_uuid,
    staged_file,
    staged_file_name,
)
from coordinator.core.columns import columns_of_metadata, properties_of_metadata
from coordinator.core.commit_body import ClockRule, CommitBody, parse_commit_body
from coordinator.core.log_metadata import newest_metadata
from coordinator.core.order.across import Across
from coordinator.core.order.line import Line
from coordinator.core.registration import check_log_matches, clear_dead_proposal, first_commit_names, newest_version
from coordinator.core.staged import StagedFiles
from coordinator.core.transactions import TransactionService
from coordinator.runtime.settings import Settings
from coordinator.security.roots import check_allowed, check_local_log, parse_root, parse_roots
from coordinator.storage import StorageRouter
from coordinator.storage.base import FileInfo, Prepared
from coordinator.store import CommitRow, OwnershipStore, TableRow, now_ms, version_message
from coordinator.store.names import NameStore
from coordinator.store.rows import NameRow

if TYPE_CHECKING:
    from backfill.worker import Backfiller
    from coordinator.runtime.metrics import Metrics

log = logging.getLogger("commit_owner.service")

#: At most this many commits ride on a version conflict's answer (``unseenCommits``); a writer further behind
#: reads the rest with getCommits.
UNSEEN_COMMITS_LIMIT = 100
#: A table that saw a conflict keeps its last this many commits ratified here in memory to answer the next ones.
RECENT_COMMITS_KEPT = 16


@dataclass(frozen=True)
class TablePlace:
    location: str
    commit_dir: str


class _Turn:
    """One table's commits inside this process: taken in turn, with the highest version seen ratified.

    Versions only grow, so a proposal at or below ``latest`` is certainly stale, whatever other processes
    did since: it is answered with a conflict (and the latest version) without touching storage or the
    database. The database stays the judge of every proposal that might win.
    """

    __slots__ = ("lock", "latest", "recent", "queued", "line", "across")

    def __init__(self, turn_seconds: float = 0.0, across: Across | None = None) -> None:
        self.lock = asyncio.Lock()
        self.line = Line(turn_seconds)  # the ticketed writers waiting for the table's turn (decision 48)
        self.across = across  # the table's turn among processes (decision 53); None: the line is off
        self.latest = -1
        self.queued = 0  # proposals waiting for the lock
        # The last commits this process ratified (their JSON), kept once the table saw a conflict: losers are
        # then told what they missed from memory, without a query per conflict.
        self.recent: deque[dict[str, Any]] | None = None

    def stale(self, version: int) -> CommitVersionConflictError | None:
        if version > self.latest:
            return None
        return CommitVersionConflictError(version_message(version, self.latest + 1),
                                          latest_table_version=self.latest)

    def saw(self, version: int | None) -> None:
        if version is not None and version > self.latest:
            self.latest = version

    def ratified(self, commit: dict[str, Any]) -> None:
        if self.recent is not None and (not self.recent or commit["version"] > self.recent[-1]["version"]):
            self.recent.append(commit)  # (an idempotent replay of an older version is not news)
        self.saw(commit["version"])

    def learned(self, commits: list[dict[str, Any]]) -> None:
        """Keep ``commits`` (consecutive, read from the database: another process ratified some) beside the ones
        this process ratified, so that the next losers of a shared table are answered from memory too."""
        if not commits:
            return
        kept = {c["version"]: c for c in self.recent or ()}
        kept.update((c["version"], c) for c in commits)
        self.recent = deque((kept[v] for v in sorted(kept)), maxlen=RECENT_COMMITS_KEPT)
        self.saw(commits[-1]["version"])

    def unseen(self, version: int, limit: int) -> list[dict[str, Any]] | None:
        """The commits from ``version`` to ``latest`` when this process ratified every one of them (and they
        are within ``limit``); else None. Starts keeping commits on a table's first conflict."""
        if self.recent is None:
            self.recent = deque(maxlen=RECENT_COMMITS_KEPT)
            return None
        if self.latest < version or self.latest - version + 1 > limit:
            return None
        commits = [c for c in self.recent if c["version"] >= version]
        return commits if [c["version"] for c in commits] == list(range(version, self.latest + 1)) else None


def _key_uid(key: str) -> str:
    """The canonical spelling of an idempotency key; it becomes part of a staged file's name."""
    try:
        return str(uuid.UUID(key))
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgumentError("Idempotency-Key must be a UUID") from None


async def _settled(write: asyncio.Future[Any]) -> bool:
    """Wait for a staged file's write; whether it created the file."""
    try:
        await write
    except (OSError, asyncio.CancelledError):
        return False
    return True


def _drop_result(write: asyncio.Future[Any]) -> None:
    """Retrieve a background write's outcome so that nothing logs it as never retrieved."""
    if not write.cancelled():
        write.exception()


async def _prepared(prep: asyncio.Future[Prepared]) -> Prepared | None:
    """A prepared write of ``<v>.json`` (decision 62), or None when preparing it failed (the file is then written
    whole, when it is published)."""
    try:
        return await prep
    except OSError:
        return None


@dataclass(frozen=True)
class Overview:
    """Counts of tables by status; the tables most behind (each with its oldest unpublished commit's
    ratification time, ms); live tables accepting no commits; the first tables by location."""

    counts: dict[str, int]
    behind: list[tuple[TableRow, int]]
    stopped: list[TableRow]
    first: list[TableRow]


class CommitService:
    """The commit-owner contract on top of the store and the storage seams."""

    def __init__(self, settings: Settings, store: OwnershipStore, storage: StorageRouter, *,
                 backfiller: Backfiller | None = None, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.store = store
        self.storage = storage
        self.backfiller = backfiller
        self._dropping: set[asyncio.Task[None]] = set()  # prepared writes of unknown outcome, being dropped
        self.metrics = metrics
        self.roots = parse_roots(settings.allow_location)
        self.names = NameStore(store)
        self.staged = StagedFiles(storage)
        # A table's location and folder never change: cache them so a commit costs no extra read.
        self._places: OrderedDict[str, TablePlace] = OrderedDict()
        self._turns: OrderedDict[str, _Turn] = OrderedDict()
        self.unseen_limit = UNSEEN_COMMITS_LIMIT
        self.transactions = TransactionService(self)  # multi-table transactions and reads (issue 28)

    # -- registration -------------------------------------------------------------------------------

    async def register_table(self, location: str, current_version: int, commit_dir: str | None, *,
                             name: NameRow | None = None, table_id: str | None = None,
                             log_version: int | None = None, staging_id: str | None = None) -> TableRow:
        """Register ``location``; the client writes ``current_version + 1`` itself.

        ``log_version`` is the newest version the log must hold now (default ``current_version``; a
        catalog-managed table's writer has written version 0 before registering at -1). With ``name``
        the table is named in the same transaction, and ``staging_id`` uses that reservation up.
        """
        loc = normalize_location(location)
        cdir = commit_dir or self.settings.commit_dir
        check_commit_dir(cdir)
        if isinstance(current_version, bool) or not isinstance(current_version, int) or current_version < -1:
            raise InvalidArgumentError("currentVersion must be an integer >= -1")
        check_allowed(loc, self.roots)
        check_local_log(loc, cdir, self.roots)
        storage = self.storage.for_uri(loc)
        await check_log_matches(storage, loc, current_version if log_version is None else log_version)
        tid = table_id or str(uuid.uuid4())
        if name is not None and name.table_id != tid:
            name = dataclasses.replace(name, table_id=tid)
        try:
            return await self.store.register(tid, loc, cdir, current_version, name=name, staging_id=staging_id)
        except TableAlreadyExistsError:
            if not await clear_dead_proposal(self.store, storage, loc):
                raise
            return await self.store.register(tid, loc, cdir, current_version, name=name, staging_id=staging_id)

    async def forget_table(self, table_id: str) -> None:
        """Drop a registration whose first commit never landed. Raises TableNotFoundError, OwnershipPublishedError."""
        table = await self.store.get_table(table_id)
        if await first_commit_names(self.storage.for_uri(table.location), table.location, table.base_version, table_id):
            raise OwnershipPublishedError(f"version {table.base_version} of {table.location} is published and names "
                                          "this owner: the table is owned; release it instead")
        if not await self.store.forget_registration(table_id):
            raise OwnershipPublishedError(f"table {table_id} already has commits ratified by the owner")
        self._places.pop(table_id, None)

    async def drop_table(self, table_id: str, name: str | None) -> TableRow:
        """DROP TABLE: publish every ratified commit still unpublished, then mark the table dropped and free its
        name in one transaction (decision 'DROP TABLE'). The table's files stay where they are.

        Raises TableNotFoundError (unknown or already dropped); ForeignCommitFileError for a FENCED table with
        unpublished commits (nothing changed); when publication fails, the backfiller's error (UnavailableError,
        ForeignCommitFileError) saying the drop was refused: the table is not dropped (versions published
        before the failure stay published)."""
        what = f"table {name or table_id}"
        for _ in range(5):  # commits ratified between the publication and the drop: publish those too
            table = await self.store.get_table(table_id)
            if table.dropped_at is not None:
                raise TableNotFoundError(f"{what} was already dropped")
            if table.unbackfilled and table.status == "FENCED":
                raise ForeignCommitFileError(
                    f"DROP of {what} refused, nothing changed: it is FENCED ({table.status_reason}) with ratified "
                    f"commits through version {table.latest_version} not published; repair it first "
                    "(docs/runbook.md: `commit-owner tables unfence`, or `tables forget`)",
                    latest_table_version=table.reported_latest)
            if table.unbackfilled:
                try:
                    await self.backfill(table_id, None, None)
                except CommitOwnerError as e:
                    e.message = (f"DROP of {what} refused, the table is not dropped: its ratified commits through "
                                 f"version {table.latest_version} must be published to _delta_log first, and that "
                                 f"failed: {e.message}")
                    e.args = (e.message,)
                    raise
            reason = f"dropped (DROP TABLE{' ' + name if name else ''}); its files stay"
            if await self.store.drop_table(table_id, name, reason):
                self._places.pop(table_id, None)
                self._turns.pop(table_id, None)
                return await self.store.get_table(table_id)
        raise UnavailableError(f"DROP of {what} refused, nothing changed: commits keep arriving; retry")

    async def place(self, table_id: str) -> TablePlace:
        p = self._places.get(table_id)
        if p is None:
            t = await self.store.get_table(table_id)
            p = TablePlace(t.location, t.commit_dir)
            self._places[table_id] = p
            if len(self._places) > 100_000:
                self._places.popitem(last=False)
        return p

    # -- commit -------------------------------------------------------------------------------------

    def _turn(self, table_id: str) -> _Turn:
        t = self._turns.get(table_id)
        if t is None:
            seconds = self.settings.commit_turn_seconds
            across = Across(self.store.turns, table_id, seconds) if seconds > 0 else None
            t = self._turns[table_id] = _Turn(seconds, across)
            if len(self._turns) > 100_000:
                for key in list(self._turns)[:1000]:
                    old = self._turns[key]
                    if not old.lock.locked() and not old.line and (old.across is None or old.across.idle):
                        del self._turns[key]
        return t

    async def commit(self, table_id: str, version: int, data: bytes, idempotency_key: str | None, *,
                     staged: FileInfo | None = None, ticket: str | None = None) -> dict[str, Any]:
        """Ratify ``data`` as ``version``; returns the commit's JSON. Raises the CommitFailedError family.

        ``staged``: the writer already wrote ``data`` as the staged file named by ``idempotency_key``
        (catalog-managed tables); the owner then writes nothing and never removes that file.
        ``ticket``: the writer's place in the table's line (``coordinator/core/order/line.py``): the proposal waits for the
        table's turn. A version conflict then carries ``retry_slot`` (a loser without a ticket is offered one).
        """
        if self.metrics is None:
            return await self._in_line(table_id, version, data, idempotency_key, staged, ticket)
        started, outcome = time.perf_counter(), "INTERNAL"
        try:
            result = await self._in_line(table_id, version, data, idempotency_key, staged, ticket)
            outcome = "ok"
            return result
        except CommitOwnerError as e:
            outcome = e.code
            raise
        finally:
            self.metrics.observe_commit(outcome, time.perf_counter() - started)

    async def _in_line(self, table_id: str, version: int, data: bytes, idempotency_key: str | None,
                       staged: FileInfo | None, ticket: str | None) -> dict[str, Any]:
        """``_commit`` once the table's line lets the proposal go (decision 48). Without a ticket the proposal
        never waits (it takes the outsiders' turn, decision 55, or races); a lost race then offers the writer a
        ticket. With one, a lost race says its place."""
        if version <= 0:
            return await self._commit(table_id, version, data, idempotency_key, staged)
        if idempotency_key and ticket is not None:
            _key_uid(idempotency_key)  # a bad key is refused before the proposal waits in line
        turn = self._turn(table_id)
        line = turn.line
        entry = await line.enter(ticket)
        across = turn.across if entry.turn else None
        lost_race = False
        try:
            if across is not None:  # the turn among processes, when others race for this table (decision 53)
                turn.saw(await across.enter(line))
            return await self._commit(table_id, version, data, idempotency_key, staged)
        except CommitVersionConflictError as e:
            lost_race = True
            # the loser keeps its place (the head its turn); one without a ticket is offered one
            slot = line.leave(entry, done=False)
            e.retry_slot = slot if ticket is not None else line.offer()
            raise
        finally:
            if not lost_race:  # won, or refused for another reason: its place ends, the next ticket's turn starts
                line.leave(entry, done=True)
            if across is not None:
                await across.leave(not lost_race, len(line))

    async def _commit(self, table_id: str, version: int, data: bytes, idempotency_key: str | None,
                      staged: FileInfo | None = None) -> dict[str, Any]:
        if version == 0:
            raise InvalidCommitError("Commit version 0 must go via filesystem.", latest_table_version=None)
        if version < 0:
            raise InvalidCommitError(f"Commit version {version} is not valid: versions start at 0.")
        uid = _key_uid(idempotency_key) if idempotency_key else random_uuid()
        key = uid if idempotency_key else None
        turn = self._turn(table_id)
        if (stale := turn.stale(version)) is not None:
            return await self._stale(table_id, version, data, key, stale)
        turn.queued += 1
        try:
            await turn.lock.acquire()
        finally:
            turn.queued -= 1
        try:
            if (stale := turn.stale(version)) is not None:
                return await self._stale(table_id, version, data, key, stale)
            try:
                result = await self._ratify(table_id, version, data, uid, staged)
            except CommitVersionConflictError as e:
                turn.saw(e.latest_table_version)
                if turn.across is not None:
                    turn.across.contended()  # lost in the database: another process took the version
                raise
            turn.ratified(result)
            losers = turn.queued
        finally:
            turn.lock.release()
        # The proposals that queued behind this one mostly asked for the same version: let them hear that they
        # lost (a loop pass each) before the winner hears that it won, so that the winner of a closed loop is
        # not always the first to propose the next version (fairness between racing writers, decision 28).
        for _ in range(losers):
            await asyncio.sleep(0)
        return result

    async def _stale(self, table_id: str, version: int, data: bytes, key: str | None,
                     stale: CommitVersionConflictError) -> dict[str, Any]:
        """Answer a proposal for a version already taken, without writing anything.

        Unkeyed: the conflict. Keyed: it may be the retry of the proposal that won, so the key is looked up
        (one read): the same version and bytes are replayed, other ones are a reused key, an unknown key
        is the conflict.
        """
        if key is None:
            raise stale
        prior = await self.store.replay(table_id, key, version, hashlib.sha256(data).hexdigest(),
                                        stale.latest_table_version)
        if prior is None:
            raise stale
        place = await self.place(table_id)
        await self.staged.ensure(place.location, place.commit_dir, [prior])
        return prior.to_json(place.location, place.commit_dir)

    async def _ratify(self, table_id: str, version: int, data: bytes, uid: str,
                      staged: FileInfo | None = None) -> dict[str, Any]:
        body = parse_commit_body(data, max_line_bytes=self.settings.max_line_bytes, clock=self.clock_rule())
        # A catalog-managed table (the writer staged the file) names its catalog by table feature and
        # io.unitycatalog.tableId, not by an owner property: its metaData actions never give ownership up.
        releases = body.gives_up_ownership and staged is None
        place = await self.place(table_id)
        check_local_log(place.location, place.commit_dir, self.roots)
        sha = hashlib.sha256(data).hexdigest()
        if staged is not None:
            row = CommitRow(
                table_id=table_id, version=version, file_name=staged.path.rsplit("/", 1)[1], idempotency_key=uid,
                file_size=staged.size, file_modification_time=staged.modification_time,
                commit_timestamp=body.in_commit_timestamp, content_sha256=sha, ratified_at=now_ms(),
            )
            ratified = await self._ratify_carrying(row, releases)
        else:
            with self.backfiller.own_publication(table_id, version) if self.backfiller is not None \
                    else contextlib.nullcontext():
                ratified, published = await self._ratify_owner_written(place, table_id, version, data, uid, sha,
                                                                       body.in_commit_timestamp, releases)
                return await self._ratified(place, table_id, ratified, data, body.metadata, releases, published)
        return await self._ratified(place, table_id, ratified, data, body.metadata, releases)

    async def _ratify_carrying(self, row: CommitRow, releases: bool) -> CommitRow:
        """``store.ratify``, carrying the backfill mark this process has yet to record for the table (decision
        62): a table written steadily then costs no mark statements of its own."""
        backfiller = self.backfiller
        carried = backfiller.mark_to_carry(row.table_id) if backfiller is not None else -1
        ratified = await self.store.ratify(row, max_unbackfilled=self.settings.max_unbackfilled_commits,
                                           releases=releases, carried=carried)
        if ratified is row and backfiller is not None:
            backfiller.carried(row.table_id, carried)
        return ratified

    async def _ratified(self, place: TablePlace, table_id: str, ratified: CommitRow, data: bytes,
                        metadata: dict[str, Any] | None, releases: bool, published: bool = False) -> dict[str, Any]:
        """What follows a ratification: the catalog's columns, the backfiller's turn (unless the commit was
        published with its ratification, decision 61), the answer, which names the staged file."""
        if metadata is not None:
            await self._record_columns(table_id, ratified.version, metadata)
        if self.backfiller is not None and not published:
            await self.backfiller.after_commit(table_id, ratified.version, data, releases, ratified)
        return ratified.to_json(place.location, place.commit_dir)

    async def _ratify_owner_written(self, place: TablePlace, table_id: str, version: int, data: bytes, uid: str,
                                    sha: str, commit_timestamp: int, releases: bool) -> tuple[CommitRow, bool]:
        """The design card's shape (decision 67): the staged file is written while the ratifying transaction
        runs, and the transaction keeps the bytes in the row (the database as the write-ahead log, decision 43).
        The staged file is durable before the answer. When this process publishes the table's commits as they
        come and this is the next one, ``<v>.json`` (a copy of the staged bytes, its write prepared meanwhile)
        is published before the answer too (decisions 61, 62); else a background run publishes it. The staged
        file's name is fresh for each attempt (the key lives in the row), so no two attempts ever share a file.
        Returns the ratified row and whether it is published.

        * refused for certain: the attempt's files are orphans, removed once their writes settled;
        * outcome unknown (database unreachable, cancelled): the staged file stays, whatever becomes of the row;
        * an idempotent replay of an earlier attempt: that attempt's file is made sure of, this one's removed;
        * ratified, and the staged file failed: it is written again from memory; when that fails, 503 (the row
          is durable and the file is rewritten from it before any reader sees the version).
        """
        name = staged_file_name(version)
        path = staged_file(place.location, place.commit_dir, name)
        storage = self.storage.for_uri(path)
        now = now_ms()
        row = CommitRow(
            table_id=table_id, version=version, file_name=name, idempotency_key=uid, file_size=len(data),
            file_modification_time=now, commit_timestamp=commit_timestamp, content_sha256=sha, ratified_at=now,
            body=data,
        )
        backfiller = self.backfiller
        direct = backfiller is not None and not releases and backfiller.publishes_next(table_id, version)
        write = asyncio.ensure_future(storage.put_if_absent(path, data))
        # Published at once: ``<v>.json``'s write is prepared while the transaction runs too (decision 62: on local
        # disk the synced bytes wait in a hidden file of their own, and only its name appears once ratified).
        prep = asyncio.ensure_future(self._prepare(place, version, data)) if direct else None
        try:
            ratified = await self._ratify_carrying(row, releases)
        except (CommitFailedError, TableNotFoundError):
            if await _settled(write):  # certain refusal: our file is an orphan
                await self.remove_orphan(storage, path)
            await self._drop(prep)
            raise
        except BaseException:
            write.add_done_callback(_drop_result)  # unknown outcome: the file stays
            if prep is not None:  # nothing of it can be seen: dropped once prepared
                prep.add_done_callback(self._drop_later)
            raise
        if ratified.file_name != name:  # the replay of an earlier attempt under the same key
            if await _settled(write):
                await self.remove_orphan(storage, path)
            await self._drop(prep)
            await self.staged.ensure(place.location, place.commit_dir, [ratified])
            return ratified, False
        try:
            await self._staged_durable(place, row, write)
        except BaseException:
            if prep is not None:  # not published: a background run publishes it once its file is there
                prep.add_done_callback(self._drop_later)
            raise
        if prep is not None and backfiller is not None:
            try:
                return ratified, await backfiller.publish_own(ratified, data, await _prepared(prep))
            except CommitOwnerError as e:  # a background run retries it, and records what it finds
                log.warning("table %s: publishing version %d with its commit failed (%s); a background run "
                            "publishes it", table_id, version, e.message)
        return ratified, False

    async def _staged_durable(self, place: TablePlace, row: CommitRow, write: asyncio.Future[Any]) -> None:
        """Wait for the staged file of the just ratified ``row``; written again from memory when its write failed.
        Raises UnavailableError (503) when that fails too."""
        try:
            await write
        except FileExistsError:
            pass  # a reader of the ratified row wrote it from the row first: the same bytes
        except OSError as e:
            log.warning("table %s: version %d is ratified, writing its staged file failed (%s); trying again",
                        row.table_id, row.version, type(e).__name__)
            try:
                await self.staged.ensure(place.location, place.commit_dir, [row])
            except UnavailableError as again:
                raise UnavailableError(
                    f"version {row.version} is ratified but its staged file could not be written ({again.message}); "
                    "it is written from the database before any reader is told of it: retry with the same "
                    "Idempotency-Key to hear the outcome", latest_table_version=row.version) from e
        self.staged.written(row.table_id, row.version)

    async def _prepare(self, place: TablePlace, version: int, data: bytes) -> Prepared:
        target = delta_file(place.location, version)
        return await self.storage.for_uri(target).prepare(target, data)

    async def _drop(self, prep: asyncio.Future[Prepared] | None) -> None:
        if prep is not None and (prepared := await _prepared(prep)) is not None:
            await self.storage.drop_prepared(prepared)

    def _drop_later(self, prep: asyncio.Future[Prepared]) -> None:
        if not prep.cancelled() and prep.exception() is None:
            task = asyncio.get_running_loop().create_task(self.storage.drop_prepared(prep.result()))
            self._dropping.add(task)
            task.add_done_callback(self._dropping.discard)

    async def after_ratified(self, row: CommitRow, body: CommitBody) -> None:
        """What follows a commit ratified by a multi-table transaction (coordinator/core/transactions.py), as after
        ``commit``: this process's view of the table's latest version, its columns, the backfiller's trigger."""
        place = await self.place(row.table_id)
        self.staged.written(row.table_id, row.version)  # (a transaction writes its staged files first)
        self._turn(row.table_id).ratified(row.to_json(place.location, place.commit_dir))
        if body.metadata is not None:
            await self._record_columns(row.table_id, row.version, body.metadata)
        if self.backfiller is not None:
            await self.backfiller.after_commit(row.table_id, row.version, body.data, False, row)

    async def _record_columns(self, table_id: str, version: int, metadata: dict[str, Any]) -> None:
        """A ratified commit changed the table's metadata: its name (if it has one) now lists the new schema's
        columns, and (unless MANAGED) its configuration as the properties (decision 40). The commit stands
        whatever happens here: a failure is logged, and the next commit with a ``metaData`` records it again."""
        try:
            await self.names.record_log_metadata(table_id, columns_of_metadata(metadata),
                                                 properties_of_metadata(metadata, table_id))
        except Exception as e:  # the commit is ratified; its columns are only a catalog record
            log.warning("table %s: the columns of version %d were not recorded: %s", table_id, version, e)

    async def log_metadata(self, table: TableRow) -> dict[str, Any] | None:
        """The newest ``metaData`` action published in ``table``'s log (None: none found in its commit files).
        Raises UnavailableError."""
        return await newest_metadata(self.storage.for_uri(table.location), table.location)

    def clock_rule(self) -> ClockRule:
        return ClockRule(now_ms=now_ms(), max_skew_ms=int(self.settings.max_clock_skew_seconds * 1000))

    async def remove_orphan(self, storage: Any, path: str) -> None:
        """Remove a staged file whose refusal is certain; one that stays is the janitor's."""
        try:
            await storage.delete(path)
        except OSError:
            log.warning("could not remove orphan commit file %s; the janitor will", path)

    # -- reads --------------------------------------------------------------------------------------

    async def get_commits(self, table_id: str, start: int | None, end: int | None) -> dict[str, Any]:
        if start is not None and end is not None and start > end:
            raise InvalidArgumentError(f"startVersion {start} is greater than endVersion {end}")
        table, rows = await self.store.get_commits(table_id, start, end)
        return {
            "commits": await self._for_readers(table.location, table.commit_dir, rows),
            "latestTableVersion": table.reported_latest,
        }

    async def _for_readers(self, location: str, commit_dir: str, rows: list[CommitRow]) -> list[dict[str, Any]]:
        """``rows`` as a reader is handed them: by their staged files, made sure of first. Raises UnavailableError."""
        await self.staged.ensure(location, commit_dir, rows)
        return [r.to_json(location, commit_dir) for r in rows]

    async def add_unseen_commits(self, err: CommitVersionConflictError, table_id: str, version: int) -> None:
        """Put on ``err`` (a refusal of ``version``) the ratified commits from ``version`` on, at most
        ``unseen_limit``, read in one statement with the table's latest version, and whether they are all of them.

        Only a refusal pays this read, and not even that when this process ratified every commit the loser
        missed (a busy table: they are in the table's turn, and ``latest_table_version`` is the newest this
        process knows). When the store cannot answer, the conflict is still the answer: it then carries no
        commit and says it is incomplete (the writer reads the table as it would without them).
        """
        turn = self._turns.get(table_id)
        if turn is not None and (known := turn.unseen(version, self.unseen_limit)) is not None:
            err.latest_table_version = turn.latest
            err.unseen_commits, err.unseen_commits_complete = known, True
            return
        try:
            table, rows = await self.store.commits_from(table_id, version, self.unseen_limit)
        except (UnavailableError, TableNotFoundError):
            err.unseen_commits, err.unseen_commits_complete = [], False
            return
        try:
            err.unseen_commits = await self._for_readers(table.location, table.commit_dir, rows)
        except UnavailableError:
            err.unseen_commits, err.unseen_commits_complete = [], False
            return
        err.latest_table_version = table.reported_latest
        err.unseen_commits_complete = [r.version for r in rows] == list(range(version, table.latest_version + 1))
        if turn is not None and turn.across is not None and turn.across.shared and err.unseen_commits_complete:
            turn.learned(err.unseen_commits)  # a table other processes commit to too (decision 53)

    async def find_table(self, location: str) -> TableRow:
        """The table registered at ``location``. Raises TableNotFoundError."""
        return await self.store.find_table(normalize_location(location))

    async def table(self, table_id: str) -> TableRow:
        """The registration of ``table_id``. Raises TableNotFoundError."""
        return await self.store.get_table(table_id)

    async def tables(self) -> list[TableRow]:
        return await self.store.list_tables()

    async def backlog(self) -> tuple[dict[str, int], list[tuple[TableRow, int]]]:
        """Tables by status, and every table with unpublished commits with the ratification time (ms) of its
        oldest one, the one waiting longest first. Its cost follows the backlog, not the number of tables."""
        return await self.store.table_counts(), await self.store.behind()

    async def overview(self, limit: int) -> Overview:
        """What the status page shows: counts, then at most ``limit`` tables of each kind worth a look."""
        behind = await self.store.behind(limit)
        return Overview(await self.store.table_counts(), behind, await self.store.stopped_tables(limit),
                        await self.store.first_tables(limit))

    async def ping(self) -> dict[str, str | None]:
        """Whether the database and the log storage answer: None when they do, else what went wrong."""
        out: dict[str, str | None] = {"database": None, "storage": None}
        try:
            await self.store.ping()
        except CommitOwnerError as e:
            out["database"] = e.message
        try:
            await self.storage.ping()
        except OSError as e:
            out["storage"] = f"unreachable: {type(e).__name__}"
        return out

    async def table_at(self, table_id: str, table_uri: str) -> TableRow:
        """The table ``table_id`` after checking that ``table_uri`` is its registered location.
        Raises TableNotFoundError, InvalidArgumentError."""
        table = await self.store.get_table(table_id)
        if table.dropped_at is not None:
            raise TableNotFoundError(f"table {table_id} was dropped")
        if normalize_location(table_uri) != table.location:
            raise InvalidArgumentError(f"table_uri {table_uri[:200]!r} is not the registered location of table "
                                       f"{table.table_id}")
        return table

    async def tables_near(self, location: str) -> list[TableRow]:
        """The registered tables at, above or below ``location`` (normalized)."""
        return await self.store.tables_near(location)

    async def unpublished_commits(self, table_id: str) -> tuple[TableRow, list[CommitRow]]:
        """The table and its ratified commits not yet published as ``<v>.json``, in one read."""
        table, rows = await self.store.get_commits(table_id, None, None)
        await self.staged.ensure(table.location, table.commit_dir, rows)
        return table, rows

    async def commits_between(self, table_id: str, start: int, end: int | None) -> tuple[TableRow, list[CommitRow]]:
        """The table and the ratified commits from ``start`` to ``end``, published or not, in one read: at most
        ``get_commits_page_size`` of them, the lowest versions first. A reply with fewer commits than the range
        holds is a page: the caller asks again from the version after the last one listed."""
        if end is not None and start > end:
            raise InvalidArgumentError(f"start version {start} is greater than end version {end}")
        table, rows = await self.store.get_commits(table_id, start, end, backfilled=True,
                                                   limit=self.settings.get_commits_page_size)
        await self.staged.ensure(table.location, table.commit_dir, rows)
        return table, rows

    # -- locations ----------------------------------------------------------------------------------

    def check_location(self, location: str) -> str:
        """``location`` normalized, once it lies under an allowed root. Raises LocationNotAllowedError."""
        loc = normalize_location(location)
        check_allowed(loc, self.roots)
        return loc

    def managed_root(self) -> str:
        """The canonical managed location; raises LocationNotAllowedError when no allowed root holds it."""
        root = parse_root(self.settings.managed_location).uri
        try:
            check_allowed(root + "/x", self.roots)
        except LocationNotAllowedError:
            raise LocationNotAllowedError(
                f"the managed location {root} lies outside every allowed root: set --managed-location "
                "under an --allow-location root") from None
        return root

    async def newest_version(self, location: str) -> int:
        """The newest version published in the log at ``location`` (-1: none). Raises UnavailableError."""
        newest, _ = await newest_version(self.storage.for_uri(location), location)
        return newest

    async def register_staged_create(self, location: str, staging_id: str, name: NameRow) -> TableRow:
        """Register a catalog-managed table the writer creates at a reserved location: it writes version 0
        itself (before this call, as delta-spark does, or right after it, as Sail 0.7 does) and the owner
        ratifies from version 1 on, in ``_staged_commits``."""
        loc = normalize_location(location)
        newest = await self.newest_version(loc)
        return await self.register_table(loc, -1, STAGED_COMMITS_DIR, name=name, table_id=staging_id,
                                         log_version=-1 if newest < 0 else 0, staging_id=staging_id)

    async def register_existing(self, location: str, name: NameRow) -> TableRow:
        """Register (take over) the Delta table at ``location`` at its newest published version."""
        loc = self.check_location(location)  # before the log is even listed
        return await self.register_table(loc, await self.newest_version(loc), None, name=name)

    # -- writer-staged commits (catalog-managed tables) ------------------------------------------------

    async def commit_staged(self, table: TableRow, version: int, file_name: str, file_size: int) -> None:
        """Ratify the file the writer staged as ``_delta_log/_staged_commits/<file_name>`` as ``version``.

        The file is read and checked like an owner-written body (its size must be ``file_size``). The same
        version with the same file name again is a no-op, even once the staged file was cleaned up. Raises
        InvalidArgumentError / InvalidCommitError (bad name, missing or wrong-sized file), PayloadTooLargeError,
        UnavailableError, and the CommitFailedError family of ``commit``.
        """
        if table.commit_dir != STAGED_COMMITS_DIR:
            raise InvalidArgumentError(f"table {table.table_id} does not take writer-staged commits (its "
                                       "commits are written by the owner: use /api/v1)")
        staged = parse_staged_file(file_name)
        if staged is None:
            raise InvalidArgumentError(f"file name {file_name[:80]!r} is not one path segment of the form "
                                       "<version:020>.<uuid>.json")
        if staged.version != version:
            raise InvalidArgumentError(f"file name {file_name[:80]!r} names version {staged.version}, not {version}")
        uid = staged.uid
        try:
            canonical = str(uuid.UUID(uid))
        except ValueError:
            canonical = ""
        if canonical != uid:
            raise InvalidArgumentError("the uuid of a staged file name must be a UUID written in lower case")
        if version <= 0:
            raise InvalidCommitError(f"Commit version {version} must go via filesystem." if version == 0 else
                                     f"Commit version {version} is not valid: versions start at 0.")
        limit = self.settings.max_body_bytes
        if file_size > limit:
            raise PayloadTooLargeError(f"file size {file_size} is above the largest accepted commit "
                                       f"({limit} bytes, --max-body-bytes)")
        path = staged_file(table.location, STAGED_COMMITS_DIR, file_name)
        storage = self.storage.for_uri(path)
        try:
            stat = await storage.info(path)
            data = await storage.read(path) if stat.size == file_size else b""
        except FileNotFoundError:
            if await self.store.replayed(table.table_id, version, file_name) is not None:
                return  # the retry of a commit already ratified (its staged file was cleaned up since)
            raise InvalidCommitError(f"the staged commit file _delta_log/{STAGED_COMMITS_DIR}/{file_name} does not "
                                     "exist: write it before committing") from None
        except OSError as e:
            raise UnavailableError(f"log storage unavailable while reading the staged file: {type(e).__name__}") from e
        if stat.size != file_size or len(data) != file_size:
            raise InvalidCommitError(f"the staged commit file {file_name} holds {max(stat.size, len(data))} "
                                     f"bytes, not the {file_size} bytes sent")
        await self.commit(table.table_id, version, data, uid, staged=dataclasses.replace(stat, size=len(data)))

    async def report_published(self, table_id: str, version: int, *, quiet: bool = False,
                               known: TableRow | None = None) -> None:
        """The writer published every version <= ``version``: check (identical bytes) and record it.

        Raises InvalidArgumentError beyond the latest ratified version; with ``quiet`` a failed check is
        logged rather than raised (the writer's new commit rides on the same request). ``known``: the table
        as the caller read it moments ago; versions only grow, so it answers without a read when it can."""
        table = known
        if table is None or version > table.latest_version:
            table = await self.store.get_table(table_id)
        if version > table.latest_version:
            raise InvalidArgumentError(f"the published version {version} is beyond the latest committed "
                                       f"version {table.latest_version}")
        if self.backfiller is None or version <= table.latest_backfilled_version:
            return
        try:
            await self.backfiller.backfill(table_id, version, wait_seconds=5.0)
        except CommitOwnerError as e:
            if not quiet:
                raise
            log.warning("table %s: recording the writer's backfill through %d failed: %s", table_id, version,
                        e.message)

    async def backfill(self, table_id: str, version: int | None, last_known_backfilled: int | None) -> TableRow:
        """Publish ratified commits through ``version`` (all when None) now; returns the table after it."""
        if self.backfiller is None:
            raise UnavailableError("this process runs no backfiller")
        return await self.backfiller.backfill(table_id, version, last_known_backfilled=last_known_backfilled)

    def forget_place(self, table_id: str) -> None:
        self._places.pop(table_id, None)
