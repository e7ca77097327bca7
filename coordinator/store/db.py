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
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from client.contract.errors import UnavailableError

from .dialect import Dialect, dialect_for
from .driver import Driver, driver_for
from .engine import shut_socket


def engine_deadline(engine: AsyncEngine) -> float:
    """The deadline of one unit of work on ``engine``: its pool timeout, as ``create_engine`` set it."""
    timeout = getattr(engine.sync_engine.pool, "timeout", None)
    return float(timeout()) if callable(timeout) else 30.0


class Db:
    """The engine and its dialect (chosen once, here), and the store's transactions."""

    def __init__(self, engine: AsyncEngine, what: str = "ownership store") -> None:
        self.engine = engine
        self.dialect: Dialect = dialect_for(engine)
        self.driver: Driver = driver_for(engine)  # the hot statements, run on the driver connection of ``tx``
        self.what = what  # named in the UnavailableError's message
        self.timeout = engine_deadline(engine)  # <= 0: none

    @contextlib.asynccontextmanager
    async def tx(self, write: bool = True, single: bool = False) -> AsyncIterator[AsyncConnection]:
        """A transaction; with ``single`` (the block runs exactly one statement) autocommit where that is atomic.
        A write takes the dialect's write lock, if it has one. Raises UnavailableError past the deadline."""
        lock = self.dialect.write_lock if write else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout if self.timeout > 0 else None
        cut = _Cut()
        try:
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

    def _no_connection(self) -> str:
        """Why no connection came within the deadline: every one of the pool in use, or the database not
        answering a new one (each names the setting to look at)."""
        pool = self.engine.sync_engine.pool
        size, out = getattr(pool, "size", None), getattr(pool, "checkedout", None)
        if callable(size) and callable(out) and out() >= size():
            return (f"{self.what} unavailable: connection pool exhausted, all {size()} connections "
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


def _pgconn(conn: AsyncConnection) -> Any:
    """The libpq connection under ``conn``; None on SQLite."""
    if conn.dialect.name != "postgresql":
        return None
    driver = conn.sync_connection.connection.driver_connection if conn.sync_connection else None
    return getattr(driver, "pgconn", None)
