"""Commits: ratification, the reads of commit rows, and the backfill bookkeeping.

* ``ratify`` is one conditional UPDATE of the table row (``rules.ratification``: it matches only when
  ``rules.acceptance`` holds) and the INSERT of the commit row, atomically. The primary key
  (table_id, version) is the final arbiter; nothing is checked before acting. When the UPDATE matches no
  row, the row is re-read with each clause of the same rule evaluated by the database, and the refusal
  classified by the first clause that fails.
* With group commit (``group_max_rows`` > 1), ratifications of different tables that arrive together share
  one round trip (``dialect.py`` says how), each judged on its own by the same rule; a proposal whose key is
  already used loses its UPDATE instead of failing the batch; a proposal the database did not judge (its
  table row was held elsewhere) runs on its own, in its caller's task. Backfill marks are grouped the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from typing import Any

from sqlalchemy import and_, bindparam, select, update
from sqlalchemy.exc import IntegrityError

from client.contract.errors import (
    CommitFailedError,
    CommitVersionConflictError,
    IdempotencyKeyReusedError,
    InvalidCommitError,
    TableNotAcceptingCommitsError,
    TableNotFoundError,
    TooManyUnbackfilledCommitsError,
    UnavailableError,
)
from coordinator.store.db import Db
from coordinator.store.group import Group
from coordinator.store.rows import CommitRow, TableRow, now_ms
from coordinator.store.rules import BOUND, acceptance, mark_params, ratify_params
from coordinator.store.schema import commits, owned_tables
from coordinator.store.tables import table_from


class _StateMoved(Exception):
    """The ratification UPDATE matched nothing, yet the re-read finds no reason to refuse: try again."""


def version_message(asked: int, expected: int) -> str:
    return f"Commit version {asked} is not valid. Expected version: {expected}."


class Commits:
    def __init__(self, db: Db, *, group_max_rows: int = 1) -> None:
        self.db = db
        self.ratify_group: Group[tuple[CommitRow, int, int], bool | None] | None = None
        self.mark_group: Group[tuple[str, int], bool] | None = None
        if group_max_rows > 1:
            self.ratify_group = Group(self._ratify_many, lambda item: item[0].table_id, group_max_rows)
            self.mark_group = Group(self._mark_many, lambda item: item[0], group_max_rows)

    # -- ratification -------------------------------------------------------------------------------

    async def ratify(self, row: CommitRow, *, max_unbackfilled: int, releases: bool, carried: int = -1) -> CommitRow:
        """Record that ``row.file_name`` IS version ``row.version`` (see ``OwnershipStore.ratify``); ``row``
        itself is returned only when this call ratified it, and then the mark ``carried`` is recorded with it."""
        for _attempt in range(3):
            # A release (once in a table's life) sets more columns: it always takes the one-row path.
            won = await self.ratify_group.submit((row, max_unbackfilled, carried)) \
                if self.ratify_group and not releases else None
            if won is None:  # not grouped, or the group skipped it (its row was held): on its own, in this task
                won = await self.db.dialect.ratify_one(
                    self.db, row, ratify_params(row, max_unbackfilled, carried=carried), releases)
            if won:
                return row
            try:
                return await self._classify(row, max_unbackfilled)
            except _StateMoved:
                continue  # nothing refuses this proposal now: what refused it a moment ago has passed
        raise UnavailableError(
            f"table {row.table_id} changed three times while version {row.version} was judged; retry"
        )

    async def _ratify_many(self, items: list[tuple[CommitRow, int, int]]) -> list[bool | None]:
        """The group's round trip: which of these proposals (of distinct tables, sent in table order) won;
        None for one that was not judged and must run on its own, in its caller's task (``ratify``). A key
        violation (a proposal racing another process for the same key) or a deadlock with another process's
        batch undoes the whole batch: then each proposal runs on its own."""
        try:
            got = await self.db.dialect.ratify_many(self.db, sorted(items, key=lambda item: item[0].table_id),
                                                    now_ms())
        except (IntegrityError, UnavailableError) as e:
            if isinstance(e, UnavailableError) and not self.db.dialect.deadlock(e):
                raise
            return [None] * len(items)
        return [got[r.table_id] for r, _, _ in items]

    async def _judged(self, row: CommitRow, max_unbackfilled: int) -> tuple[dict[str, Any], CommitRow | None]:
        """The table row as ``row`` finds it, with whether each clause of the rule holds (``ok_<clause>``), and
        the commit already ratified under ``row``'s idempotency key (None: none), in one statement; settled
        (``Dialect.settle``) on the same connection before either is answered. Raises TableNotFoundError."""
        stmt = self.db.driver.statement(self.db.dialect.settled(_judgement()))
        async with self.db.tx(write=False, single=True) as conn:
            rows = await self.db.driver.rows(conn, stmt, ratify_params(row, max_unbackfilled))
            if not rows:
                await self.db.dialect.settle(self.db, conn)  # (a table not found is an answer too)
        if not rows:
            raise TableNotFoundError(f"no table with id {row.table_id}")
        r = stmt.mappings(rows)[0]
        return r, _commit_of(r, "k_")

    async def _classify(self, row: CommitRow, max_unbackfilled: int) -> CommitRow:
        """After a lost UPDATE: the earlier row when this is an idempotent replay, else the refusal of the first
        clause of the rule that fails on the table row as it is now."""
        r, keyed = await self._judged(row, max_unbackfilled)
        table = table_from(r)
        prior = _repeated(keyed, row.idempotency_key, row.version, row.content_sha256, table.reported_latest)
        if prior is not None:
            return prior
        refused = refusal_of(r, table, row, max_unbackfilled)
        if refused is not None:
            raise refused
        # Nothing refuses the proposal any more: the row changed between the UPDATE and this read (say the
        # backlog was full and the backfiller freed it). Not a conflict, since version v is still free.
        raise _StateMoved()

    async def refusal(self, row: CommitRow, max_unbackfilled: int) -> CommitFailedError | None:
        """The refusal of the first clause of the rule that fails for ``row`` on its table row as it is now;
        None when nothing refuses it any more (nor when ``row``'s key is ratified already: the caller looks
        again). Raises TableNotFoundError. (A multi-table transaction's classification of each table that
        refused it, store/transactions.py.)"""
        r, keyed = await self._judged(row, max_unbackfilled)
        return None if keyed is not None else refusal_of(r, table_from(r), row, max_unbackfilled)

    async def replay(self, table_id: str, key: str, version: int, sha256: str,
                     latest_table_version: int | None) -> CommitRow | None:
        """The commit ratified under idempotency key ``key`` when this proposal repeats it (same version,
        same bytes); None when the key was never used. Raises IdempotencyKeyReusedError otherwise.

        Either answer is settled first (``Dialect.settle``, on the connection that read it): the earlier
        attempt's outcome may have been unknown (its COMMIT cut by the deadline, the row durable on a primary
        that has not yet replicated it, seen by a plain read once the primary stops waiting for its standby),
        and a server that is no longer the primary may not know of it at all. A replay is acked, and a key
        called unused, only as durable as a fresh commit (docs/decisions.md)."""
        prior = await self._find_commit(table_id, "idempotency_key", key, settle=True)
        return _repeated(prior, key, version, sha256, latest_table_version)

    # -- reads --------------------------------------------------------------------------------------

    async def get_commit(self, table_id: str, version: int) -> CommitRow | None:
        return await self._find_commit(table_id, "version", version)

    async def replayed(self, table_id: str, version: int, file_name: str) -> CommitRow | None:
        """Version ``version`` when it was ratified as ``file_name`` (the retry of that commit); None otherwise.
        Settled as in ``replay``."""
        prior = await self._find_commit(table_id, "version", version, settle=True)
        return prior if prior is not None and prior.file_name == file_name else None

    async def _find_commit(self, table_id: str, column: str, value: Any, *, settle: bool = False) -> CommitRow | None:
        """The commit row of ``table_id`` whose ``column`` (a unique key with the table id) is ``value``; with
        ``settle``, settled on the same connection whatever was found (in the same statement when the table
        exists)."""
        built = _commit_by(column)
        stmt = self.db.driver.statement(self.db.dialect.settled(built) if settle else built)
        async with self.db.tx(write=False, single=True) as conn:
            rows = await self.db.driver.rows(conn, stmt, {"p_table_id": table_id, "p_value": value})
            if settle and not rows:
                await self.db.dialect.settle(self.db, conn)
        return _commit_of(stmt.mappings(rows)[0], "") if rows else None

    # -- reads --------------------------------------------------------------------------------------

    async def get_commits(
        self, table_id: str, start: int | None, end: int | None, *, backfilled: bool = False,
        limit: int | None = None, settle: bool = False,
    ) -> tuple[TableRow, list[CommitRow]]:
        """The table and its unbackfilled commits in ``[start, end]``, ascending, read in one statement;
        with ``backfilled`` every ratified commit in the range (the rows are kept after publication); with
        ``limit`` the first ``limit`` of them; with ``settle`` settled on the same connection (what is
        published from the read, ``Dialect.settle``)."""
        built = _get_commits_statement(start is not None, end is not None, backfilled, limit is not None)
        stmt = self.db.driver.statement(self.db.dialect.settled(built) if settle else built)
        params = {"p_table_id": table_id, "p_start": start, "p_end": end, "p_limit": limit}
        async with self.db.tx(write=False, single=True) as conn:
            rows = stmt.mappings(await self.db.driver.rows(conn, stmt, params))
        if not rows:
            raise TableNotFoundError(f"no table with id {table_id}")
        out = [c for m in rows if (c := _commit_of(m, "c_")) is not None]
        return table_from(rows[0]), out

    async def commits_from(self, table_id: str, start: int, limit: int) -> tuple[TableRow, list[CommitRow]]:
        """The table and its ratified commits from ``start`` on (published or not), ascending, at most ``limit``,
        read in one statement: what a writer that lost the race for ``start`` has not seen. Versions are
        contiguous, one row each, so the range ``[start, start + limit - 1]`` is the bound."""
        return await self.get_commits(table_id, start, start + max(1, limit) - 1, backfilled=True)

    async def unbackfilled(self, table_id: str, up_to: int | None = None, limit: int | None = None, *,
                           settle: bool = False) -> list[CommitRow]:
        """The table's unbackfilled commits through ``up_to``, ascending; ``settle`` as in ``get_commits``."""
        cond = [commits.c.table_id == table_id, commits.c.backfilled_at.is_(None)]
        if up_to is not None:
            cond.append(commits.c.version <= up_to)
        stmt = select(commits).where(and_(*cond)).order_by(commits.c.version)
        if limit:
            stmt = stmt.limit(limit)
        async with self.db.tx(write=False, single=True) as conn:
            found = [_commit(r) for r in (await conn.execute(stmt)).all()]
            if settle and found:
                await self.db.dialect.settle(self.db, conn)
        return found

    async def recent_commits(self, table_id: str, limit: int = 20) -> list[CommitRow]:
        stmt = select(commits).where(commits.c.table_id == table_id).order_by(commits.c.version.desc()).limit(limit)
        async with self.db.tx(write=False, single=True) as conn:
            return [_commit(r) for r in (await conn.execute(stmt)).all()]

    async def ratified_file_names(self, table_id: str, low: int, high: int) -> dict[int, str]:
        """version -> ratified file name for the versions in ``[low, high]`` (the orphan janitor's one read)."""
        stmt = select(commits.c.version, commits.c.file_name).where(
            and_(commits.c.table_id == table_id, commits.c.version >= low, commits.c.version <= high))
        async with self.db.tx(write=False, single=True) as conn:
            return {int(v): str(f) for v, f in (await conn.execute(stmt)).all()}

    # -- backfill bookkeeping -----------------------------------------------------------------------

    async def mark_backfilled(self, table_id: str, up_to: int) -> None:
        """Record in one transaction that every version <= ``up_to`` is published. Idempotent."""
        if self.mark_group is not None and await self.mark_group.submit((table_id, up_to)):
            return  # else the group skipped it (its table row was held): on its own, in this task
        await self.db.dialect.mark_one(self.db, mark_params(table_id, up_to, now_ms()))

    async def mark_backfilled_many(self, items: dict[str, int], *, later: Collection[str] = ()) -> set[str]:
        """Several tables' marks (table id -> published through) in one round trip; a table whose row another
        transaction holds, or all of them after a deadlock with another process's batch, on its own, except
        the tables of ``later``: those are left unmarked and returned, for the caller's next round trip."""
        if len(items) == 1 and not later:
            await self.mark_backfilled(*next(iter(items.items())))
            return set()
        marked = set(t for t, ok in zip(sorted(items), await self._mark_many(sorted(items.items())), strict=True) if ok)
        left = set()
        for table_id, up_to in items.items():
            if table_id in marked:
                continue
            if table_id in later:
                left.add(table_id)
            else:
                await self.db.dialect.mark_one(self.db, mark_params(table_id, up_to, now_ms()))
        return left

    async def _mark_many(self, items: list[tuple[str, int]]) -> list[bool]:
        """The group's round trip of backfill marks (distinct tables, sent in table order). Returns whether
        each was marked; a table whose row another transaction holds is skipped, and a deadlock with another
        process's batch marks nothing: those are marked on their own by their callers."""
        try:
            marked = await self.db.dialect.mark_many(self.db, sorted(items), now_ms())
        except UnavailableError as e:
            if not self.db.dialect.deadlock(e):
                raise
            return [False] * len(items)
        return [t in marked for t, _ in items]

    async def record_backfill_error(self, table_id: str, message: str) -> None:
        async with self.db.tx(single=True) as conn:
            await conn.execute(
                update(owned_tables).where(owned_tables.c.table_id == table_id)
                .values(backfill_error=message[:2000], backfill_error_at=now_ms())
            )


