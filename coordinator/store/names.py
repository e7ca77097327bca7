"""Catalogs, schemas, table names and staging reservations: the SQL of the Unity Catalog facade.

Shares the ownership store's engine and transactions (on SQLite, its single-writer lock). Foreign keys
are the arbiter of the hierarchy: a schema insert names a catalog that must exist, a drop of a parent
that still has children fails; the refusal is classified after the fact, never checked before acting.
Listings are ordered by name and paged by "names after this one".
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import and_, bindparam, select, update
from sqlalchemy.exc import IntegrityError

from client.contract.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from coordinator.store.rows import MANAGED, CatalogRow, NameRow, SchemaRow, StagingRow, TableRow, now_ms, values_of
from coordinator.store.schema import catalogs, schemas, staging_tables, table_names
from coordinator.store.store import OwnershipStore
from coordinator.store.tables import name_of, named_tables, table_from, table_of


def missing_catalog(name: str) -> NotFoundError:
    return NotFoundError(f"catalog {name} does not exist")


def missing_schema(catalog: str, name: str) -> NotFoundError:
    return NotFoundError(f"schema {catalog}.{name} does not exist")


def missing_table(catalog: str, schema: str, name: str) -> NotFoundError:
    """What a name that names no table is answered; a name the caller may not see gets the same answer."""
    return NotFoundError(f"table {catalog}.{schema}.{name} does not exist")


class NameStore:
    def __init__(self, store: OwnershipStore) -> None:
        self.store = store
        self.db = store.db  # the store's transactions (on SQLite, its single-writer lock)

    # -- catalogs -----------------------------------------------------------------------------------

    async def create_catalog(self, row: CatalogRow) -> CatalogRow:
        """Raises AlreadyExistsError."""
        try:
            async with self.db.tx(single=True) as conn:
                await conn.execute(catalogs.insert().values(**values_of(row)))
        except IntegrityError:
            raise AlreadyExistsError(f"catalog {row.name} already exists") from None
        return row

    async def get_catalog(self, name: str) -> CatalogRow:
        """Raises NotFoundError."""
        async with self.db.tx(write=False, single=True) as conn:
            r = (await conn.execute(select(catalogs).where(catalogs.c.name == name))).first()
        if r is None:
            raise missing_catalog(name)
        return CatalogRow(**r._mapping)

    async def list_catalogs(self, after: str | None, limit: int) -> list[CatalogRow]:
        stmt = select(catalogs).order_by(catalogs.c.name).limit(limit)
        if after is not None:
            stmt = stmt.where(catalogs.c.name > after)
        async with self.db.tx(write=False, single=True) as conn:
            return [CatalogRow(**r._mapping) for r in (await conn.execute(stmt)).all()]

    async def delete_catalog(self, name: str) -> None:
        """Raises NotFoundError, InvalidArgumentError (the catalog still holds schemas)."""
        try:
            async with self.db.tx(single=True) as conn:
                res = await conn.execute(catalogs.delete().where(catalogs.c.name == name))
        except IntegrityError:
            raise InvalidArgumentError(f"catalog {name} is not empty: drop its schemas first") from None
        if res.rowcount == 0:
            raise missing_catalog(name)

    # -- schemas ------------------------------------------------------------------------------------

    async def create_schema(self, row: SchemaRow) -> SchemaRow:
        """Raises NotFoundError (no such catalog), AlreadyExistsError."""
        try:
            async with self.db.tx(single=True) as conn:
                await conn.execute(schemas.insert().values(**values_of(row)))
        except IntegrityError:
            await self.get_catalog(row.catalog_name)
            raise AlreadyExistsError(f"schema {row.catalog_name}.{row.name} already exists") from None
        return row

    async def get_schema(self, catalog: str, name: str) -> SchemaRow:
        """Raises NotFoundError."""
        async with self.db.tx(write=False, single=True) as conn:
            r = (await conn.execute(select(schemas).where(
                and_(schemas.c.catalog_name == catalog, schemas.c.name == name)))).first()
        if r is None:
            raise missing_schema(catalog, name)
        return SchemaRow(**r._mapping)

    async def list_schemas(self, catalog: str, after: str | None, limit: int) -> list[SchemaRow]:
        """Raises NotFoundError when the catalog does not exist."""
        await self.get_catalog(catalog)
        stmt = select(schemas).where(schemas.c.catalog_name == catalog).order_by(schemas.c.name).limit(limit)
        if after is not None:
            stmt = stmt.where(schemas.c.name > after)
        async with self.db.tx(write=False, single=True) as conn:
            return [SchemaRow(**r._mapping) for r in (await conn.execute(stmt)).all()]

    async def delete_schema(self, catalog: str, name: str) -> None:
        """Drop a schema without tables (its staging reservations go with it).
        Raises NotFoundError, InvalidArgumentError (tables still live in it)."""
        try:
            async with self.db.tx() as conn:
                await conn.execute(staging_tables.delete().where(and_(
                    staging_tables.c.catalog_name == catalog, staging_tables.c.schema_name == name)))
                res = await conn.execute(schemas.delete().where(
                    and_(schemas.c.catalog_name == catalog, schemas.c.name == name)))
        except IntegrityError:
            raise InvalidArgumentError(f"schema {catalog}.{name} is not empty: drop its tables first") from None
        if res.rowcount == 0:
            raise missing_schema(catalog, name)

    # -- staging tables -----------------------------------------------------------------------------

    async def create_staging(self, row: StagingRow) -> StagingRow:
        """Reserve a table id and location under a name not taken yet.
        Raises AlreadyExistsError (a table has this name), NotFoundError (no such schema)."""
        try:
            async with self.db.tx() as conn:
                taken = (await conn.execute(select(table_names.c.table_id).where(and_(
                    table_names.c.catalog_name == row.catalog_name, table_names.c.schema_name == row.schema_name,
                    table_names.c.name == row.name)))).first()
                if taken is None:
                    await conn.execute(staging_tables.insert().values(**values_of(row)))
        except IntegrityError:
            await self.get_schema(row.catalog_name, row.schema_name)
            raise AlreadyExistsError(f"a staging table already holds location {row.location}") from None
        if taken is not None:
            raise AlreadyExistsError(f"table {row.catalog_name}.{row.schema_name}.{row.name} already exists")
        return row

    async def find_staging(self, location: str) -> StagingRow:
        """Raises NotFoundError."""
        async with self.db.tx(write=False, single=True) as conn:
            r = (await conn.execute(select(staging_tables).where(staging_tables.c.location == location))).first()
        if r is None:
            raise NotFoundError(f"no staging table at {location}: create one with POST /staging-tables first")
        return StagingRow(**r._mapping)

    async def get_staging(self, table_id: str) -> StagingRow:
        """Raises NotFoundError."""
        async with self.db.tx(write=False, single=True) as conn:
            r = (await conn.execute(select(staging_tables).where(staging_tables.c.id == table_id))).first()
        if r is None:
            raise NotFoundError(f"no staging table with id {table_id}")
        return StagingRow(**r._mapping)

    async def list_staging(self, created_before: int | None = None) -> list[StagingRow]:
        """Every staging reservation (made before ``created_before`` ms when given), oldest first."""
        stmt = select(staging_tables).order_by(staging_tables.c.created_at, staging_tables.c.id)
        if created_before is not None:
            stmt = stmt.where(staging_tables.c.created_at < created_before)
        async with self.db.tx(write=False, single=True) as conn:
            return [StagingRow(**r._mapping) for r in (await conn.execute(stmt)).all()]

    async def expire_staging(self, staging_id: str, created_before: int) -> bool:
        """Remove the reservation ``staging_id`` if it was made before ``created_before`` and is still unused
        (a table created from it removed it in its registration). Returns whether it did."""
        async with self.db.tx(single=True) as conn:
            res = await conn.execute(staging_tables.delete().where(and_(
                staging_tables.c.id == staging_id, staging_tables.c.created_at < created_before)))
        return bool(res.rowcount)

    # -- named tables -------------------------------------------------------------------------------

    async def get_named(self, catalog: str, schema: str, name: str) -> tuple[TableRow, NameRow]:
        """Raises TableNotFoundError-like NotFoundError subclasses via the caller; here NotFoundError."""
        # On the driver (compiled once): a /delta/v1 request names its table by path, so this read is in each of
        # its commits (issue 39).
        stmt = self.db.driver.statement(_named_by_name())
        async with self.db.tx(write=False, single=True) as conn:
            rows = await self.db.driver.rows(conn, stmt, {"p_catalog": catalog, "p_schema": schema, "p_name": name})
        if not rows:
            raise missing_table(catalog, schema, name)
        m = stmt.mappings(rows)[0]
        return table_from(m), NameRow(**{c.name: m["n_" + c.name] for c in table_names.c})

    async def name_of(self, table_id: str) -> NameRow | None:
        async with self.db.tx(write=False, single=True) as conn:
            r = (await conn.execute(select(table_names).where(table_names.c.table_id == table_id))).first()
        return NameRow(**r._mapping) if r is not None else None

    async def list_named(self, catalog: str, schema: str, after: str | None,
                         limit: int) -> list[tuple[TableRow, NameRow]]:
        """Raises NotFoundError when the schema does not exist."""
        await self.get_schema(catalog, schema)
        n = table_names.c
        stmt = named_tables(whole_name=True).where(and_(n.catalog_name == catalog, n.schema_name == schema)).order_by(n.name).limit(limit)
        if after is not None:
            stmt = stmt.where(n.name > after)
        async with self.db.tx(write=False, single=True) as conn:
            return [_pair(r) for r in (await conn.execute(stmt)).all()]

    async def rename(self, table_id: str, new: str) -> bool:
        """Give a named table another name in its schema. Returns whether it had a name; raises AlreadyExistsError."""
        try:
            async with self.db.tx(single=True) as conn:
                res = await conn.execute(update(table_names).where(table_names.c.table_id == table_id)
                                         .values(name=new, updated_at=now_ms()))
        except IntegrityError:
            raise AlreadyExistsError(f"a table named {new} already exists in this schema") from None
        return bool(res.rowcount)

    async def update_metadata(self, table_id: str, *, columns: list[dict[str, Any]] | None,
                              properties: dict[str, str] | None, comment: str | None) -> None:
        """Record the schema, properties and comment a writer reported with a commit (advisory: the log rules)."""
        values: dict[str, Any] = {"updated_at": now_ms()}
        if columns is not None:
            values["columns"] = columns
        if properties is not None:
            values["properties"] = properties
        if comment is not None:
            values["comment"] = comment
        async with self.db.tx(single=True) as conn:
            await conn.execute(update(table_names).where(table_names.c.table_id == table_id).values(**values))


    async def record_log_metadata(self, table_id: str, columns: list[dict[str, Any]],
                                  configuration: dict[str, str]) -> None:
        """A ratified commit changed the table's metadata: its name (if any) lists the new columns and, unless
        the table is MANAGED (whose writer reports its properties with each commit), the new configuration as
        its properties."""
        n = table_names.c
        async with self.db.tx(single=True) as conn:
            await conn.execute(update(table_names).where(n.table_id == table_id)
                               .values(columns=columns, updated_at=now_ms()))
            await conn.execute(update(table_names).where(and_(n.table_id == table_id, n.table_type != MANAGED))
                               .values(properties=configuration))

    async def fill_columns(self, table_id: str, seen_updated_at: int, columns: list[dict[str, Any]],
                           properties: dict[str, str] | None) -> bool:
        """Record the columns (and properties) read from a table's log, unless its name row changed since it was
        read at ``seen_updated_at`` (a commit's newer schema wins). Returns whether it was recorded."""
        values: dict[str, Any] = {"columns": columns}
        if properties is not None:
            values["properties"] = properties
        async with self.db.tx(single=True) as conn:
            res = await conn.execute(update(table_names).where(and_(
                table_names.c.table_id == table_id, table_names.c.updated_at == seen_updated_at)).values(**values))
        return bool(res.rowcount)


@functools.cache
def _named_by_name() -> Any:
    """A named table and its whole name row, by catalog, schema and name (``NameStore.get_named``)."""
    n = table_names.c
    return named_tables(whole_name=True).where(and_(n.catalog_name == bindparam("p_catalog"),
                                                    n.schema_name == bindparam("p_schema"),
                                                    n.name == bindparam("p_name")))


def _pair(r: Any) -> tuple[TableRow, NameRow]:
    return table_of(r), name_of(r)
