"""Ratification: turn a writer's commit request into exactly one ratified version.

Order of work for version v (K01, decision 43): the staged file ``<v:020>.<uuid>.json`` is written with
put-if-absent while the one ratification transaction runs, and the commit row keeps the bytes until the
version is published: the database is the staged file's write-ahead log. The answer waits for both. A
ratified row is never handed to a reader before its file is there (``storage/staged.py`` writes it from the
row when it is not). A file whose transaction lost is an orphan no reader uses; it is removed at once when the
refusal is certain, and never when the outcome is unknown.
The writer-staged commits of the catalog APIs come in through ``writer_staged.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any

from client.contract.errors import (
    CommitFailedError,
    CommitOwnerError,
    CommitVersionConflictError,
    TableNotFoundError,
    UnavailableError,
)
from client.contract.layout import delta_file, random_uuid, staged_file, staged_file_name
from coordinator.core.columns import columns_of_metadata, properties_of_metadata
from coordinator.core.commit_body import parse_commit_body
from coordinator.core.context import Context, check_version, key_uid, new_commit_row
from coordinator.core.rows import Handed, TablePlace
from coordinator.security.roots import check_local_log
from coordinator.storage.base import FileInfo, Prepared
from coordinator.store import CommitRow

if TYPE_CHECKING:
    from coordinator.core.commit_body import CommitBody
    from coordinator.runtime.metrics import Metrics

log = logging.getLogger("commit_owner.service")


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


class Ratifier:
    """The commit path: one ratified version per accepted proposal."""

    def __init__(self, ctx: Context, metrics: Metrics | None = None) -> None:
        self.ctx = ctx
        self.metrics = metrics
        self._dropping: set[asyncio.Task[None]] = set()  # prepared writes of unknown outcome, being dropped

    async def commit(self, table_id: str, version: int, data: bytes, idempotency_key: str | None, *,
                     staged: FileInfo | None = None, ticket: str | None = None) -> Handed:
        """Ratify ``data`` as ``version``; returns the commit as its writer is handed it. Raises the
        CommitFailedError family.

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
                       staged: FileInfo | None, ticket: str | None) -> Handed:
        """``_commit`` once the table's line lets the proposal go (decision 48). Without a ticket the proposal
        never waits (it takes the outsiders' turn, decision 55, or races); a lost race then offers the writer a
        ticket. With one, a lost race says its place."""
        check_version(version)
        if idempotency_key and ticket is not None:
            key_uid(idempotency_key)  # a bad key is refused before the proposal waits in line
        memory = self.ctx.memories.of(table_id)
        line = memory.line
        entry = await line.enter(ticket)
        across = memory.across if entry.turn else None
        lost_race = False
        try:
            if across is not None:  # the turn among processes, when others race for this table (decision 53)
                memory.saw(await across.enter(line))
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
                      staged: FileInfo | None = None) -> Handed:
        uid = key_uid(idempotency_key) if idempotency_key else random_uuid()
        key = uid if idempotency_key else None
        memory = self.ctx.memories.of(table_id)
        if (stale := memory.stale(version)) is not None:
            return await self._stale(table_id, version, data, key, stale)
        memory.queued += 1
        try:
            await memory.lock.acquire()
        finally:
            memory.queued -= 1
        try:
            if (stale := memory.stale(version)) is not None:
                return await self._stale(table_id, version, data, key, stale)
            try:
                result = await self._ratify(table_id, version, data, uid, staged)
            except CommitVersionConflictError as e:
                memory.saw(e.latest_table_version)
                if memory.across is not None:
                    memory.across.contended()  # lost in the database: another process took the version
                raise
            memory.ratified(result)
            losers = memory.queued
        finally:
            memory.lock.release()
        # The proposals that queued behind this one mostly asked for the same version: let them hear that they
        # lost (a loop pass each) before the winner hears that it won, so that the winner of a closed loop is
        # not always the first to propose the next version (fairness between racing writers, decision 28).
        for _ in range(losers):
            await asyncio.sleep(0)
        return result

    async def _stale(self, table_id: str, version: int, data: bytes, key: str | None,
                     stale: CommitVersionConflictError) -> Handed:
        """Answer a proposal for a version already taken, without writing anything.

        Unkeyed: the conflict. Keyed: it may be the retry of the proposal that won, so the key is looked up
        (one read): the same version and bytes are replayed, other ones are a reused key, an unknown key
        is the conflict.
        """
        if key is None:
            raise stale
        prior = await self.ctx.store.replay(table_id, key, version, hashlib.sha256(data).hexdigest(),
                                            stale.latest_table_version)
        if prior is None:
            raise stale
        return (await self.ctx.for_readers(await self.ctx.place(table_id), [prior]))[0]

    async def _ratify(self, table_id: str, version: int, data: bytes, uid: str,
                      staged: FileInfo | None = None) -> Handed:
        ctx = self.ctx
        body = parse_commit_body(data, max_line_bytes=ctx.settings.max_line_bytes, clock=ctx.clock_rule())
        # A catalog-managed table (the writer staged the file) names its catalog by table feature and
        # io.unitycatalog.tableId, not by an owner property: its metaData actions never give ownership up.
        releases = body.gives_up_ownership and staged is None
        place = await ctx.place(table_id)
        check_local_log(place.location, place.commit_dir, ctx.roots)
        await ctx.log_ahead.check(table_id)  # never a version already published (a restored store): once per table
        if staged is not None:
            row = new_commit_row(table_id, version, data, file_name=staged.path.rsplit("/", 1)[1], uid=uid,
                                 commit_timestamp=body.in_commit_timestamp, file=staged, keeps_body=False)
            ratified = await self._ratify_carrying(row, releases)
            return await self._ratified(place, ratified, body, releases)
        with ctx.publisher.own_publication(table_id, version):
            ratified, published = await self._ratify_owner_written(place, table_id, version, data, uid,
                                                                   body.in_commit_timestamp, releases)
            return await self._ratified(place, ratified, body, releases, published)

    async def _ratify_carrying(self, row: CommitRow, releases: bool) -> CommitRow:
        """``store.ratify``, carrying the backfill mark this process has yet to record for the table (decision
        62): a table written steadily then costs no mark statements of its own."""
        publisher = self.ctx.publisher
        carried = publisher.mark_to_carry(row.table_id)
        ratified = await self.ctx.store.ratify(row, max_unbackfilled=self.ctx.settings.max_unbackfilled_commits,
                                               releases=releases, carried=carried)
        if ratified is row:
            publisher.carried(row.table_id, carried)
        return ratified

    async def _ratified(self, place: TablePlace, ratified: CommitRow, body: CommitBody, releases: bool,
                        published: bool = False) -> Handed:
        """What follows a ratification: the catalog's columns, the publisher's turn (unless the commit was
        published with its ratification, decision 61), the answer, which names the staged file."""
        await self._after(ratified, body, releases, published)
        return Handed.of(place.location, place.commit_dir, ratified)

    async def _after(self, row: CommitRow, body: CommitBody, releases: bool, published: bool) -> None:
        if body.metadata is not None:
            await self._record_columns(row.table_id, row.version, body.metadata)
        if not published:
            await self.ctx.publisher.after_commit(row.table_id, row.version, body.data, releases, row)

    async def _ratify_owner_written(self, place: TablePlace, table_id: str, version: int, data: bytes, uid: str,
                                    commit_timestamp: int, releases: bool) -> tuple[CommitRow, bool]:
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
        ctx = self.ctx
        name = staged_file_name(version)
        path = staged_file(place.location, place.commit_dir, name)
        storage = ctx.storage.for_uri(path)
        row = new_commit_row(table_id, version, data, file_name=name, uid=uid, commit_timestamp=commit_timestamp)
        publisher = ctx.publisher
        direct = not releases and publisher.publishes_next(table_id, version)
        write = asyncio.ensure_future(storage.put_if_absent(path, data))
        # Published at once: ``<v>.json``'s write is prepared while the transaction runs too (decision 62: on local
        # disk the synced bytes wait in a hidden file of their own, and only its name appears once ratified).
        prep = asyncio.ensure_future(self._prepare(place, version, data)) if direct else None
        try:
            ratified = await self._ratify_carrying(row, releases)
        except (CommitFailedError, TableNotFoundError):
            if await _settled(write):  # certain refusal: our file is an orphan
                await ctx.remove_orphan(storage, path)
            await self._drop(prep)
            raise
        except BaseException:
            write.add_done_callback(_drop_result)  # unknown outcome: the file stays
            if prep is not None:  # nothing of it can be seen: dropped once prepared
                prep.add_done_callback(self._drop_later)
            raise
        if ratified.file_name != name:  # the replay of an earlier attempt under the same key
            if await _settled(write):
                await ctx.remove_orphan(storage, path)
            await self._drop(prep)
            await ctx.staged.ensure(place.location, place.commit_dir, [ratified])
            return ratified, False
        try:
            await self._staged_durable(place, row, write)
        except BaseException:
            if prep is not None:  # not published: a background run publishes it once its file is there
                prep.add_done_callback(self._drop_later)
            raise
        if prep is not None:
            try:
                return ratified, await publisher.publish_own(ratified, data, await _prepared(prep))
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
                await self.ctx.staged.ensure(place.location, place.commit_dir, [row])
            except UnavailableError as again:
                raise UnavailableError(
                    f"version {row.version} is ratified but its staged file could not be written ({again.message}); "
                    "it is written from the database before any reader is told of it: retry with the same "
                    "Idempotency-Key to hear the outcome", latest_table_version=row.version) from e
        self.ctx.staged.written(row.table_id, row.version)

    async def _prepare(self, place: TablePlace, version: int, data: bytes) -> Prepared:
        target = delta_file(place.location, version)
        return await self.ctx.storage.for_uri(target).prepare(target, data)

    async def _drop(self, prep: asyncio.Future[Prepared] | None) -> None:
        if prep is not None and (prepared := await _prepared(prep)) is not None:
            await self.ctx.storage.drop_prepared(prepared)

    def _drop_later(self, prep: asyncio.Future[Prepared]) -> None:
        if not prep.cancelled() and prep.exception() is None:
            task = asyncio.get_running_loop().create_task(self.ctx.storage.drop_prepared(prep.result()))
            self._dropping.add(task)
            task.add_done_callback(self._dropping.discard)

    async def after_ratified(self, row: CommitRow, body: CommitBody) -> None:
        """What follows a commit ratified by a multi-table transaction (coordinator/core/transactions.py), as after
        ``commit``: this process's memory of the table, its columns, the publisher's trigger."""
        place = await self.ctx.place(row.table_id)
        self.ctx.staged.written(row.table_id, row.version)  # (a transaction writes its staged files first)
        self.ctx.memories.of(row.table_id).ratified(Handed.of(place.location, place.commit_dir, row))
        await self._after(row, body, False, False)

    async def _record_columns(self, table_id: str, version: int, metadata: dict[str, Any]) -> None:
        """A ratified commit changed the table's metadata: its name (if it has one) now lists the new schema's
        columns, and (unless MANAGED) its configuration as the properties (decision 40). The commit stands
        whatever happens here: a failure is logged, and the next commit with a ``metaData`` records it again."""
        try:
            await self.ctx.names.record_log_metadata(table_id, columns_of_metadata(metadata),
                                                     properties_of_metadata(metadata, table_id))
        except Exception as e:  # the commit is ratified; its columns are only a catalog record
            log.warning("table %s: the columns of version %d were not recorded: %s", table_id, version, e)


__all__ = ["Ratifier"]
