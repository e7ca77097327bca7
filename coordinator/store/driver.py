"""The store's hot statements on the driver itself: compiled once, run on the driver connection.

The statements a commit runs (ratification, backfill marks, the getCommits read, the re-read of a refused
proposal) are built once from the Core expressions of ``rules.py`` and ``dialect.py``, as before, and
compiled here once per dialect into the driver's own SQL text (psycopg's ``%(name)s``, sqlite3's ``?``),
the order of its parameters and the values it fills itself. Each call then runs that text on the driver
connection of the ``AsyncConnection`` that ``Db.tx`` yields, skipping SQLAlchemy's per-call execution
layer (compiled-cache lookup, execution context, result object, the greenlet hop); the rule stays spelled
once, in the Core expression, and nothing else about the unit of work changes:

* it runs inside ``Db.tx``: the same pooled connection, write lock, transaction (or autocommit), deadline
  (the timer shuts the libpq socket under the statement in flight) and error translation;
* a driver error (or a cancellation mid-statement) goes through SQLAlchemy's own handling of a DBAPI
  error on that connection, so it is wrapped as before (``IntegrityError``, ``OperationalError``...), a
  lost connection is invalidated (with the pool's older ones) and ``handle_error`` listeners run;
* ``before_cursor_execute`` listeners still see every statement (the service's statement counter, tests
  that count round trips).

PostgreSQL: psycopg's async connection, whose own policy prepares a statement on a connection from its
fifth run on (``prepare_threshold``): the hot statements run thousands of times, so in steady state each is
parsed once per connection, and a connection configured never to prepare (PgBouncer in transaction mode)
is respected; ``prepare=True`` showed no difference above the noise of a micro-benchmark and would add a
round trip at a statement's first run on each connection.
SQLite: aiosqlite's ``execute_fetchall`` (one hop to its thread per statement, where SQLAlchemy's adapter
made four: cursor, execute, fetch, close). Whether an UPDATE matched a row (``Driver.matched``) is its
``RETURNING`` row, in the same round trip (SQLite older than 3.35: ``changes()``, one more).
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Update, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import ClauseElement


class Statement:
    """One Core statement compiled for one dialect: the SQL text, the parameters the caller gives (by name;
    in order for a positional paramstyle), the values of the parameters the statement carries itself (the
    ``+ 1`` of the rule, a NULL it sets) and the names and type processing of its result columns."""

    def __init__(self, stmt: ClauseElement, dialect: Any) -> None:
        compiled: Any = stmt.compile(dialect=dialect)
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise ValueError("a statement with parameters rendered at execution time cannot be precompiled")
        self.sql: str = compiled.string
        self.fixed: dict[str, Any] = {name: b.effective_value for b, name in compiled.bind_names.items()
                                      if not b.required}
        self.order: tuple[str, ...] | None = tuple(compiled.positiontup) if compiled.positional else None
        self.bind_processors: dict[str, Callable[[Any], Any]] = dict(compiled._bind_processors)
        self.columns: tuple[str, ...] = tuple(c[0] for c in compiled._result_columns)
        procs = [c[3].dialect_impl(dialect).result_processor(dialect, None) for c in compiled._result_columns]
        self.result_processors: list[tuple[int, Callable[[Any], Any]]] = [
            (i, p) for i, p in enumerate(procs) if p is not None]

    def parameters(self, given: dict[str, Any]) -> Any:
        params = {**self.fixed, **given}
        for name, process in self.bind_processors.items():
            if name in params:
                params[name] = process(params[name])
        return params if self.order is None else tuple(params[n] for n in self.order)

    def processed(self, rows: Sequence[Any]) -> list[tuple[Any, ...]]:
        if not self.result_processors:
            return [tuple(r) for r in rows]
        out = []
        for r in rows:
            values = list(r)
            for i, process in self.result_processors:
                values[i] = process(values[i])
            out.append(tuple(values))
        return out

    def mappings(self, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r, strict=True)) for r in rows]


class Driver:
    """Runs precompiled statements on the driver connection under an ``AsyncConnection`` of ``Db.tx``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.dialect = engine.sync_engine.dialect
        self._compiled: dict[ClauseElement, Statement] = {}

    def statement(self, stmt: ClauseElement) -> Statement:
        """``stmt`` compiled for this dialect, on its first use, and kept. ``stmt`` must be built once (the
        builders are cached): a statement built per call would be compiled, and kept, per call."""
        got = self._compiled.get(stmt)
        if got is None:
            got = self._compiled[stmt] = Statement(stmt, self.dialect)
        return got

    async def run(self, conn: AsyncConnection, stmt: ClauseElement, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """``rows`` of the compiled ``stmt``."""
        return await self.rows(conn, self.statement(stmt), params)

    async def rows(self, conn: AsyncConnection, stmt: Statement, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run ``stmt`` with ``params`` on ``conn``'s driver connection; its rows (none for a statement that
        returns nothing). Raises what SQLAlchemy raises for the same driver error."""
        sync = conn.sync_connection
        assert sync is not None
        bound = stmt.parameters(params)
        if sync.dispatch.before_cursor_execute:
            sync.dispatch.before_cursor_execute(sync, None, stmt.sql, bound, None, False)
        driver = sync.connection.driver_connection
        try:
            got = await self._run(driver, stmt.sql, bound, bool(stmt.columns))
        except (Exception, asyncio.CancelledError) as e:
            await conn.run_sync(_handle, e, stmt.sql, bound)
            raise  # (not reached: _handle raises)
        return stmt.processed(got)

    async def matched(self, conn: AsyncConnection, update: Update, params: dict[str, Any]) -> bool:
        """Run ``update``; whether it matched a row (its table's key ``RETURNING``, in the same round trip)."""
        return bool(await self.run(conn, _returning(update), params))

    async def _run(self, driver: Any, sql: str, params: Any, returns_rows: bool) -> Sequence[Any]:
        raise NotImplementedError


@functools.cache
def _returning(update: Update) -> Update:
    return update.returning(*update.table.primary_key.columns)  # type: ignore[attr-defined]


def _handle(sync: Connection, e: BaseException, sql: str, params: Any) -> None:
    """SQLAlchemy's handling of a DBAPI error raised on ``sync``'s connection: wrap it, invalidate a lost
    connection, run the ``handle_error`` listeners; a non-driver error is raised as it is."""
    if not isinstance(e, (sync.dialect.loaded_dbapi.Error, asyncio.CancelledError)):
        raise e
    try:
        raise e  # SQLAlchemy's handler reads the exception in flight (``sys.exc_info``) to raise it again
    except BaseException:
        sync._handle_dbapi_exception(e, sql, params, None, None)


class Psycopg(Driver):
    async def _run(self, driver: Any, sql: str, params: Any, returns_rows: bool) -> Sequence[Any]:
        cur = await driver.execute(sql, params)
        return await cur.fetchall() if returns_rows else ()  # (psycopg builds ``description`` anew per call)


class Aiosqlite(Driver):
    # UPDATE ... RETURNING needs SQLite 3.35 (2021); an older library answers with ``changes()``, one hop more.
    returning = sqlite3.sqlite_version_info >= (3, 35)

    async def matched(self, conn: AsyncConnection, update: Update, params: dict[str, Any]) -> bool:
        if self.returning:
            return await super().matched(conn, update, params)
        await self.run(conn, update, params)
        return bool((await self.run(conn, _CHANGES, {}))[0][0] == 1)

    async def _run(self, driver: Any, sql: str, params: Any, returns_rows: bool) -> Sequence[Any]:
        return list(await driver.execute_fetchall(sql, params))


_CHANGES = select(func.changes())


def driver_for(engine: AsyncEngine) -> Driver:
    return Aiosqlite(engine) if engine.dialect.name == "sqlite" else Psycopg(engine)
