"""Read-only views for the browser UI: tables by name or location a page at a time, a table's commits newest
first, and commit activity per minute.

Every listing is keyset-paged (``WHERE key > :after ORDER BY key LIMIT :n``): a page costs the same at the
10,000th table as at the first, and nothing here reads one row per table. ``scope`` is the permission filter
in SQL: the location prefixes the viewer may read (``None``: every table), so a page holds only what the
viewer may see and its length stays ``limit``. A prefix covers a location as ``security.tokens.covers``
says: equal to it, or a parent on a ``/`` boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, case, false, func, or_, select

from coordinator.store.rows import CommitRow, TableRow
from coordinator.store.schema import commits, owned_tables, table_names
from coordinator.store.store import OwnershipStore
from coordinator.store.tables import named_tables, table_of

#: The prefix of every location, as a scope spells "all tables".
ANY = "*"


@dataclass(frozen=True)
class Minute:
    """Commits ratified in one minute: how many, how many are still unpublished, and the publication lag
    (ms from ratification to ``<v>.json``) of those published: mean and max."""

    minute: int  # minutes since the epoch
    commits: int
    unpublished: int
    lag_mean_ms: float | None
    lag_max_ms: int | None


def _in_scope(scope: Sequence[str] | None) -> Any:
    """The SQL condition "a prefix of ``scope`` covers the table's location" (true without a scope)."""
    if scope is None or ANY in scope:
        return None
    loc = owned_tables.c.location
    if not scope:
        return false()
    return or_(*[or_(loc == p, loc.startswith(p + "/", autoescape=True)) for p in scope])


def _where(stmt: Any, *conds: Any) -> Any:
    kept = [c for c in conds if c is not None]
    return stmt.where(and_(*kept)) if kept else stmt


class BrowseStore:
    """Shares the ownership store's engine and transactions."""

    def __init__(self, store: OwnershipStore) -> None:
        self.db = store.db

    async def catalog_counts(self, scope: Sequence[str] | None) -> tuple[dict[str, int], int]:
        """Live tables per catalog name, and the live tables without a name, that ``scope`` covers."""
        n, t = table_names.c, owned_tables.c
        named = _where(select(n.catalog_name, func.count()).select_from(
            owned_tables.join(table_names, n.table_id == t.table_id)), _in_scope(scope)).group_by(n.catalog_name)
        unnamed = _where(select(func.count()).select_from(
            owned_tables.outerjoin(table_names, n.table_id == t.table_id)),
            n.table_id.is_(None), t.dropped_at.is_(None), _in_scope(scope))
        async with self.db.tx(write=False) as conn:
            counts = {str(r[0]): int(r[1]) for r in (await conn.execute(named)).all()}
            alone = int((await conn.execute(unnamed)).scalar_one())
        return counts, alone

    async def schema_counts(self, catalog: str, scope: Sequence[str] | None) -> dict[str, int]:
        """Tables per schema of ``catalog`` that ``scope`` covers."""
        n, t = table_names.c, owned_tables.c
        stmt = _where(select(n.schema_name, func.count()).select_from(
            owned_tables.join(table_names, n.table_id == t.table_id)),
            n.catalog_name == catalog, _in_scope(scope)).group_by(n.schema_name)
        async with self.db.tx(write=False, single=True) as conn:
            return {str(r[0]): int(r[1]) for r in (await conn.execute(stmt)).all()}

    async def named_page(self, catalog: str, schema: str, after: str | None, limit: int,
                         scope: Sequence[str] | None) -> list[TableRow]:
        """The named tables of ``catalog.schema`` by name, after ``after``."""
        n = table_names.c
        stmt = _where(named_tables(), n.catalog_name == catalog, n.schema_name == schema,
                      None if after is None else n.name > after, _in_scope(scope))
        async with self.db.tx(write=False, single=True) as conn:
            rows = (await conn.execute(stmt.order_by(n.name).limit(limit))).all()
        return [table_of(r) for r in rows]

    async def located_page(self, after: str | None, limit: int, scope: Sequence[str] | None, *,
                           location_prefix: str | None = None, name_prefix: str | None = None,
                           unnamed: bool = False) -> list[TableRow]:
        """Tables by location, after ``after``: those whose location starts with ``location_prefix``, whose name
        (``catalog.schema.table`` or the table's own) starts with ``name_prefix``, or, with ``unnamed``, the
        live tables without a name."""
        t, n = owned_tables.c, table_names.c
        conds: list[Any] = [_in_scope(scope)]
        if after is not None:
            conds.append(t.location > after)
        if location_prefix is not None:
            conds.append(t.location.startswith(location_prefix, autoescape=True))
        if name_prefix is not None:
            whole = n.catalog_name + "." + n.schema_name + "." + n.name
            conds.append(or_(n.name.startswith(name_prefix, autoescape=True),
                             whole.startswith(name_prefix, autoescape=True)))
        if unnamed:
            conds += [n.name.is_(None), t.dropped_at.is_(None)]
        stmt = _where(named_tables(), *conds).order_by(t.location).limit(limit)
        async with self.db.tx(write=False, single=True) as conn:
            return [table_of(r) for r in (await conn.execute(stmt)).all()]

    async def most_behind(self, limit: int, scope: Sequence[str] | None) -> list[TableRow]:
        """The tables with the most ratified commits not yet published, most first."""
        t = owned_tables.c
        backlog = t.latest_version - t.latest_backfilled_version
        stmt = _where(named_tables(), backlog > 0, _in_scope(scope)).order_by(backlog.desc(), t.location).limit(limit)
        async with self.db.tx(write=False, single=True) as conn:
            return [table_of(r) for r in (await conn.execute(stmt)).all()]

    async def commits_page(self, table_id: str, before: int | None, limit: int) -> list[CommitRow]:
        """The table's commit rows newest first, below version ``before`` when given."""
        c = commits.c
        stmt = _where(select(commits), c.table_id == table_id, None if before is None else c.version < before)
        async with self.db.tx(write=False, single=True) as conn:
            rows = (await conn.execute(stmt.order_by(c.version.desc()).limit(limit))).all()
        return [CommitRow.of(r._mapping) for r in rows]

    async def minutes(self, since_ms: int, scope: Sequence[str] | None, table_id: str | None = None) -> list[Minute]:
        """Commits ratified since ``since_ms``, per minute: of one table, or of every table ``scope`` covers.

        Owner-wide, only the tables whose last commit is that recent are read (``owned_tables.last_commit_at``),
        each through its primary key: no index on ``ratified_at`` is needed, and idle tables cost nothing. One
        table's window starts at the version ``_first_version_since`` finds, so a long history is not read."""
        c, t = commits.c, owned_tables.c
        lag = c.backfilled_at - c.ratified_at
        minute = (c.ratified_at // 60_000).label("minute")
        stmt = select(minute, func.count(), func.sum(case((c.backfilled_at.is_(None), 1), else_=0)),
                      func.avg(lag), func.max(lag))
        async with self.db.tx(write=False) as conn:
            if table_id is not None:
                first = await _first_version_since(conn, table_id, since_ms)
                if first is None:
                    return []
                tables: Any = and_(c.table_id == table_id, c.version >= first)
            else:
                tables = c.table_id.in_(_where(select(t.table_id), t.last_commit_at >= since_ms, _in_scope(scope)))
            stmt = stmt.where(and_(tables, c.ratified_at >= since_ms)).group_by(minute).order_by(minute)
            rows = (await conn.execute(stmt)).all()
        return [Minute(int(r[0]), int(r[1]), int(r[2] or 0), None if r[3] is None else float(r[3]),
                       None if r[4] is None else int(r[4])) for r in rows]


#: Commit rows read per step of the backward walk of ``_first_version_since``.
WALK_STEP = 2000


async def _first_version_since(conn: Any, table_id: str, since_ms: int) -> int | None:
    """The lowest version of the table's newest run of commits ratified at or after ``since_ms`` (None: none),
    walking back from the newest by primary key, ``WALK_STEP`` rows at a time: the rows read are the window's
    and one step more. Ratification times grow with the version within a table (one database decides each);
    a version whose time is out of order by a moment at the window's edge may fall on either side."""
    c = commits.c
    first, before = None, None
    while True:
        stmt = _where(select(c.version, c.ratified_at), c.table_id == table_id,
                      None if before is None else c.version < before)
        chunk = (await conn.execute(stmt.order_by(c.version.desc()).limit(WALK_STEP))).all()
        for version, ratified_at in chunk:
            if ratified_at < since_ms:
                return first
            first = int(version)
        if len(chunk) < WALK_STEP:
            return first
        before = chunk[-1][0]


__all__ = ["ANY", "BrowseStore", "Minute"]
