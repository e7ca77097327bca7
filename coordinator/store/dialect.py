"""The one seam between PostgreSQL and SQLite: everything the store does differently on each, chosen once
from the engine (``dialect_for``) and held by the store's ``Db``.

What differs is how a unit of work reaches the database, never what it decides (``rules.py``). Every
statement here is built once from those rules and runs precompiled on the driver connection of ``Db.tx``
(``driver.py``, which also says whether an UPDATE matched):

* PostgreSQL runs a single statement in autocommit mode (atomic by itself: one round trip instead of
  BEGIN, the statement, COMMIT); SQLite serialises writers in-process (one writer at a time: this avoids
  "database is locked").
* A ratification on PostgreSQL is one statement, its conditional UPDATE feeding the INSERT of the commit
  row (``RETURNING`` in a CTE); on SQLite the UPDATE and the INSERT share a transaction. Backfill marks
  likewise.
* A group on PostgreSQL is one statement over arrays of rows (``unnest``) that takes the table rows
  ``FOR UPDATE SKIP LOCKED`` (a row another transaction holds is skipped, never waited for; a batch of one
  takes its row the same way, in a cheaper statement); on SQLite it is one transaction.
* PostgreSQL may abort a statement to break a deadlock (``deadlock``); SQLite has none to report.
* An answer given from a read (a replay acknowledged, a refusal, a version published) is given only once
  what the read saw is as durable as a fresh commit: ``settle``, on the connection that read it. On
  PostgreSQL under synchronous replication a transaction that writes WAL of its own (its commit record lies
  after everything the read saw, so it returns only once the synchronous standby has that far; a server
  that is no longer the primary never gets that far, and a standby refuses it); without synchronous
  replication, or on SQLite (one file, synchronous=FULL), a row that can be read is durable already.
"""

from __future__ import annotations

import asyncio
import functools
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from sqlalchemy import BigInteger, Select, bindparam, case, cast, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from coordinator.store.driver import Driver
from coordinator.store.rows import CommitRow
from coordinator.store.rules import (
    BOUND,
    BOUND_CARRIED,
    BOUND_COLUMNS,
    BOUND_MARK,
    RATIFIED,
    Mark,
    ProposalTerms,
    advance_table,
    commit_values,
    mark_params,
    mark_rows,
    ratification,
    ratify_params,
)
from coordinator.store.schema import commits, owned_tables


class Db(Protocol):
    """What a dialect's units of work need of the store's ``db.Db``: its transactions and driver statements
    (a protocol, so that the dialect, chosen by ``Db``, does not import it back)."""

    driver: Driver

    def tx(self, write: bool = True, single: bool = False) -> AbstractAsyncContextManager[AsyncConnection]: ...


class Dialect:
    """How the store's units of work run on one kind of database."""

    name: str
    write_lock: asyncio.Lock | None = None  # taken by every writing transaction (``Db.tx``)
    autocommit: AsyncEngine | None = None  # runs a transaction of a single statement, when that is atomic

    def deadlock(self, e: BaseException) -> bool:
        """Whether the database aborted the statement behind ``e`` (an UnavailableError) to break a deadlock."""
        return False

    async def ratify_one(self, db: Db, row: CommitRow, params: dict[str, Any], releases: bool) -> bool:
        """One proposal in its own round trip; whether it won (False: classify it)."""
        try:
            return await self._ratify_one(db, row, params, releases)
        except IntegrityError:
            return False  # the (table, version) key or the idempotency key decided: classify

    async def _ratify_one(self, db: Db, row: CommitRow, params: dict[str, Any], releases: bool) -> bool:
        raise NotImplementedError

    async def ratify_many(self, db: Db, ordered: list[tuple[CommitRow, int, int]], now: int) -> dict[str, bool | None]:
        """A group's proposals (row, backlog cap, carried mark; distinct tables, in table order) in one round
        trip: table id -> whether it
        won, or None when it was not judged (its row was held elsewhere). Raises IntegrityError when the
        database undid the whole group."""
        raise NotImplementedError

    async def mark_one(self, db: Db, params: dict[str, Any]) -> None:
        """One backfill mark, atomically."""
        raise NotImplementedError

    async def settle(self, db: Db, conn: AsyncConnection) -> None:
        """Return once every commit ``conn``'s reads could see is as durable as the database promises for a
        commit acknowledged now. Run on the connection that read: a pool may hold connections to two servers
        during a failover (the old primary thawed, not yet demoted; the new one). Raises UnavailableError."""

    def settled(self, stmt: Select[Any]) -> Select[Any]:
        """``stmt`` settling what it reads itself, in the same round trip, when it returns a row (then as
        ``settle`` after it); without a row, ``settle`` must follow. Cached: the same statement for the same
        ``stmt``."""
        return stmt

    async def mark_many(self, db: Db, ordered: list[tuple[str, int]], now: int) -> set[str]:
        """A group's backfill marks (distinct tables, in table order) in one round trip: the tables marked."""
        raise NotImplementedError


