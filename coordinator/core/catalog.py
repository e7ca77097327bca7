"""The catalog: names (catalogs, schemas, tables), staging reservations and table metadata.

The second half of the core, beside the commit service: every API that finds tables by name (Unity
Catalog 2.1 and its preview commits, the Delta REST Catalog API, ``/api/v1`` registration with a name)
calls it. It keeps names in the name store and asks the core's registry (``registry.py``) for registration,
locations and drops: it never ratifies, reads a log or checks a root itself (a writer's commit, with the
metadata it reports, is ``CommitService.writer_commit``).
Inputs are typed values the adapters parsed; replies are rows the adapters shape.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from client.contract.delta_log import CATALOG_MANAGED, TABLE_ID_PROPERTIES, owner_property_keys
from client.contract.errors import (
    CommitOwnerError,
    InvalidArgumentError,
    NotFoundError,
    TableNotFoundError,
)
from client.contract.layout import STAGED_COMMITS_DIR, normalize_location
from coordinator.core.columns import columns_of_metadata, properties_of_metadata
from coordinator.core.registry import Registry
from coordinator.store import TableRow, now_ms
from coordinator.store.names import NameStore, missing_table
from coordinator.store.rows import EXTERNAL, MANAGED, CatalogRow, NameRow, SchemaRow, StagingRow

log = logging.getLogger("commit_owner.catalog")

TABLE_TYPES = (MANAGED, EXTERNAL)


# -- name rules (every API) ----------------------------------------------------------------------------


def check_name(value: Any, what: str) -> str:
    """A catalog, schema or table name: 1-255 characters, no '.', '/', space or control character."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{what} is required and must be a non-empty string")
    if len(value) > 255 or any(c in "./ " or ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidArgumentError(f"{what} {value[:40]!r} is not a valid name: 1-255 characters without "
                                   "'.', '/', spaces or control characters")
    return value


def split_full_name(full: str, parts: int) -> list[str]:
    pieces = full.split(".")
    what = "catalog.schema" if parts == 2 else "catalog.schema.table"
    if len(pieces) != parts:
        raise InvalidArgumentError(f"{full[:80]!r} is not a full name of the form {what}")
    return [check_name(p, "name part") for p in pieces]


def check_table_type(value: Any, what: str = "table type") -> str:
    """A table's type: MANAGED or EXTERNAL (no views). Raises InvalidArgumentError."""
    if value not in TABLE_TYPES:
        raise InvalidArgumentError(f"{what} must be MANAGED or EXTERNAL (views are not supported)")
    return value  # type: ignore[no-any-return]


def refuse_uniform(value: Any) -> None:
    """Every API refuses ``uniform`` (Iceberg conversion) when a request carries one. Raises InvalidArgumentError."""
    if value is not None:
        raise InvalidArgumentError("uniform (Iceberg conversion) is not supported")


def check_properties(value: Any, what: str = "properties") -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidArgumentError(f"{what} must be an object of string values")
    return dict(value)


# -- reserved properties (every API; decision 65) ------------------------------------------------------------

#: The properties the owner keeps and no caller sets: its own, of every generation (the table id in
#: ``io.unitycatalog.tableId`` and its older name ``ucTableId``, ``delta.feature.catalogManaged``, the owner,
#: owner-conf and table-conf keys). An API that derives more keys itself adds them (the Delta REST Catalog API).
RESERVED = owner_property_keys()


def held_properties(table_id: str | None, table_type: str, recorded: Mapping[str, str] | None = None) -> dict[str, str]:
    """The value each reserved key holds for a table: its id under both names (``table_id`` None: a table whose id
    no caller can know yet), ``supported`` for catalogManaged on a MANAGED table, the others as recorded."""
    held = {k: v for k, v in (recorded or {}).items() if k in RESERVED and k not in TABLE_ID_PROPERTIES}
    if table_id is not None:
        held.update(dict.fromkeys(TABLE_ID_PROPERTIES, table_id))
    if table_type == MANAGED:
        held.update(CATALOG_MANAGED.feature_properties)
    return held


def check_reserved(given: Mapping[str, str | None], held: Mapping[str, str], *,
                   reserved: Callable[[str], bool] = RESERVED.__contains__, what: str = "properties") -> None:
    """Refuse properties (a value, or None for a removal) that give a reserved key another value than the one it
    holds, or remove one it holds. Repeating the held value is accepted and changes nothing: clients echo the id
    they were given. Raises InvalidArgumentError naming the keys, before anything is changed."""
    bad = sorted(k for k, v in given.items() if reserved(k) and held.get(k) != v)
    if bad:
        keys = ", ".join(repr(k[:80]) for k in bad[:5])
        raise InvalidArgumentError(f"{what}: {keys} {'is' if len(bad) == 1 else 'are'} reserved (the table's id, "
                                   "the owner's own properties, what the catalog derives): send the value the "
                                   "table holds, or leave it out")


def check_comment(value: Any, what: str = "comment") -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a string")
    return value


def new_name(catalog: str, schema: str, name: str, table_type: str, *, columns: list[dict[str, Any]] | None = None,
             properties: dict[str, str] | None = None, comment: str | None = None) -> NameRow:
    """A table's name row before it is registered (its table id is filled in by the registration)."""
    ts = now_ms()
    return NameRow(table_id="", catalog_name=catalog, schema_name=schema, name=name, table_type=table_type,
                   data_source_format="DELTA", comment=comment, columns=columns or [], properties=properties or {},
                   created_at=ts, updated_at=ts)


def owned_name(full_name: Any, table_type: Any = None, commit_dir: str | None = None) -> NameRow:
    """The name of a table registered through ``/api/v1/tables`` (``catalog.schema.table``): a DELTA table whose
    schema the catalog reads from its log; EXTERNAL unless ``table_type`` says MANAGED, which only a
    catalogManaged table is (its commits staged in ``_staged_commits``, so that Unity Catalog clients may commit
    to it by name too). Raises InvalidArgumentError."""
    if not isinstance(full_name, str):
        raise InvalidArgumentError("name must be a string of the form catalog.schema.table")
    catalog, schema, name = split_full_name(full_name, 3)
    table_type = check_table_type(EXTERNAL if table_type is None else table_type, "tableType")
    if table_type == MANAGED and commit_dir != STAGED_COMMITS_DIR:
        raise InvalidArgumentError(f"tableType MANAGED is for catalogManaged tables: commitDir must be "
                                   f"{STAGED_COMMITS_DIR}")
    return new_name(catalog, schema, name, table_type)


#: How many table ids a process remembers as MANAGED (``Catalog.check_managed``).
KNOWN_MANAGED = 100_000


class Catalog:
    """Names over the tables' registry. Raises the CommitOwnerError family (NotFoundError, AlreadyExistsError,
    TableNotFoundError, InvalidArgumentError, ...)."""

    def __init__(self, registry: Registry, names: NameStore) -> None:
        self.registry = registry
        self.names = names
        self._managed: OrderedDict[str, None] = OrderedDict()  # tables seen MANAGED (check_managed)

    # catalogs and schemas

    async def create_catalog(self, name: str, comment: str | None, properties: dict[str, str]) -> CatalogRow:
        ts = now_ms()
        return await self.names.create_catalog(CatalogRow(name=check_name(name, "name"), id=str(uuid.uuid4()),
                                                          comment=comment, properties=properties, created_at=ts,
                                                          updated_at=ts))

    async def list_catalogs(self, after: str | None, limit: int) -> list[CatalogRow]:
        return await self.names.list_catalogs(after, limit)

    async def get_catalog(self, name: str) -> CatalogRow:
        return await self.names.get_catalog(check_name(name, "catalog name"))

    async def delete_catalog(self, name: str) -> None:
        await self.names.delete_catalog(check_name(name, "catalog name"))

    async def create_schema(self, catalog: str, name: str, comment: str | None,
                            properties: dict[str, str]) -> SchemaRow:
        ts = now_ms()
        return await self.names.create_schema(SchemaRow(
            catalog_name=check_name(catalog, "catalog_name"), name=check_name(name, "name"), id=str(uuid.uuid4()),
            comment=comment, properties=properties, created_at=ts, updated_at=ts))

    async def list_schemas(self, catalog: str, after: str | None, limit: int) -> list[SchemaRow]:
        return await self.names.list_schemas(check_name(catalog, "catalog_name"), after, limit)

    async def get_schema(self, catalog: str, name: str) -> SchemaRow:
        return await self.names.get_schema(catalog, name)

    async def delete_schema(self, catalog: str, name: str) -> None:
        await self.names.delete_schema(catalog, name)

    # tables

    def managed_root(self) -> str:
        return self.registry.managed_root()

    def managed_scope(self) -> str:
        """What a token must hold a scope over to have a table made under the managed root (a staging
        reservation, a MANAGED table created without a location): a location below the root, which a scope of
        the root or of any prefix above it covers. Raises LocationNotAllowedError (no allowed root holds it)."""
        return self.managed_root() + "/x"

    async def reserve(self, catalog: str, schema: str, name: str) -> StagingRow:
        """A staging reservation: a new table id and its location under the managed root, for a name not
        taken yet. Raises AlreadyExistsError, NotFoundError (no such schema)."""
        table_id = str(uuid.uuid4())
        row = StagingRow(id=table_id, catalog_name=check_name(catalog, "catalog_name"),
                         schema_name=check_name(schema, "schema_name"), name=check_name(name, "name"),
                         location=f"{self.managed_root()}/{table_id}", created_at=now_ms())
        return await self.names.create_staging(row)

    async def staging(self, table_id: str) -> StagingRow:
        """The staging reservation ``table_id``. Raises TableNotFoundError."""
        try:
            return await self.names.get_staging(table_id)
        except NotFoundError as e:
            raise TableNotFoundError(e.message) from None

    async def create_table(self, named: NameRow, location: str) -> tuple[TableRow, NameRow]:
        """Name and register a table: MANAGED at the location of its staging reservation (the writer writes
        version 0 itself), or EXTERNAL at an allowed location holding a Delta table (taken over at its
        newest version). The reply's columns are the log's when ``named`` has none."""
        check_table_type(named.table_type)
        loc = normalize_location(location)
        if named.table_type == MANAGED:
            staging = await self.names.find_staging(loc)
            if (staging.catalog_name, staging.schema_name, staging.name) != (
                    named.catalog_name, named.schema_name, named.name):
                raise InvalidArgumentError(
                    f"the staging table at {loc} was made for {staging.catalog_name}.{staging.schema_name}."
                    f"{staging.name}, not {named.full_name}")
            check_reserved(named.properties, held_properties(staging.id, MANAGED))
            table = await self.registry.register_staged_create(loc, staging.id, named)
        else:
            check_reserved(named.properties, held_properties(None, named.table_type))  # (its id is given later)
            table = await self.registry.register_existing(loc, named)
        return table, await self._with_log_columns(table, dataclasses.replace(named, table_id=table.table_id))

    async def create_managed(self, named: NameRow) -> tuple[TableRow, NameRow]:
        """Name and register a MANAGED table at a location allocated under the managed root (what Unity Catalog
        does for a create without ``storage_location``): a staging reservation used up at once. Its writer
        writes version 0 there. Raises AlreadyExistsError, NotFoundError (no such schema)."""
        check_reserved(named.properties, held_properties(None, MANAGED))  # before the reservation is made
        staging = await self.reserve(named.catalog_name, named.schema_name, named.name)
        return await self.create_table(named, staging.location)

    async def named(self, catalog: str, schema: str, name: str, *,
                    visible: Callable[[str], bool] | None = None) -> tuple[TableRow, NameRow]:
        """The table of a name. ``visible``: whether the caller may see a table at a location (None: every
        table); a table it may not see is answered exactly as a name that names no table, so that a name cannot
        be confirmed by guessing. Raises TableNotFoundError."""
        try:
            table, row = await self.names.get_named(catalog, schema, name)
            if visible is not None and not visible(table.location):
                raise missing_table(catalog, schema, name)
        except NotFoundError as e:
            raise TableNotFoundError(e.message) from None
        return table, await self._with_log_columns(table, row)

    async def list_tables(self, catalog: str, schema: str, after: str | None,
                          limit: int) -> list[tuple[TableRow, NameRow]]:
        rows = await self.names.list_named(check_name(catalog, "catalog_name"), check_name(schema, "schema_name"),
                                           after, limit)
        return [(t, await self._with_log_columns(t, n)) for t, n in rows]

    async def _with_log_columns(self, table: TableRow, name: NameRow) -> NameRow:
        """``name``, with the columns (and, when its creator sent none, the properties) of the table's log when
        its creator sent no columns; recorded, so the log is read once per table (decision 40). A log without
        a commit yet (a staged create before its version 0) is asked again next time."""
        if name.columns:
            return name
        try:
            metadata = await self.registry.log_metadata(table)
            if metadata is None:
                return name
            columns = columns_of_metadata(metadata)
        except CommitOwnerError as e:
            log.warning("table %s: its columns could not be read from its log: %s", table.table_id, e.message)
            return name
        properties = None if name.properties else properties_of_metadata(metadata, table.table_id)
        await self.names.fill_columns(table.table_id, name.updated_at, columns, properties)
        return dataclasses.replace(name, columns=columns,
                                   properties=name.properties if properties is None else properties)

    async def name_of(self, table_id: str) -> NameRow | None:
        return await self.names.name_of(table_id)

    async def managed(self, table: TableRow, name: NameRow | None = None) -> NameRow:
        """The name of ``table`` (read unless given) when it is a MANAGED table of this catalog, the only kind
        that takes writer-staged commits by name. Raises InvalidArgumentError."""
        name = name if name is not None else await self.names.name_of(table.table_id)
        if name is None or name.table_type != MANAGED or table.commit_dir != STAGED_COMMITS_DIR:
            raise InvalidArgumentError(f"table {table.table_id} is not a MANAGED table of this catalog: only "
                                       "those take commits here (others commit through /api/v1)")
        return name

    async def check_managed(self, table: TableRow) -> None:
        """:meth:`managed` when the caller needs no name row: read once per table and process. Being MANAGED
        never changes while the table lives: the type is set when the name is created and never updated, and
        the name row goes only with the table (a drop marks ``dropped_at`` in the same transaction; forget
        deletes the table row), so ``table``, read fresh and live, is all the later checks need. Raises
        InvalidArgumentError."""
        if table.table_id in self._managed and table.dropped_at is None and table.commit_dir == STAGED_COMMITS_DIR:
            return
        await self.managed(table)
        self._managed[table.table_id] = None
        if len(self._managed) > KNOWN_MANAGED:
            self._managed.popitem(last=False)

    async def rename(self, table: TableRow, new: str) -> None:
        """Rename a table within its schema. Raises AlreadyExistsError, TableNotFoundError."""
        if not await self.names.rename(table.table_id, check_name(new, "new name")):
            raise TableNotFoundError(f"table {table.table_id} has no name")

    async def drop(self, table: TableRow) -> TableRow:
        """DROP TABLE, MANAGED or EXTERNAL alike: every ratified commit is published first (or the drop is
        refused, nothing changed), then the name is free, the table takes no commit and is out of the backlog,
        and its row stays marked dropped (``dropped_at``, status DROPPED) for the ops commands. No file is
        deleted (decision 'DROP TABLE'). Raises TableNotFoundError and the errors of ``Registry.drop_table``."""
        return await self.registry.drop_table(table.table_id, table.name)


__all__ = ["RESERVED", "Catalog", "check_comment", "check_name", "check_properties", "check_reserved",
           "check_table_type", "held_properties", "owned_name", "new_name", "refuse_uniform", "split_full_name"]
