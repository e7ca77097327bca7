"""Read-only views over every table: what is left to publish, and counts (the backfiller's sweep, metrics,
the status page).

None of them reads every table row into the process: what is behind comes from the commit rows not yet
published (their partial index), counts are counted by the database, and lists are pages.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlalchemy import Select, and_, func, or_, select

from coordinator.store.db import Db
from coordinator.store.rows import TableRow
from coordinator.store.schema import commits, owned_tables
from coordinator.store.tables import named_tables, table_of


def _unpublished(limit: int | None) -> Select[str, int]:
    """Tables with commit rows not yet backfilled and the ratification time of the oldest (``oldest``), the one
    waiting longest first: read through the unpublished commits' partial index (``ix_commits_unbackfilled``)."""
    c = commits.c
    oldest = func.min(c.ratified_at)
    stmt = select(c.table_id, oldest.label("oldest")).where(c.backfilled_at.is_(None)).group_by(c.table_id) \
        .order_by(oldest)
    return stmt if limit is None else stmt.limit(limit)


def behind_statement(limit: int) -> Select[str, int, int]:
    """The backfiller's sweep: tables with commit rows not yet backfilled, their oldest such commit's
    ratification time and their newest such version, the oldest first."""
    return _unpublished(limit).add_columns(func.max(commits.c.version).label("newest"))


class Backlog:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def tables_behind(self, limit: int = 1000, ratified_before: int | None = None,
                            held: Collection[str] = (), published: Mapping[str, int] | None = None) -> list[str]:
        """Ids of accepting-or-not tables with unbackfilled commits, the one waiting longest first. With
        ``ratified_before`` (ms): only those whose oldest unbackfilled commit was ratified before then, and those
        in ``held`` whatever its age (decision 59: the tables the sweeping process publishes). With
        ``published`` (table id -> the version through which the caller published it, its mark not recorded
        yet): a table none of whose unbackfilled commits is newer is left out (decision 62).

        Read from the commit rows not yet backfilled, through their partial index (``ix_commits_unbackfilled``):
        the sweep's cost follows the commits waiting for publication, not the number of tables. The same tables
        as ``latest_version > latest_backfilled_version`` on ``owned_tables``: a ratification adds the row and
        raises ``latest_version`` in one transaction, a publication marks the rows and raises
        ``latest_backfilled_version`` in one transaction (decision 49)."""
        async with self.db.tx(write=False, single=True) as conn:
            rows = (await conn.execute(behind_statement(limit))).all()
        done = published or {}
        return [str(r[0]) for r in rows
                if (ratified_before is None or int(r[1]) < ratified_before or r[0] in held)
                and int(r[2]) > done.get(str(r[0]), -1)]

    async def behind(self, limit: int | None = None) -> list[tuple[TableRow, int]]:
        """The tables with unpublished commits, the one waiting longest first (at most ``limit``), each with the
        ratification time (ms) of its oldest unpublished commit: from the unpublished commits' index, so it
        costs what waits for publication, not the number of tables."""
        sub = _unpublished(limit).subquery()
        stmt = named_tables().add_columns(sub.c.oldest).join(sub, sub.c.table_id == owned_tables.c.table_id) \
            .order_by(sub.c.oldest, owned_tables.c.table_id)
        async with self.db.tx(write=False, single=True) as conn:
            return [(table_of(r), int(r.oldest)) for r in (await conn.execute(stmt)).all()]

    async def counts(self) -> dict[str, int]:
        """Tables by status, counted by the database."""
        t = owned_tables.c
        async with self.db.tx(write=False, single=True) as conn:
            rows = (await conn.execute(select(t.status, func.count()).group_by(t.status))).all()
        return {str(r[0]): int(r[1]) for r in rows}

    async def stopped(self, limit: int) -> list[TableRow]:
        """Live tables that accept no commits (fenced, released), by location, at most ``limit``."""
        t = owned_tables.c
        stmt = named_tables().where(and_(t.accepting.is_(False), t.dropped_at.is_(None))).order_by(t.location)
        async with self.db.tx(write=False, single=True) as conn:
            return [table_of(r) for r in (await conn.execute(stmt.limit(limit))).all()]

    async def first(self, limit: int) -> list[TableRow]:
        """The first ``limit`` tables by location."""
        async with self.db.tx(write=False, single=True) as conn:
            rows = (await conn.execute(named_tables().order_by(owned_tables.c.location).limit(limit))).all()
        return [table_of(r) for r in rows]

    async def active_since(self, ms: int) -> list[TableRow]:
        """Live tables with a commit or a change of their row (status, publication) at or after ``ms``. Neither
        column is indexed (an index on a column every commit updates would cost every commit): the database
        scans the rows, the process gets only the active ones. For a round every few minutes, not per request."""
        t = owned_tables.c
        stmt = named_tables().where(and_(t.dropped_at.is_(None), or_(t.last_commit_at >= ms, t.updated_at >= ms)))
        async with self.db.tx(write=False, single=True) as conn:
            return [table_of(r) for r in (await conn.execute(stmt.order_by(t.table_id))).all()]

    async def live_after(self, table_id: str, limit: int) -> list[TableRow]:
        """The next ``limit`` live tables by id after ``table_id`` ("" for the first): a page of a round robin."""
        t = owned_tables.c
        stmt = named_tables().where(and_(t.dropped_at.is_(None), t.table_id > table_id)).order_by(t.table_id)
        async with self.db.tx(write=False, single=True) as conn:
            return [table_of(r) for r in (await conn.execute(stmt.limit(limit))).all()]

    async def stats(self) -> dict[str, int]:
        async with self.db.tx(write=False) as conn:
            n_tables = (await conn.execute(select(func.count()).select_from(owned_tables))).scalar_one()
            n_commits = (await conn.execute(select(func.count()).select_from(commits))).scalar_one()
        return {"tables": int(n_tables), "commits": int(n_commits)}