def dialect_for(engine: AsyncEngine) -> Dialect:
    return SQLite() if engine.dialect.name == "sqlite" else PostgreSQL(engine)


# -- SQLite -----------------------------------------------------------------------------------------------

class SQLite(Dialect):
    name = "sqlite"

    def __init__(self) -> None:
        self.write_lock = asyncio.Lock()

    async def _ratify_one(self, db: Db, row: CommitRow, params: dict[str, Any], releases: bool) -> bool:
        async with db.tx() as conn:
            if not await db.driver.matched(conn, _one_row(releases), params):
                return False
            await _won(db, conn, row, params)
            return True

    async def ratify_many(self, db: Db, ordered: list[tuple[CommitRow, int, int]], now: int) -> dict[str, bool | None]:
        if len(ordered) == 1:
            row, cap, carried = ordered[0]
            return {row.table_id: await self.ratify_one(db, row, ratify_params(row, cap, now, carried), False)}
        out: dict[str, bool | None] = {}
        async with db.tx() as conn:
            for row, cap, carried in ordered:
                params = ratify_params(row, cap, now, carried)
                won = await db.driver.matched(conn, _guarded(), params)
                if won:
                    await _won(db, conn, row, params)
                out[row.table_id] = won
        return out

    async def mark_one(self, db: Db, params: dict[str, Any]) -> None:
        rows, table = _marks()
        async with db.tx() as conn:
            await db.driver.run(conn, rows, params)
            await db.driver.run(conn, table, params)

    async def mark_many(self, db: Db, ordered: list[tuple[str, int]], now: int) -> set[str]:
        rows, table = _marks()
        async with db.tx() as conn:
            for t, up_to in ordered:
                p = mark_params(t, up_to, now)
                await db.driver.run(conn, rows, p)
                await db.driver.run(conn, table, p)
        return {t for t, _ in ordered}


# -- PostgreSQL -------------------------------------------------------------------------------------------

