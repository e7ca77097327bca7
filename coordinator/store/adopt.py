"""Adopting published versions the store does not know (``commit-owner tables reconcile``, after a restore).

One database transaction: the table row moves from the latest version the caller read to the adopted top,
published through it (a conditional UPDATE: the database decides a race with a ratification or another
reconcile), the unpublished rows it had are marked published, and one commit row per adopted version is
inserted, already published. A row that changed since the caller read it makes the whole transaction roll back.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, update
from sqlalchemy.exc import IntegrityError

from coordinator.store.db import Db
from coordinator.store.rows import CommitRow, TableRow, now_ms
from coordinator.store.rules import commit_values
from coordinator.store.schema import commits, owned_tables


class _Changed(Exception):
    """The table row changed since the caller read it: roll back."""


async def adopt(db: Db, table: TableRow, rows: Sequence[CommitRow]) -> bool:
    """Record ``rows`` (versions ``table.latest_version + 1`` on, contiguous, each published as ``<v>.json``) as
    ratified and published, and the table published through the last of them, while the table row is still
    ``table`` as to its versions and accepts commits. Returns False, changing nothing, when it is not."""
    if not rows or [r.version for r in rows] != list(range(table.latest_version + 1, table.latest_version + 1 + len(rows))):
        raise ValueError("adopted rows must be contiguous from the table's latest version + 1")
    t, c = owned_tables.c, commits.c
    now = now_ms()
    top = rows[-1]
    try:
        async with db.tx() as conn:
            res = await conn.execute(
                update(owned_tables)
                .where(and_(t.table_id == table.table_id, t.latest_version == table.latest_version,
                            t.latest_backfilled_version == table.latest_backfilled_version, t.accepting.is_(True)))
                .values(latest_version=top.version, latest_backfilled_version=top.version,
                        last_commit_timestamp=top.commit_timestamp, last_commit_at=now, updated_at=now,
                        backfill_error=None, backfill_error_at=None))
            if res.rowcount != 1:
                raise _Changed()
            await conn.execute(update(commits)
                               .where(and_(c.table_id == table.table_id, c.backfilled_at.is_(None)))
                               .values(backfilled_at=now, body=None))
            await conn.execute(commits.insert(), [{**commit_values(r), "backfilled_at": now, "body": None}
                                                  for r in rows])
    except (_Changed, IntegrityError):
        return False
    return True


__all__ = ["adopt"]
