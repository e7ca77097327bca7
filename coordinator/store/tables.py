"""Owned tables: the ``owned_tables`` rows (registration, lookup, fencing, forgetting), read with their names.

The primary key and the unique location are the arbiters of a registration; a refusal is classified after
the fact, never checked before acting.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, bindparam, or_, select, update
from sqlalchemy.exc import IntegrityError

from client.contract.errors import AlreadyExistsError, NotFoundError, TableAlreadyExistsError, TableNotFoundError
from coordinator.store.db import Db
from coordinator.store.rows import NameRow, TableRow, full_name, now_ms, values_of
from coordinator.store.schema import commits, owned_tables, schemas, staging_tables, table_names


class _Changed(Exception):
    """The row changed since the caller looked: roll the transaction back."""


class Tables:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def register(self, table_id: str, location: str, commit_dir: str, current_version: int,
                       *, name: NameRow | None = None, staging_id: str | None = None) -> TableRow:
        """Register a table; ``current_version + 1`` is written by the client.

        With ``name`` the table is also named, and with ``staging_id`` that staging reservation is used
        up, in the same transaction. Raises TableAlreadyExistsError (location taken), and with a name
        AlreadyExistsError (name taken) or NotFoundError (no such schema or staging table).
        """
        ts = now_ms()
        base = current_version + 1
        values: dict[str, Any] = dict(
            table_id=table_id, location=location, commit_dir=commit_dir, base_version=base,
            latest_version=base, latest_backfilled_version=base, last_commit_timestamp=None,
            accepting=True, status="ACTIVE", status_reason=None, created_at=ts, updated_at=ts,
            last_commit_at=None,
        )
        try:
            async with self.db.tx() as conn:
                await _clear_dropped(conn, location)
                await conn.execute(owned_tables.insert().values(**values))
                if name is not None:
                    await conn.execute(table_names.insert().values(**values_of(name)))
                if staging_id is not None:
                    res = await conn.execute(staging_tables.delete().where(staging_tables.c.id == staging_id))
                    if res.rowcount != 1:
                        raise NotFoundError(f"staging table {staging_id} does not exist (used or dropped meanwhile)")
        except IntegrityError:
            await self._classify_register(location, name)
            raise TableAlreadyExistsError(f"an owned table already exists at {location}") from None
        return TableRow(**values, name=name.full_name if name is not None else None)

    async def _classify_register(self, location: str, name: NameRow | None) -> None:
        """After a refused registration: raise the error naming what was taken or missing."""
        if name is None:
            return
        async with self.db.tx(write=False) as conn:
            if (await conn.execute(select(owned_tables.c.table_id).where(owned_tables.c.location == location))).first():
                return
            schema = (await conn.execute(select(schemas.c.id).where(and_(
                schemas.c.catalog_name == name.catalog_name, schemas.c.name == name.schema_name)))).first()
        if schema is None:
            raise NotFoundError(f"schema {name.catalog_name}.{name.schema_name} does not exist")
        raise AlreadyExistsError(f"table {name.full_name} already exists")

    async def forget_registration(self, table_id: str) -> bool:
        """Drop a registration (and its name) whose ownership commit never landed (no commit ever ratified).
        Returns whether it did."""
        unratified = and_(owned_tables.c.table_id == table_id,
                          owned_tables.c.latest_version == owned_tables.c.base_version)
        async with self.db.tx() as conn:
            await conn.execute(table_names.delete().where(and_(
                table_names.c.table_id == table_id, select(owned_tables.c.table_id).where(unratified).exists())))
            res = await conn.execute(owned_tables.delete().where(unratified))
            return bool(res.rowcount)

    async def forget_with_commits(self, table_id: str, latest_version: int) -> bool:
        """Drop a table's registration and its commit rows in one transaction (the operator's `tables forget`).

        Only while the table's latest version is still ``latest_version`` (what the caller checked the log
        against): a commit ratified meanwhile makes this return False and change nothing.
        """
        t = owned_tables.c
        try:
            async with self.db.tx() as conn:
                await conn.execute(commits.delete().where(commits.c.table_id == table_id))
                res = await conn.execute(owned_tables.delete().where(
                    and_(t.table_id == table_id, t.latest_version == latest_version)))
                if res.rowcount != 1:
                    raise _Changed()  # rolls the commit rows back too
        except _Changed:
            return False
        return True

    async def drop_table(self, table_id: str, name: str | None, reason: str) -> bool:
        """Mark a live table dropped (status DROPPED, no commits accepted, no lease) and free its name, in one
        transaction, only while every ratified commit is published (``latest_backfilled_version =
        latest_version``). Returns False, changing nothing, when the table is gone, already dropped or has
        unpublished commits. The row and its commit rows stay: the audit trail (until the location is
        registered again)."""
        t = owned_tables.c
        ts = now_ms()
        try:
            async with self.db.tx() as conn:
                res = await conn.execute(
                    update(owned_tables)
                    .where(and_(t.table_id == table_id, t.dropped_at.is_(None),
                                t.latest_backfilled_version == t.latest_version))
                    .values(accepting=False, status="DROPPED", status_reason=reason, dropped_at=ts,
                            dropped_name=name, lease_owner=None, lease_expires_at=None, updated_at=ts))
                if res.rowcount != 1:
                    raise _Changed()
                await conn.execute(table_names.delete().where(table_names.c.table_id == table_id))
        except _Changed:
            return False
        return True

    async def unfence(self, table_id: str, latest_version: int) -> bool:
        """Accept commits again on a FENCED table whose latest version is still ``latest_version``. Returns whether
        it did; the recorded backfill error is cleared with the fence."""
        t = owned_tables.c
        async with self.db.tx(single=True) as conn:
            res = await conn.execute(
                update(owned_tables)
                .where(and_(t.table_id == table_id, t.status == "FENCED", t.latest_version == latest_version))
                .values(accepting=True, status="ACTIVE", status_reason=None, backfill_error=None,
                        backfill_error_at=None, updated_at=now_ms()))
            return res.rowcount == 1

    async def get_table(self, table_id: str) -> TableRow:
        stmt = self.db.driver.statement(_table_by_id())  # (the backfiller's read of a table it sweeps)
        async with self.db.tx(write=False, single=True) as conn:
            rows = await self.db.driver.rows(conn, stmt, {"p_table_id": table_id})
        if not rows:
            raise TableNotFoundError(f"no table with id {table_id}")
        return table_from(stmt.mappings(rows)[0])

    async def find_table(self, location: str) -> TableRow:
        async with self.db.tx(write=False, single=True) as conn:
            row = (await conn.execute(named_tables().where(owned_tables.c.location == location))).first()
        if row is None:
            raise TableNotFoundError(f"no owned table at {location}")
        return table_of(row)

    async def near(self, location: str) -> list[TableRow]:
        """The tables registered at, above or below ``location`` (normalized), by location, from the location's
        index: no read of every table, however many there are. Path-segment boundaries as the scopes'
        ``covers`` (coordinator/security/tokens.py), in SQL: an ancestor is one of the location's own prefixes
        cut at a ``/``; a descendant sorts from ``location + "/"`` up to, not including, ``location + "0"``
        (the character after ``/``) in byte order (PostgreSQL: the ``C`` collation, whatever the database's,
        with an index of its own, migration 0007; SQLite compares bytes already)."""
        async with self.db.tx(write=False, single=True) as conn:
            rows = (await conn.execute(near_statement(location, self.db.dialect.name))).all()
        return [table_of(r) for r in rows]

    async def list_tables(self) -> list[TableRow]:
        async with self.db.tx(write=False, single=True) as conn:
            rows = (await conn.execute(named_tables().order_by(owned_tables.c.location))).all()
        return [table_of(r) for r in rows]

    async def set_not_accepting(self, table_id: str, status: str, reason: str) -> None:
        """Stop accepting commits (a fenced or released table)."""
        async with self.db.tx(single=True) as conn:
            await conn.execute(
                update(owned_tables).where(owned_tables.c.table_id == table_id)
                .values(accepting=False, status=status, status_reason=reason, updated_at=now_ms())
            )


async def _clear_dropped(conn: Any, location: str) -> None:
    """Before a registration at ``location``: remove a dropped table's row there (and its commit rows), the
    only kind of row a new registration replaces; a live one still makes the insert fail."""
    dropped = select(owned_tables.c.table_id).where(and_(owned_tables.c.location == location,
                                                         owned_tables.c.dropped_at.is_not(None)))
    await conn.execute(commits.delete().where(commits.c.table_id.in_(dropped)))
    await conn.execute(owned_tables.delete().where(and_(owned_tables.c.location == location,
                                                        owned_tables.c.dropped_at.is_not(None))))


_NAME_PARTS = ("catalog_name", "schema_name", "name")


@functools.cache
def near_statement(location: str, dialect: str) -> Any:
    """The tables at, above or below ``location``, by location (``Tables.near`` says how)."""
    col = owned_tables.c.location
    ordered = col.collate("C") if dialect == "postgresql" else col
    ups = [location] + [location[:i] for i, ch in enumerate(location) if ch == "/" and i > 0]
    return named_tables().where(or_(col.in_(ups), and_(ordered >= location + "/", ordered < location + "0"))) \
        .order_by(ordered)


def named_tables(whole_name: bool = False) -> Any:
    """owned_tables, each row with its name's columns labelled ``n_<column>`` (NULL when the table has no
    name): the three parts of the name, or with ``whole_name`` every column of its ``table_names`` row."""
    cols = [c for c in table_names.c if whole_name or c.name in _NAME_PARTS]
    return select(owned_tables, *[c.label("n_" + c.name) for c in cols]).select_from(
        owned_tables.outerjoin(table_names, table_names.c.table_id == owned_tables.c.table_id))


@functools.cache
def _table_by_id() -> Any:
    return named_tables().where(owned_tables.c.table_id == bindparam("p_table_id"))


def table_of(r: Any) -> TableRow:
    """The TableRow of a result row holding owned_tables' columns (and, from ``named_tables``, its name)."""
    return table_from(r._mapping)


def table_from(m: Mapping[str, Any]) -> TableRow:
    """The TableRow of a mapping holding owned_tables' columns (and, from ``named_tables``, its name)."""
    name = full_name(*(m["n_" + p] for p in _NAME_PARTS)) if m.get("n_name") is not None else None
    return TableRow(**{f: m[f] for f in TableRow.__dataclass_fields__ if f in m and f != "name"}, name=name)


def name_of(r: Any) -> NameRow:
    """The NameRow of a result row of ``named_tables(whole_name=True)`` for a named table."""
    m = r._mapping
    return NameRow(**{c.name: m["n_" + c.name] for c in table_names.c})
