"""The Unity Catalog facade: names, staging tables and catalog-managed commits over the commit service.

Nothing here ratifies or writes a log: tables are registered with ``CommitService.register_table``,
commits go through ``CommitService.commit`` (the writer staged the file; the owner reads it, checks it
like an ``/api/v1`` commit body and records its checksum) and backfill through the same backfiller.
Replies use Unity Catalog OSS 0.6's field names (docs/unity-catalog.md).
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import uuid
from typing import Any

from client.contract.delta_log import TABLE_ID_PROPERTY
from client.contract.errors import (
    CommitOwnerError,
    InvalidArgumentError,
    InvalidCommitError,
    LocationNotAllowedError,
    NotFoundError,
    OwnershipPublishedError,
    PayloadTooLargeError,
    TableNotFoundError,
    UnavailableError,
)
from client.contract.layout import STAGED_COMMITS_DIR, normalize_location, parse_staged_file, staged_file
from coordinator.security.roots import check_allowed, parse_root

from .lifecycle import newest_version
from .service import CommitService, int_field, parse_uuid
from .store import TableRow, now_ms
from .store.names import NameStore
from .store.rows import CatalogRow, CommitRow, NameRow, SchemaRow, StagingRow

log = logging.getLogger("commit_owner.unity")

UC_COMMIT_DIR = STAGED_COMMITS_DIR
PAGE_MAX = 1000
COLUMN_KEYS = frozenset({"name", "type_text", "type_json", "type_name", "type_precision", "type_scale",
                         "type_interval_type", "position", "comment", "nullable", "partition_index"})


# -- input checks ------------------------------------------------------------------------------------


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


def check_properties(value: Any, what: str = "properties") -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidArgumentError(f"{what} must be an object of string values")
    return dict(value)


def check_comment(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentError("comment must be a string")
    return value


def check_columns(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidArgumentError("columns must be a list of ColumnInfo objects")
    out = []
    for i, col in enumerate(value):
        if not isinstance(col, dict) or not isinstance(col.get("name"), str) or not col["name"]:
            raise InvalidArgumentError(f"columns[{i}] must be an object with a name")
        unknown = sorted(set(col) - COLUMN_KEYS)
        if unknown:
            raise InvalidArgumentError(f"columns[{i}] has unknown field(s): {', '.join(unknown[:5])}")
        out.append({**col, "position": col.get("position", i), "nullable": col.get("nullable", True)})
    return out


def v1_name(full_name: Any) -> NameRow:
    """The name of a table registered through ``/api/v1/tables`` (``catalog.schema.table``): an EXTERNAL
    DELTA table to the facade, whose schema lives in its log only."""
    if not isinstance(full_name, str):
        raise InvalidArgumentError("name must be a string of the form catalog.schema.table")
    catalog, schema, name = split_full_name(full_name, 3)
    ts = now_ms()
    return NameRow(table_id="", catalog_name=catalog, schema_name=schema, name=name, table_type="EXTERNAL",
                   data_source_format="DELTA", comment=None, columns=[], properties={}, created_at=ts,
                   updated_at=ts)


# -- paging --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Page:
    after: str | None
    limit: int

    @classmethod
    def parse(cls, max_results: str | None, page_token: str | None) -> Page:
        """``max_results``: absent or 0 = the server's page size; negative is refused."""
        limit = PAGE_MAX
        if max_results not in (None, ""):
            try:
                n = int(max_results)  # type: ignore[arg-type]
            except ValueError:
                raise InvalidArgumentError("max_results must be an integer") from None
            if n < 0:
                raise InvalidArgumentError("max_results must be >= 0")
            limit = min(n, PAGE_MAX) if n > 0 else PAGE_MAX
        after = None
        if page_token:
            try:
                after = base64.urlsafe_b64decode(page_token.encode("ascii") + b"==").decode("utf-8")
            except (ValueError, UnicodeError):
                raise InvalidArgumentError("page_token is not a token this server gave out") from None
        return cls(after, limit)

    def next_token(self, names: list[str]) -> str | None:
        if len(names) < self.limit or not names:
            return None
        return base64.urlsafe_b64encode(names[-1].encode("utf-8")).decode("ascii").rstrip("=")


# -- replies -------------------------------------------------------------------------------------------


def catalog_json(c: CatalogRow) -> dict[str, Any]:
    return {"name": c.name, "id": c.id, "comment": c.comment, "properties": c.properties,
            "created_at": c.created_at, "updated_at": c.updated_at}


def schema_json(s: SchemaRow) -> dict[str, Any]:
    return {"name": s.name, "catalog_name": s.catalog_name, "full_name": f"{s.catalog_name}.{s.name}",
            "schema_id": s.id, "comment": s.comment, "properties": s.properties,
            "created_at": s.created_at, "updated_at": s.updated_at}