# -- the refusal of each clause of the rule (rules.acceptance), in the order they are reported --------------

def _not_accepting(table: TableRow, row: CommitRow, cap: int) -> CommitFailedError:
    return TableNotAcceptingCommitsError(
        f"table {table.table_id} is not accepting commits ({table.status}: {table.status_reason})",
        latest_table_version=table.reported_latest)


def _wrong_version(table: TableRow, row: CommitRow, cap: int) -> CommitFailedError:
    # taken (a lost race: retryable after a rebase) or beyond the next one (a gap: never valid)
    error = CommitVersionConflictError if table.latest_version >= row.version else InvalidCommitError
    return error(version_message(row.version, table.latest_version + 1), latest_table_version=table.reported_latest)


def _backlog_full(table: TableRow, row: CommitRow, cap: int) -> CommitFailedError:
    return TooManyUnbackfilledCommitsError(
        f"table {table.table_id} has {table.unbackfilled} unbackfilled commits (limit {cap}): "
        "backfill is behind; ask for a backfill and retry",
        latest_table_version=table.reported_latest)


def _timestamp_not_increasing(table: TableRow, row: CommitRow, cap: int) -> CommitFailedError:
    return InvalidCommitError(
        f"inCommitTimestamp {row.commit_timestamp} must be greater than the previous commit's "
        f"{table.last_commit_timestamp}",
        latest_table_version=table.reported_latest)