class PostgreSQL(Dialect):
    name = "postgresql"

    def __init__(self, engine: AsyncEngine) -> None:
        self.autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")  # the same pool serves both

    def deadlock(self, e: BaseException) -> bool:
        return getattr(getattr(e.__cause__, "orig", None), "sqlstate", None) == "40P01"

    async def settle(self, db: Db, conn: AsyncConnection) -> None:
        await db.driver.run(conn, _pg_settle(), {})

    def settled(self, stmt: Select[Any]) -> Select[Any]:
        return _pg_settled(stmt)

    async def _ratify_one(self, db: Db, row: CommitRow, params: dict[str, Any], releases: bool) -> bool:
        async with db.tx(single=True) as conn:
            return bool(await db.driver.run(conn, _pg_ratify(releases), params))

    async def ratify_many(self, db: Db, ordered: list[tuple[CommitRow, int, int]], now: int) -> dict[str, bool | None]:
        if len(ordered) == 1:
            row, cap, carried = ordered[0]
            async with db.tx(single=True) as conn:
                (judged, won), = await db.driver.run(conn, _pg_ratify_lone(), ratify_params(row, cap, now, carried))
            return {row.table_id: bool(won) if judged else None}
        arrays: dict[str, Any] = {"a_" + n: [getattr(r, n) for r, _, _ in ordered] for n in RATIFIED}
        arrays["a_max_unbackfilled"] = [cap for _, cap, _ in ordered]
        arrays["a_carried"] = [carried for _, _, carried in ordered]
        arrays["p_now"] = now
        async with db.tx(single=True) as conn:
            rows = await db.driver.run(conn, _pg_ratify_many(), arrays)
        return {t: (bool(won) if judged else None) for t, judged, won in rows}

    async def mark_one(self, db: Db, params: dict[str, Any]) -> None:
        # PostgreSQL runs a data-modifying WITH exactly once even when nothing reads it: one atomic statement.
        async with db.tx(single=True) as conn:
            await db.driver.run(conn, _pg_mark(), params)

    async def mark_many(self, db: Db, ordered: list[tuple[str, int]], now: int) -> set[str]:
        if len(ordered) == 1:
            (t, up_to), = ordered
            stmt, params = _pg_mark_lone(), mark_params(t, up_to, now)
        else:
            stmt, params = _pg_mark_many(), {"a_table_id": [t for t, _ in ordered],
                                             "a_up_to": [u for _, u in ordered], "p_now": now}
        async with db.tx(single=True) as conn:
            return {r[0] for r in await db.driver.run(conn, stmt, params)}


# -- the statements, built once with bound parameters (building one per call cost more CPU than running it) -

@functools.cache
def _one_row(releases: bool) -> Any:
    return ratification(BOUND, releases=releases, carried=BOUND_CARRIED)


@functools.cache
def _guarded() -> Any:
    return ratification(BOUND, guarded=True, carried=BOUND_CARRIED)


@functools.cache
def _carried_rows() -> Any:
    return mark_rows(Mark(BOUND.table_id, BOUND_CARRIED))


async def _won(db: Db, conn: AsyncConnection, row: CommitRow, params: dict[str, Any]) -> None:
    """SQLite, after a ratification's UPDATE matched: its commit row, and the commit rows' half of the mark it
    carries (decision 62), in the same transaction."""
    await db.driver.run(conn, commits.insert(), commit_values(row))
    if params["p_carried"] >= 0:
        await db.driver.run(conn, _carried_rows(), params)


@functools.cache
def _marks() -> tuple[Any, Any]:
    return mark_rows(BOUND_MARK), advance_table(BOUND_MARK)


def _take(ids: Any) -> Any:
    """The table rows ``ids`` names, locked ``FOR UPDATE SKIP LOCKED`` (a CTE of the ids taken)."""
    t = owned_tables.c
    return select(t.table_id).where(ids).with_for_update(skip_locked=True).cte("taken")


def _insert_winners(pick: Any) -> Any:
    return commits.insert().from_select(list(RATIFIED), pick)


def _bound_pick(won: Any) -> Any:
    return select(*[b.label(n) for n, b in BOUND_COLUMNS.items()]).select_from(won)


def _pg_carried(p: ProposalTerms, carried: Any, won: Any) -> Any:
    """The commit rows' half of the marks the won ratifications carry (decision 62), as a CTE: PostgreSQL
    runs a data-modifying WITH exactly once, read or not."""
    return mark_rows(Mark(p.table_id, carried), taken=won).returning(commits.c.version).cte("carried")


@functools.cache
def _pg_ratify(releases: bool) -> Any:
    """One proposal, one statement: the conditional UPDATE feeding the INSERT (and the mark it carries);
    returns a row when it won."""
    won = _one_row(releases).returning(owned_tables.c.table_id).cte("won")
    return (_insert_winners(_bound_pick(won)).returning(commits.c.version)
            .add_cte(_pg_carried(BOUND, BOUND_CARRIED, won)))


