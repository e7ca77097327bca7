"""The store's plumbing: one engine, its dialect, and the transaction every part of the store runs in.

Driver errors never leave the store: a connection failure becomes ``UnavailableError`` here, the one
place that translates them; ``IntegrityError`` passes through, for the caller to classify.

Every transaction has a deadline enforced by this process, not by the server (a frozen server enforces
nothing): the engine's pool timeout (``request_timeout_seconds``). Waiting for a pooled connection, opening
one and the block's statements all count. Past it, a PostgreSQL connection's socket is shut down under the
statement in flight, so the driver fails at once, the connection is closed (never reused) and the caller
gets ``UnavailableError`` (503, retryable; for a commit, outcome unknown: ``Commits.replay`` says how a
retry is then acknowledged). docs/decisions.md, a store that never hangs the owner.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from client.contract.errors import UnavailableError
from coordinator.store.dialect import Dialect, dialect_for
from coordinator.store.driver import Driver, driver_for
from coordinator.store.engine import shut_socket


def engine_deadline(engine: AsyncEngine) -> float:
    """The deadline of one unit of work on ``engine``: its pool timeout, as ``create_engine`` set it."""
    timeout = getattr(engine.sync_engine.pool, "timeout", None)
    return float(timeout()) if callable(timeout) else 30.0


class Db:
    """The engine and its dialect (chosen once, here), and the store's transactions."""

    def __init__(self, engine: AsyncEngine, what: str = "ownership store", *, linger_seconds: float = 0.0) -> None:
        """``linger_seconds`` > 0 (a serving process; PostgreSQL): an autocommit connection a one-statement unit
        of work used cleanly is kept that long for the next one (decision 63); ``close`` lets go of them."""
        self.engine = engine
        self.dialect: Dialect = dialect_for(engine)
        self.driver: Driver = driver_for(engine)  # the hot statements, run on the driver connection of ``tx``
        self.what = what  # named in the UnavailableError's message
        self.timeout = engine_deadline(engine)  # <= 0: none
        self.linger = linger_seconds if (self.dialect.name == "postgresql" and self.dialect.autocommit is not None
                                         and self.dialect.write_lock is None) else 0.0
        self._idle: list[tuple[AsyncConnection, float]] = []  # (connection, loop time it was left at)
        self._evicting: asyncio.TimerHandle | None = None
        self._closing: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def tx(self, write: bool = True, single: bool = False) -> AsyncIterator[AsyncConnection]:
        """A transaction; with ``single`` (the block runs exactly one statement) autocommit where that is atomic.
        A write takes the dialect's write lock, if it has one. Raises UnavailableError past the deadline."""
        lock = self.dialect.write_lock if write else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout if self.timeout > 0 else None
        cut = _Cut()
        kept = self._idle.pop()[0] if single and self._idle else None
        if kept is None and self._idle and self._pool_full():
            await self.let_go()  # the connections kept idle go back to a pool that has no other one left
        with self._translated(cut):
            if single and self.linger > 0:
                async with self._kept(kept, loop, deadline, cut) as conn:
                    yield conn
                return
            async with contextlib.AsyncExitStack() as stack:
                # Exits run last-in first-out: the timer is disarmed only after the transaction's COMMIT (or
                # ROLLBACK) and the return of the connection, so the deadline covers those too.
                stack.callback(cut.disarm)
                try:
                    async with _until(deadline):  # the wait for the lock and a connection
                        if lock is not None:
                            await lock.acquire()
                            stack.callback(lock.release)
                        autocommit = self.dialect.autocommit if single else None
                        conn = await stack.enter_async_context(
                            autocommit.connect() if autocommit is not None else self.engine.begin())
                except TimeoutError:
                    raise UnavailableError(self._no_connection()) from None
                cut.arm(loop, deadline, conn)
                yield conn

    @contextlib.contextmanager
    def _translated(self, cut: _Cut) -> Iterator[None]:
        """The one translation of driver errors: ``IntegrityError`` passes (the caller classifies it), the rest
        is ``UnavailableError``."""
        try:
            yield
        except IntegrityError:
            raise
        except PoolTimeoutError as e:  # the pool's own wait ran out first: every connection is in use
            raise UnavailableError(self._no_connection()) from e
        except (OperationalError, DBAPIError) as e:
            cause = e.orig if getattr(e, "orig", None) else e
            if cut.fired:
                raise UnavailableError(f"{self.what} unavailable: no answer within {self.timeout:g}s, "
                                       "connection closed; retry") from e
            raise UnavailableError(f"{self.what} unavailable: {type(cause).__name__}") from e
        except (OSError, ConnectionError) as e:
            raise UnavailableError(f"{self.what} unavailable: {type(e).__name__}") from e  # no host paths

    @contextlib.asynccontextmanager
    async def _kept(self, conn: AsyncConnection | None, loop: asyncio.AbstractEventLoop, deadline: float | None,
                    cut: _Cut) -> AsyncIterator[AsyncConnection]:
        """A one-statement unit of work on an autocommit connection kept from an earlier one (``conn``), else a
        new one from the pool; kept again when the block ends cleanly with the connection sound and outside any
        transaction, closed (back to the pool, or invalidated by SQLAlchemy) otherwise (decision 63)."""
        if conn is None:
            try:
                assert self.dialect.autocommit is not None  # (``linger`` is 0 without it)
                async with _until(deadline):
                    conn = await self.dialect.autocommit.connect()
            except TimeoutError:
                raise UnavailableError(self._no_connection()) from None
        cut.arm(loop, deadline, conn)
        clean = False
        try:
            yield conn
            clean = True
        finally:
            cut.disarm()
            # Kept only while the pool has a connection left besides: with none, a unit of work may be waiting
            # in the pool's queue for this one.
            if clean and not cut.fired and not conn.closed and not conn.invalidated and not conn.in_transaction() \
                    and not self._pool_full():
                self._keep(conn, loop)
            else:
                await conn.close()

    def _keep(self, conn: AsyncConnection, loop: asyncio.AbstractEventLoop) -> None:
        self._idle.append((conn, loop.time()))
        if self._evicting is None:
            self._evicting = loop.call_later(self.linger, self._evict, loop)

    def _evict(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the connections kept idle longer than ``linger`` (back to the pool); look again while any is."""
        self._evicting = None
        now = loop.time()
        old = [c for c, at in self._idle if now - at >= self.linger]
        self._idle = [(c, at) for c, at in self._idle if now - at < self.linger]
        for c in old:
            self._close_later(loop, c)
        if self._idle:
            self._evicting = loop.call_later(self.linger, self._evict, loop)

    def _close_later(self, loop: asyncio.AbstractEventLoop, conn: AsyncConnection) -> None:
        task = loop.create_task(_quietly_closed(conn))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _pool_full(self) -> bool:
        """Every connection of the pool's size is checked out (kept idle here ones included)."""
        pool = self.engine.sync_engine.pool
        size, out = getattr(pool, "size", None), getattr(pool, "checkedout", None)
        return callable(size) and callable(out) and out() >= size()

    async def let_go(self) -> None:
        """Close the connections kept idle (back to the pool); what ``close`` and a full pool call."""
        idle, self._idle = self._idle, []
        if self._evicting is not None:
            self._evicting.cancel()
            self._evicting = None
        for c, _ in idle:
            await _quietly_closed(c)

    async def close(self) -> None:
        await self.let_go()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _no_connection(self) -> str:
        """Why no connection came within the deadline: every one of the pool in use, or the database not
        answering a new one (each names the setting to look at)."""
        if self._pool_full():
            size = self.engine.sync_engine.pool.size()  # type: ignore[attr-defined]
            return (f"{self.what} unavailable: connection pool exhausted, all {size} connections "
                    f"(db_pool_size) in use for {self.timeout:g}s; retry")
        return f"{self.what} unavailable: no connection within {self.timeout:g}s (the database did not answer); retry"

    async def ping(self) -> None:
        async with self.tx(write=False, single=True) as conn:
            await conn.execute(select(1))


_timeout_at = getattr(asyncio, "timeout_at", None)


@contextlib.asynccontextmanager
async def _until(deadline: float | None) -> AsyncIterator[None]:
    """Raise TimeoutError when the block is still running at ``deadline`` (loop time; None: never)."""
    if _timeout_at is not None:
        async with _timeout_at(deadline):
            yield
        return
    task, fired = asyncio.current_task(), []  # Python 3.10: the same, by hand
    assert task is not None

    def fire() -> None:
        fired.append(True)
        task.cancel()

    handle = None if deadline is None else asyncio.get_running_loop().call_at(deadline, fire)
    try:
        yield
    except asyncio.CancelledError:
        if fired:
            raise TimeoutError from None
        raise
    finally:
        if handle is not None:
            handle.cancel()


class _Cut:
    """Shuts a PostgreSQL connection's socket down at the deadline, under whatever statement is in flight:
    the driver then fails at once with a lost connection (which SQLAlchemy invalidates, so it is closed and
    never reused), where cancelling the task would wait for the frozen server to acknowledge the cancel."""

    def __init__(self) -> None:
        self.fired = False
        self._handle: asyncio.TimerHandle | None = None

    def arm(self, loop: asyncio.AbstractEventLoop, deadline: float | None, conn: AsyncConnection) -> None:
        pgconn = _pgconn(conn)
        if deadline is not None and pgconn is not None:  # (SQLite: a local file; busy_timeout bounds its waits)
            self._handle = loop.call_at(deadline, self._fire, pgconn)

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _fire(self, pgconn: Any) -> None:
        self.fired = shut_socket(pgconn)


async def _quietly_closed(conn: AsyncConnection) -> None:
    try:
        await conn.close()
    except Exception:  # noqa: BLE001 - a connection that cannot even close is dropped by the pool
        pass


def _pgconn(conn: AsyncConnection) -> Any:
    """The libpq connection under ``conn``; None on SQLite."""
    if conn.dialect.name != "postgresql":
        return None
    driver = conn.sync_connection.connection.driver_connection if conn.sync_connection else None
    return getattr(driver, "pgconn", None)