_REFUSALS: dict[str, Callable[[TableRow, CommitRow, int], CommitFailedError]] = {
    "accepting": _not_accepting, "version": _wrong_version, "backlog": _backlog_full,
    "timestamp": _timestamp_not_increasing,
}
assert list(_REFUSALS) == list(acceptance(BOUND)), "every clause of the rule has its refusal, in the rule's order"


def refusal_of(judged: Mapping[str, Any], table: TableRow, row: CommitRow, cap: int) -> CommitFailedError | None:
    """The refusal of the first clause that fails in ``judged`` (a row of ``_judgement``), None if none does."""
    for clause, refusal in _REFUSALS.items():
        if not judged["ok_" + clause]:
            return refusal(table, row, cap)
    return None


@functools.cache
def _judgement() -> Any:
    """The table row as a refused proposal finds it, with whether each clause of the rule holds (``ok_<clause>``),
    outer-joined with the commit already ratified under the proposal's idempotency key (``k_<column>``)."""
    t, c = owned_tables.c, commits.c
    keyed = and_(c.table_id == t.table_id, c.idempotency_key == BOUND.idempotency_key)
    return (select(owned_tables, *[ok.label("ok_" + clause) for clause, ok in acceptance(BOUND).items()],
                   *[col.label("k_" + col.name) for col in c])
            .select_from(owned_tables.outerjoin(commits, keyed))
            .where(t.table_id == BOUND.table_id))


