"""The store's plumbing: one engine, its dialect, and the transaction every part of the store runs in.

Driver errors never leave the store: a connection failure becomes ``UnavailableError`` here, the one
place that translates them; ``IntegrityError`` passes through, for the caller to classify.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from client.contract.errors import UnavailableError

from .dialect import Dialect, dialect_for


class Db:
    """The engine and its dialect (chosen once, here), and the store's transactions."""

    def __init__(self, engine: AsyncEngine, what: str = "ownership store") -> None:
        self.engine = engine
        self.dialect: Dialect = dialect_for(engine)
        self.what = what  # named in the UnavailableError's message

    @contextlib.asynccontextmanager
    async def tx(self, write: bool = True, single: bool = False) -> AsyncIterator[AsyncConnection]:
        """A transaction; with ``single`` (the block runs exactly one statement) autocommit where that is atomic.
        A write takes the dialect's write lock, if it has one."""
        lock = self.dialect.write_lock if write else None
        try:
            if lock is not None:
                await lock.acquire()
            try:
                autocommit = self.dialect.autocommit if single else None
                if autocommit is not None:
                    async with autocommit.connect() as conn:
                        yield conn
                else:
                    async with self.engine.begin() as conn:
                        yield conn
            finally:
                if lock is not None:
                    lock.release()
        except IntegrityError:
            raise
        except (OperationalError, DBAPIError) as e:
            cause = e.orig if getattr(e, "orig", None) else e
            raise UnavailableError(f"{self.what} unavailable: {type(cause).__name__}") from e
        except (OSError, ConnectionError) as e:
            raise UnavailableError(f"{self.what} unavailable: {type(e).__name__}") from e  # no host paths

    async def ping(self) -> None:
        async with self.tx(write=False, single=True) as conn:
            await conn.execute(select(1))
