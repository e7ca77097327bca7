"""Read-only views over every table: what is left to publish, and counts (the backfiller's sweep, metrics,
the status page)."""

from __future__ import annotations

from sqlalchemy import Select, func, select

from .db import Db
from .schema import commits, owned_tables


def behind_statement(limit: int) -> Select[tuple[str]]:
    """The backfiller's sweep: tables with commit rows not yet backfilled, the oldest such commit first."""
    c = commits.c
    return (select(c.table_id).where(c.backfilled_at.is_(None)).group_by(c.table_id)
            .order_by(func.min(c.ratified_at)).limit(limit))


class Backlog:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def tables_behind(self, limit: int = 1000) -> list[str]:
        """Ids of accepting-or-not tables with unbackfilled commits, the one waiting longest first.

        Read from the commit rows not yet backfilled, through their partial index (``ix_commits_unbackfilled``):
        the sweep's cost follows the commits waiting for publication, not the number of tables. The same tables
        as ``latest_version > latest_backfilled_version`` on ``owned_tables``: a ratification adds the row and
        raises ``latest_version`` in one transaction, a publication marks the rows and raises
        ``latest_backfilled_version`` in one transaction (decision 49)."""
        async with self.db.tx(write=False, single=True) as conn:
            return [str(r[0]) for r in (await conn.execute(behind_statement(limit))).all()]

    async def oldest_unbackfilled(self) -> dict[str, int]:
        """table id -> ratification time (ms) of its oldest unbackfilled commit, for tables that have one."""
        c = commits.c
        stmt = select(c.table_id, func.min(c.ratified_at)).where(c.backfilled_at.is_(None)).group_by(c.table_id)
        async with self.db.tx(write=False, single=True) as conn:
            return {r[0]: int(r[1]) for r in (await conn.execute(stmt)).all()}

    async def stats(self) -> dict[str, int]:
        async with self.db.tx(write=False) as conn:
            n_tables = (await conn.execute(select(func.count()).select_from(owned_tables))).scalar_one()
            n_commits = (await conn.execute(select(func.count()).select_from(commits))).scalar_one()
        return {"tables": int(n_tables), "commits": int(n_commits)}