@functools.cache
def _pg_ratify_lone() -> Any:
    """A group of one: ``_pg_ratify`` with the key guard, on the table row taken ``FOR UPDATE SKIP LOCKED``
    (cheaper to plan than the arrays). Returns one row: whether it was judged (its row taken) and won."""
    taken = _take(owned_tables.c.table_id == BOUND.table_id)
    won = ratification(BOUND, guarded=True, taken=taken, carried=BOUND_CARRIED) \
        .returning(owned_tables.c.table_id).cte("won")
    inserted = _insert_winners(_bound_pick(won)).returning(commits.c.version).cte("inserted")
    return select(select(taken.c.table_id).exists().label("judged"),
                  select(inserted.c.version).exists().label("won")).add_cte(_pg_carried(BOUND, BOUND_CARRIED, won))


def _unnest(**columns: Any) -> Any:
    """The arrays bound as ``a_<name>`` (one element per row) as a CTE ``p`` of rows."""
    arrays = [cast(bindparam("a_" + n), ARRAY(ty)) for n, ty in columns.items()]
    return select(func.unnest(*arrays).table_valued(*columns).render_derived(name="p")).cte("p")


@functools.cache
def _pg_ratify_many() -> Any:
    """A group, one statement: the proposals as arrays, the table rows taken ``FOR UPDATE SKIP LOCKED``, the
    ratification of each taken row (with the key guard) and the INSERT of the winners' commit rows. Returns
    one row per proposal: its table id, whether it was judged (its row was taken) and whether it won."""
    p = _unnest(**{n: commits.c[n].type for n in RATIFIED}, max_unbackfilled=BigInteger(), carried=BigInteger())
    taken = _take(owned_tables.c.table_id.in_(select(p.c.table_id)))
    proposal = ProposalTerms.of(p.c)
    won = ratification(proposal, guarded=True, taken=taken, carried=p.c.carried) \
        .returning(owned_tables.c.table_id).cte("won")
    pick = select(*[p.c[n] for n in RATIFIED]).select_from(p.join(won, won.c.table_id == p.c.table_id))
    inserted = _insert_winners(pick).returning(commits.c.table_id).cte("inserted")
    return select(p.c.table_id, p.c.table_id.in_(select(taken.c.table_id)).label("judged"),
                  p.c.table_id.in_(select(inserted.c.table_id)).label("won")) \
        .add_cte(_pg_carried(proposal, p.c.carried, won))


def _pg_marks(m: Mark, taken: Any) -> Any:
    """Both updates of a mark as one statement (on the rows ``taken``, if given); returns the taken ids."""
    marked = mark_rows(m, taken).returning(commits.c.version).cte("marked")
    advanced = advance_table(m, taken).returning(owned_tables.c.table_id).cte("advanced")
    return select(taken.c.table_id).add_cte(marked).add_cte(advanced)


@functools.cache
def _pg_mark() -> Any:
    rows, table = _marks()
    return table.add_cte(rows.returning(commits.c.version).cte("marked"))


@functools.cache
def _pg_mark_lone() -> Any:
    return _pg_marks(BOUND_MARK, _take(owned_tables.c.table_id == BOUND_MARK.table_id))


@functools.cache
def _pg_mark_many() -> Any:
    p = _unnest(table_id=owned_tables.c.table_id.type, up_to=BigInteger())
    return _pg_marks(Mark(p.c.table_id, p.c.up_to), _take(owned_tables.c.table_id.in_(select(p.c.table_id))))


# A transaction that writes WAL commits with a record of its own and waits for synchronous replication
# (synchronous_commit) like any write. A transactional logical message is the smallest such write: it touches
# no table (only an id is not enough: a transaction that wrote no WAL commits without waiting). Written only
# when the server names synchronous standbys: without them a row that can be read is already flushed here.
# An uncorrelated scalar subquery: PostgreSQL runs it once per statement (an InitPlan), whatever the rows.
def _settling() -> Any:
    wal = func.pg_logical_emit_message(True, "commit-owner", "read settled").is_not(None)
    return select(case((func.current_setting("synchronous_standby_names") != "", wal))).scalar_subquery()


@functools.cache
def _pg_settle() -> Any:
    return select(_settling().label("settled"))


@functools.cache
def _pg_settled(stmt: Select[Any]) -> Select[Any]:
    return stmt.add_columns(_settling().label("settled"))
