"""Which process has a table's turn, when several processes (``serve --workers``, or several services on one
database) take commits for it: PostgreSQL session advisory locks, one per table (decision 53).

The turn orders proposals between processes; it never decides one. A process that holds a table's turn sends
its line's proposals to ratification one after another while the other processes' heads wait in the database
for the lock (its wait queue is first come, first served), so their staged files and ratifying statements are
not spent on versions they would lose. Whoever holds the lock or not, every ratification is still the one
conditional statement of ``commits.py``: a process that gives up waiting, an old client without a ticket, a
process that holds nothing: all race there as before.

Guarantees and bounds:

* a lock is held on its own connection (an engine of at most ``MAX_HELD`` connections, opened at the first
  turn taken, so a process that never meets another one on a table opens nothing); a process that dies drops
  its connection and PostgreSQL frees its locks at once;
* a wait for the lock ends after ``wait_seconds`` (``lock_timeout``): ``take`` then returns None, as it does
  when ``MAX_HELD`` turns are already held or waited for, or the database fails: the caller races;
* SQLite (one file, no advisory locks) has no turn between processes: ``take`` always returns None.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from dataclasses import dataclass

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from coordinator.store.engine import create_engine
from coordinator.store.schema import owned_tables

log = logging.getLogger("commit_owner.store.turns")

#: The first key of every lock of this module (``pg_advisory_lock(int, int)``): a table's locks never meet
#: another program's locks that use the one-key form or another class.
LOCK_CLASS = 0x0C0DE7
#: At most this many tables' turns held or waited for by one process at a time; beyond that, tables race.
MAX_HELD = 4


def lock_key(table_id: str) -> int:
    """The second key of ``table_id``'s lock: a signed 32-bit hash (two tables sharing one only share turns)."""
    return zlib.crc32(table_id.encode()) - (1 << 31)


@dataclass
class Held:
    """A table's turn held by this process, and what the database said when it was taken."""

    table_id: str
    conn: AsyncConnection
    waited: bool  # another process held the turn when this one asked for it
    latest: int | None  # the table's latest ratified version once the turn was taken (None: none yet)


class TableTurns:
    """The turns of the tables this process takes commits for, shared with every process on the database."""

    def __init__(self, engine: AsyncEngine, *, wait_seconds: float) -> None:
        self._source = engine
        self.enabled = engine.dialect.name == "postgresql"
        self.wait_seconds = wait_seconds
        self._engine: AsyncEngine | None = None
        self._in_use = 0
        self._held: set[AsyncConnection] = set()

    async def take(self, table_id: str) -> Held | None:
        """Wait (at most ``wait_seconds``) for ``table_id``'s turn; None when it was not taken (raises nothing)."""
        if not self.enabled or self._in_use >= MAX_HELD:
            return None
        self._in_use += 1
        conn: AsyncConnection | None = None
        try:
            engine = self._engine = self._engine or self._open()
            conn = await asyncio.wait_for(engine.connect(), self.wait_seconds + 5.0)
            await conn.execution_options(isolation_level="AUTOCOMMIT")  # a session lock, no transaction
            held = await asyncio.wait_for(self._lock(conn, table_id), self.wait_seconds + 5.0)
            if held is None:
                await conn.close()
                self._in_use -= 1
            else:
                self._held.add(conn)
            return held
        except BaseException as e:  # no turn: the proposal races, as it would without one
            log.debug("no turn for table %s: %s", table_id, type(e).__name__)
            if conn is not None:
                with contextlib.suppress(BaseException):
                    await conn.invalidate()  # its locks, if any, go with it
                    await conn.close()
            self._in_use -= 1
            if not isinstance(e, Exception):  # cancelled: the request went away
                raise
            return None

    async def give(self, held: Held) -> None:
        """Let the next process in (raises nothing: a failed unlock drops the connection, and the lock with it)."""
        self._held.discard(held.conn)
        try:
            await asyncio.wait_for(held.conn.execute(select(func.pg_advisory_unlock(LOCK_CLASS,
                                                                                     lock_key(held.table_id)))),
                                   self.wait_seconds + 5.0)
            await held.conn.close()
        except Exception:
            with contextlib.suppress(Exception):
                await held.conn.invalidate()
                await held.conn.close()
        finally:
            self._in_use -= 1

    async def close(self) -> None:
        """Drop every turn still held (their connections, and so their locks) and the engine."""
        for conn in list(self._held):
            with contextlib.suppress(Exception):
                await conn.invalidate()
                await conn.close()
        self._held.clear()
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    def _open(self) -> AsyncEngine:
        url = self._source.url.render_as_string(hide_password=False)
        return create_engine(url, pool_size=MAX_HELD, timeout=self.wait_seconds + 5.0)

    async def _lock(self, conn: AsyncConnection, table_id: str) -> Held | None:
        key = lock_key(table_id)
        latest = select(owned_tables.c.latest_version, owned_tables.c.base_version).where(
            owned_tables.c.table_id == table_id)
        got = (await conn.execute(select(func.pg_try_advisory_lock(LOCK_CLASS, key)))).scalar()
        waited = not got
        if waited:
            if not conn.info.get("turn_lock_timeout"):  # once per connection: the wait's bound
                await conn.execute(text(f"SET lock_timeout = {max(1, int(self.wait_seconds * 1000))}"))
                conn.info["turn_lock_timeout"] = True
            try:
                await conn.execute(select(func.pg_advisory_lock(LOCK_CLASS, key)))
            except Exception:  # lock_timeout: the holder kept it too long; race instead
                return None
        row = (await conn.execute(latest)).first()
        return Held(table_id, conn, waited, row[0] if row is not None and row[0] > row[1] else None)


__all__ = ["LOCK_CLASS", "MAX_HELD", "Held", "TableTurns", "lock_key"]
