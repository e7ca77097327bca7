"""Backfill leases: which process publishes a table's commits, a holder and an expiry on its ``owned_tables`` row.

A lease is taken or renewed by one conditional UPDATE: it succeeds when the lease is free, expired or already
the holder's. A dead holder's lease expires; nothing else ever breaks one. A process refused the lease may read
who holds it (``lease_holder``, one more statement, only then) to ask the holder to publish (decision 66).
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import and_, bindparam, or_, select, update

from coordinator.store.db import Db
from coordinator.store.rows import now_ms
from coordinator.store.schema import owned_tables


class Leases:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def acquire_lease(self, table_id: str, holder: str, ttl_seconds: float) -> bool:
        """Take or renew the table's backfill lease if it is free, expired or already ours (a conditional UPDATE)."""
        ts = now_ms()
        params = {"p_table_id": table_id, "p_holder": holder, "p_now": ts, "p_expires": ts + int(ttl_seconds * 1000)}
        async with self.db.tx(single=True) as conn:
            return await self.db.driver.matched(conn, _acquire(), params)

    async def lease_holder(self, table_id: str) -> str | None:
        """Who holds the table's lease now (None: nobody, or an expired holder); what a process refused the lease
        reads, and only then: the answer is a hint, since the lease may change hands the next moment."""
        async with self.db.tx(single=True) as conn:
            rows = await self.db.driver.run(conn, _holder(), {"p_table_id": table_id, "p_now": now_ms()})
        return rows[0][0] if rows else None

    async def release_lease(self, table_id: str, holder: str) -> None:
        async with self.db.tx(single=True) as conn:
            await self.db.driver.run(conn, _release(), {"p_table_id": table_id, "p_holder": holder})


# The statements, built once (the driver runs them precompiled: ``driver.py``).

@functools.cache
def _acquire() -> Any:
    t = owned_tables.c
    holder = bindparam("p_holder", type_=t.lease_owner.type)
    return (update(owned_tables)
            .where(and_(t.table_id == bindparam("p_table_id"),
                        or_(t.lease_owner.is_(None), t.lease_owner == holder, t.lease_expires_at < bindparam("p_now"))))
            .values(lease_owner=holder, lease_expires_at=bindparam("p_expires", type_=t.lease_expires_at.type)))


@functools.cache
def _holder() -> Any:
    t = owned_tables.c
    return select(t.lease_owner).where(and_(t.table_id == bindparam("p_table_id"), t.lease_owner.is_not(None),
                                            t.lease_expires_at >= bindparam("p_now")))


@functools.cache
def _release() -> Any:
    t = owned_tables.c
    return (update(owned_tables)
            .where(and_(t.table_id == bindparam("p_table_id"), t.lease_owner == bindparam("p_holder")))
            .values(lease_owner=None, lease_expires_at=None))