@functools.cache
def _commit_by(column: str) -> Any:
    """The commit row of table ``p_table_id`` whose ``column`` is ``p_value``: one row when the table exists, its
    columns NULL when there is no such commit."""
    c, t = commits.c, owned_tables.c
    found = and_(c.table_id == t.table_id, c[column] == bindparam("p_value"))
    return (select(*c).select_from(owned_tables.outerjoin(commits, found))
            .where(t.table_id == bindparam("p_table_id")))


@functools.cache
def _get_commits_statement(has_start: bool, has_end: bool, backfilled: bool = False, has_limit: bool = False) -> Any:
    """The table row outer-joined with its unbackfilled (or all) commits in a version range (the first
    ``p_limit`` of them with ``has_limit``), built once."""
    cond = [commits.c.table_id == owned_tables.c.table_id]
    if not backfilled:
        cond.append(commits.c.backfilled_at.is_(None))
    if has_start:
        cond.append(commits.c.version >= bindparam("p_start"))
    if has_end:
        cond.append(commits.c.version <= bindparam("p_end"))
    stmt = (
        select(owned_tables, *[c.label("c_" + c.name) for c in commits.c])
        .select_from(owned_tables.outerjoin(commits, and_(*cond)))
        .where(owned_tables.c.table_id == bindparam("p_table_id"))
        .order_by(commits.c.version)
    )
    return stmt.limit(bindparam("p_limit")) if has_limit else stmt


def _commit_of(m: Mapping[str, Any], prefix: str) -> CommitRow | None:
    """The commit row held in ``m``'s columns named ``<prefix><column>`` (None: an outer join found none)."""
    return None if m[prefix + "version"] is None else CommitRow.of(m, prefix)


def _repeated(prior: CommitRow | None, key: str, version: int, sha256: str,
              latest_table_version: int | None) -> CommitRow | None:
    """``prior`` (the commit ratified under ``key``) when a proposal of ``version`` with content ``sha256``
    repeats it; None when there is none. Raises IdempotencyKeyReusedError when the key was used otherwise."""
    if prior is None:
        return None
    if prior.version == version and prior.content_sha256 == sha256:
        return prior
    raise IdempotencyKeyReusedError(
        f"idempotency key {key} was already used for version {prior.version} with different content",
        latest_table_version=latest_table_version,
    )


def _commit(r: Any) -> CommitRow:
    return CommitRow.of(r._mapping)