def table_json(t: TableRow, n: NameRow) -> dict[str, Any]:
    return {
        "name": n.name, "catalog_name": n.catalog_name, "schema_name": n.schema_name,
        "table_type": n.table_type, "data_source_format": n.data_source_format,
        "columns": n.columns, "storage_location": t.location, "comment": n.comment,
        "properties": {**n.properties, TABLE_ID_PROPERTY: t.table_id},
        "created_at": n.created_at, "updated_at": max(n.updated_at, t.updated_at), "table_id": t.table_id,
    }


def commit_json(c: CommitRow) -> dict[str, Any]:
    return {"version": c.version, "timestamp": c.commit_timestamp, "file_name": c.file_name,
            "file_size": c.file_size, "file_modification_timestamp": c.file_modification_time}


# -- the facade ------------------------------------------------------------------------------------------


class UnityCatalog:
    def __init__(self, service: CommitService) -> None:
        self.service = service
        self.store = service.store
        self.names = NameStore(service.store)
        self._managed: str | None = None

    # catalogs and schemas

    async def create_catalog(self, body: dict) -> dict[str, Any]:
        ts = now_ms()
        row = CatalogRow(name=check_name(body.get("name"), "name"), id=str(uuid.uuid4()),
                         comment=check_comment(body.get("comment")),
                         properties=check_properties(body.get("properties")), created_at=ts, updated_at=ts)
        return catalog_json(await self.names.create_catalog(row))

    async def list_catalogs(self, page: Page) -> dict[str, Any]:
        rows = await self.names.list_catalogs(page.after, page.limit)
        return _paged("catalogs", [catalog_json(r) for r in rows], page.next_token([r.name for r in rows]))

    async def get_catalog(self, name: str) -> dict[str, Any]:
        return catalog_json(await self.names.get_catalog(check_name(name, "catalog name")))

    async def delete_catalog(self, name: str) -> None:
        await self.names.delete_catalog(check_name(name, "catalog name"))

    async def create_schema(self, body: dict) -> dict[str, Any]:
        ts = now_ms()
        row = SchemaRow(catalog_name=check_name(body.get("catalog_name"), "catalog_name"),
                        name=check_name(body.get("name"), "name"), id=str(uuid.uuid4()),
                        comment=check_comment(body.get("comment")),
                        properties=check_properties(body.get("properties")), created_at=ts, updated_at=ts)
        return schema_json(await self.names.create_schema(row))

    async def list_schemas(self, catalog: str | None, page: Page) -> dict[str, Any]:
        rows = await self.names.list_schemas(check_name(catalog, "catalog_name"), page.after, page.limit)
        return _paged("schemas", [schema_json(r) for r in rows], page.next_token([r.name for r in rows]))

    async def get_schema(self, full_name: str) -> dict[str, Any]:
        catalog, name = split_full_name(full_name, 2)
        return schema_json(await self.names.get_schema(catalog, name))

    async def delete_schema(self, full_name: str) -> None:
        catalog, name = split_full_name(full_name, 2)
        await self.names.delete_schema(catalog, name)

    # tables

    def managed_root(self) -> str:
        """The canonical managed location; raises LocationNotAllowedError when no allowed root holds it."""
        if self._managed is None:
            root = parse_root(self.service.settings.managed_location).uri
            try:
                check_allowed(root + "/x", self.service.roots)
            except LocationNotAllowedError:
                raise LocationNotAllowedError(
                    f"the managed location {root} lies outside every allowed root: set --managed-location "
                    "under an --allow-location root") from None
            self._managed = root
        return self._managed

    async def create_staging_table(self, body: dict) -> dict[str, Any]:
        catalog = check_name(body.get("catalog_name"), "catalog_name")
        schema = check_name(body.get("schema_name"), "schema_name")
        name = check_name(body.get("name"), "name")
        table_id = str(uuid.uuid4())
        location = f"{self.managed_root()}/{table_id}"
        row = StagingRow(id=table_id, catalog_name=catalog, schema_name=schema, name=name, location=location,
                         created_at=now_ms())
        await self.names.create_staging(row)
        return {"id": table_id, "name": name, "catalog_name": catalog, "schema_name": schema,
                "staging_location": location}

    async def create_table(self, body: dict) -> dict[str, Any]:
        """MANAGED + DELTA at a staging location, or EXTERNAL + DELTA at an allowed storage location."""
        catalog = check_name(body.get("catalog_name"), "catalog_name")
        schema = check_name(body.get("schema_name"), "schema_name")
        name = check_name(body.get("name"), "name")
        table_type = body.get("table_type")
        if table_type not in ("MANAGED", "EXTERNAL"):
            raise InvalidArgumentError("table_type must be MANAGED or EXTERNAL (views are not supported)")
        if body.get("data_source_format") != "DELTA":
            raise InvalidArgumentError("data_source_format must be DELTA")
        if body.get("view_definition") is not None or body.get("view_dependencies") is not None:
            raise InvalidArgumentError("view_definition and view_dependencies are only for views")
        location = body.get("storage_location")
        if not isinstance(location, str) or not location:
            raise InvalidArgumentError("storage_location is required and must be a string")
        loc = normalize_location(location)
        properties = check_properties(body.get("properties"))
        ts = now_ms()
        named = NameRow(table_id="", catalog_name=catalog, schema_name=schema, name=name, table_type=table_type,
                        data_source_format="DELTA", comment=check_comment(body.get("comment")),
                        columns=check_columns(body.get("columns")), properties=properties,
                        created_at=ts, updated_at=ts)
        if table_type == "MANAGED":
            staging = await self.names.find_staging(loc)
            if (staging.catalog_name, staging.schema_name, staging.name) != (catalog, schema, name):
                raise InvalidArgumentError(
                    f"the staging table at {loc} was made for {staging.catalog_name}.{staging.schema_name}."
                    f"{staging.name}, not {catalog}.{schema}.{name}")
            given = properties.get(TABLE_ID_PROPERTY)
            if given is not None and given != staging.id:
                raise InvalidArgumentError(f"properties[{TABLE_ID_PROPERTY}] {given[:40]!r} is not the staging "
                                           f"table's id {staging.id}")
            # The writer writes version 0 itself, before this call (delta-spark, UC's own tests) or right
            # after it (Sail 0.7); either way the owner ratifies from version 1 on.
            newest, _ = await newest_version(self.service.storage.for_uri(loc), loc)
            table = await self.service.register_table(loc, -1, UC_COMMIT_DIR, name=named, table_id=staging.id,
                                                      log_version=-1 if newest < 0 else 0, staging_id=staging.id)
        else:
            check_allowed(loc, self.service.roots)  # before the log is even listed
            newest, _ = await newest_version(self.service.storage.for_uri(loc), loc)
            table = await self.service.register_table(loc, newest, None, name=named)
        return table_json(table, dataclasses.replace(named, table_id=table.table_id))

    async def named_table(self, full_name: str) -> tuple[TableRow, NameRow]:
        catalog, schema, name = split_full_name(full_name, 3)
        try:
            return await self.names.get_named(catalog, schema, name)
        except NotFoundError as e:
            raise TableNotFoundError(e.message) from None

    async def list_tables(self, catalog: str | None, schema: str | None, page: Page,
                          visible: Any = None) -> dict[str, Any]:
        rows = await self.names.list_named(check_name(catalog, "catalog_name"), check_name(schema, "schema_name"),
                                           page.after, page.limit)
        shown = [table_json(t, n) for t, n in rows if visible is None or visible(t.location)]
        return _paged("tables", shown, page.next_token([n.name for _, n in rows]))

    async def delete_table(self, table: TableRow) -> None:
        """Forget the name; forget the ownership registration too when nothing was ratified. Data stays."""
        await self.names.drop_name(table.table_id)
        try:
            await self.service.forget_table(table.table_id)
        except (OwnershipPublishedError, TableNotFoundError):
            pass  # owned or already gone: the ownership row (and its audit trail) stays, unnamed
        except CommitOwnerError as e:
            log.warning("table %s lost its name; its registration stays: %s", table.table_id, e.message)

    # commits

    async def table_for(self, body: dict) -> TableRow:
        """The table a commits request names, after checking ``table_uri`` against its location."""
        raw_id = body.get("table_id")
        if not isinstance(raw_id, str):
            raise InvalidArgumentError("table_id is required and must be a string")
        table_uri = body.get("table_uri")
        if not isinstance(table_uri, str):
            raise InvalidArgumentError("table_uri is required and must be a string")
        table = await self.store.get_table(parse_uuid(raw_id, "table_id"))
        if normalize_location(table_uri) != table.location:
            raise InvalidArgumentError(f"table_uri {table_uri[:200]!r} is not the registered location of table "
                                       f"{table.table_id}")
        return table

    async def commit(self, table: TableRow, body: dict) -> dict[str, Any]:
        info = body.get("commit_info")
        backfilled = int_field(body, "latest_backfilled_version", minimum=0)
        if info is None and backfilled is None:
            raise InvalidArgumentError("send commit_info, latest_backfilled_version or both")
        if info is not None and not isinstance(info, dict):
            raise InvalidArgumentError("commit_info must be an object")
        if backfilled is not None:
            # First what the writer published (that frees the backlog), then its new commit.
            await self._backfilled(table.table_id, backfilled, quiet=info is not None)
        if info is not None:
            metadata = _metadata(body.get("metadata"))  # checked before anything is ratified
            await self._ratify(table, info)
            if metadata is not None:
                await self.names.update_metadata(table.table_id, **metadata)
        return {}

    async def _ratify(self, table: TableRow, info: dict) -> None:
        name = await self.names.name_of(table.table_id)
        if name is None or name.table_type != "MANAGED" or table.commit_dir != UC_COMMIT_DIR:
            raise InvalidArgumentError(f"table {table.table_id} is not a MANAGED table of this catalog: only "
                                       "those take commits here (others commit through /api/v1)")
        version = int_field(info, "version", required=True)
        size = int(int_field(info, "file_size", required=True, minimum=0) or 0)
        for f in ("timestamp", "file_modification_timestamp"):
            int_field(info, f, required=True)
        file_name = info.get("file_name")
        if not isinstance(file_name, str):
            raise InvalidArgumentError("commit_info.file_name is required and must be a string")
        staged = parse_staged_file(file_name)
        if staged is None:
            raise InvalidArgumentError(f"commit_info.file_name {file_name[:80]!r} is not one path segment of the "
                                       "form <version:020>.<uuid>.json")
        if staged.version != version:
            raise InvalidArgumentError(f"commit_info.file_name names version {staged.version}, not {version}")
        uid = staged.uid
        if parse_uuid(uid, "the uuid of commit_info.file_name") != uid:
            raise InvalidArgumentError("the uuid of commit_info.file_name must be written in lower case")
        if version <= 0:
            raise InvalidCommitError(f"Commit version {version} must go via filesystem." if version == 0 else
                                     f"Commit version {version} is not valid: versions start at 0.")
        path = staged_file(table.location, UC_COMMIT_DIR, file_name)
        storage = self.service.storage.for_uri(path)
        limit = self.service.settings.max_body_bytes
        if size > limit:
            raise PayloadTooLargeError(f"commit_info.file_size {size} is above the largest accepted commit "
                                       f"({limit} bytes, --max-body-bytes)")
        try:
            stat = await storage.info(path)
            data = await storage.read(path) if stat.size == size else b""
        except FileNotFoundError:
            prior = await self.store.get_commit(table.table_id, version)
            if prior is not None and prior.file_name == file_name:
                return  # the retry of a commit already ratified (its staged file was cleaned up since)
            raise InvalidCommitError(f"the staged commit file _delta_log/{UC_COMMIT_DIR}/{file_name} does not "
                                     "exist: write it before committing") from None
        except OSError as e:
            raise UnavailableError(f"log storage unavailable while reading the staged file: {type(e).__name__}") from e
        if stat.size != size or len(data) != size:
            raise InvalidCommitError(f"the staged commit file {file_name} holds {max(stat.size, len(data))} "
                                     f"bytes, not file_size {size}")
        await self.service.commit(table.table_id, version, data, uid, staged=dataclasses.replace(stat, size=len(data)))

    async def _backfilled(self, table_id: str, version: int, *, quiet: bool) -> None:
        """The writer published every version <= ``version``: check (identical bytes) and record it."""
        table = await self.store.get_table(table_id)
        if version > table.latest_version:
            raise InvalidArgumentError(f"latest_backfilled_version {version} is beyond the latest committed "
                                       f"version {table.latest_version}")
        backfiller = self.service.backfiller
        if backfiller is None or version <= table.latest_backfilled_version:
            return
        try:
            await backfiller.backfill(table_id, version, wait_seconds=5.0)
        except CommitOwnerError as e:
            if not quiet:
                raise
            log.warning("table %s: recording the writer's backfill through %d failed: %s", table_id, version,
                        e.message)

    async def get_commits(self, table: TableRow, body: dict) -> dict[str, Any]:
        start = int_field(body, "start_version", required=True, minimum=0)
        end = int_field(body, "end_version", minimum=0)
        if end is not None and start is not None and start > end:
            raise InvalidArgumentError(f"start_version {start} is greater than end_version {end}")
        # Every ratified commit in the range, published or not: Sail 0.7 looks a version the catalog does not
        # list up in _delta_log/_staged_commits/ and gives up when a lost race left a second file there.
        table, rows = await self.store.get_commits(table.table_id, start, end, backfilled=True)
        return {"commits": [commit_json(r) for r in rows], "latest_table_version": table.latest_version}


def _metadata(metadata: Any) -> dict[str, Any] | None:
    """The schema, properties and comment a writer reports with a commit (advisory: the log rules)."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise InvalidArgumentError("metadata must be an object")
    schema, props = metadata.get("schema"), metadata.get("properties")
    return {
        "columns": check_columns(schema.get("columns")) if isinstance(schema, dict) else None,
        "properties": check_properties(props.get("properties"), "metadata.properties")
        if isinstance(props, dict) else None,
        "comment": check_comment(metadata.get("description")),
    }


def _paged(key: str, items: list[dict[str, Any]], token: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {key: items}
    if token is not None:
        out["next_page_token"] = token
    return out
