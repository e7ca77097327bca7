"""Backfill leases: which process publishes a table's commits, a holder and an expiry on its ``owned_tables`` row.

A lease is taken or renewed by one conditional UPDATE: it succeeds when the lease is free, expired or already
the holder's. A dead holder's lease expires; nothing else ever breaks one.
"""

from __future__ import annotations

from sqlalchemy import and_, or_, update

from .db import Db
from .rows import now_ms
from .schema import owned_tables


class Leases:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def acquire_lease(self, table_id: str, holder: str, ttl_seconds: float) -> bool:
        """Take or renew the table's backfill lease if it is free, expired or already ours (a conditional UPDATE)."""
        ts = now_ms()
        t = owned_tables.c
        async with self.db.tx(single=True) as conn:
            res = await conn.execute(
                update(owned_tables)
                .where(and_(t.table_id == table_id,
                            or_(t.lease_owner.is_(None), t.lease_owner == holder, t.lease_expires_at < ts)))
                .values(lease_owner=holder, lease_expires_at=ts + int(ttl_seconds * 1000))
            )
            return res.rowcount == 1

    async def release_lease(self, table_id: str, holder: str) -> None:
        t = owned_tables.c
        async with self.db.tx(single=True) as conn:
            await conn.execute(
                update(owned_tables).where(and_(t.table_id == table_id, t.lease_owner == holder))
                .values(lease_owner=None, lease_expires_at=None)
            )
