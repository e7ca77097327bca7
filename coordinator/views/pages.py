"""Read-only views of the owner for people: tables by name or location, a table's identity, state and commit
history, and commit activity over time. The browser UI (``api/ui``) shapes what this returns; it never reads
the store or storage itself.

Beside the commit service and the catalog, never in the commit path: the store decides what a page holds
(``store/browse.py``, keyset-paged, the permission filter in SQL), and the log is read only for one table's
page, at most ``HISTORY_FILES_READ`` commit files at a time. ``scope``: the location prefixes the viewer may
read (None: everything).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from client.contract.delta_log import parse_actions
from client.contract.errors import CommitOwnerError, NotFoundError, UnavailableError
from client.contract.layout import (
    LAST_CHECKPOINT,
    delta_file,
    log_dir,
    normalize_prefix,
    parse_checkpoint_file,
    staged_file,
)
from coordinator.core.columns import columns_of_metadata
from coordinator.core.log_metadata import newest_actions
from coordinator.core.reads import Reads
from coordinator.storage import StorageRouter
from coordinator.store import CommitRow, TableRow
from coordinator.store.browse import BrowseStore, Minute
from coordinator.store.maintenance import MaintenanceLog, MaintenanceRun
from coordinator.store.names import NameStore, missing_catalog, missing_schema
from coordinator.store.rows import NameRow
from coordinator.views.summary import CommitSummary, summarize

#: Commit files read at once for one page of history (a page is at most ``HISTORY_PAGE`` commits).
HISTORY_FILES_READ = 8
HISTORY_PAGE = 25
MAINTENANCE_SHOWN = 10  # maintenance steps on a table's page
#: Largest commit file whose actions are read for a history page or a commit's page.
MAX_COMMIT_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class HistoryEntry:
    row: CommitRow
    published: bool
    summary: CommitSummary | None  # None: the commit file could not be read (``problem`` says why)
    problem: str | None = None


@dataclass(frozen=True)
class Identity:
    """What a table is, from its name row and its log's newest ``metaData`` / ``protocol``."""

    name: NameRow | None
    columns: list[dict[str, Any]] = field(default_factory=list)
    partition_columns: list[str] = field(default_factory=list)
    protocol: dict[str, Any] | None = None
    problem: str | None = None  # the log could not be read


@dataclass(frozen=True)
class Checkpoints:
    versions: list[int]  # complete or not, newest first
    last_checkpoint: int | None  # the version ``_last_checkpoint`` names


@dataclass(frozen=True)
class Activity:
    since_ms: int
    minutes: list[Minute]


def location_prefix(text: str) -> str | None:
    """``text`` as a location prefix to search by (``s3://b/x``, ``/tmp/t``, ``file:///tmp/t``; the filesystem
    root or a bare ``s3://`` for every table there), else None."""
    if "://" not in text and not text.startswith("/"):
        return None
    bare = text.rstrip("/")
    if bare in ("", "file:"):
        return "file:///"  # (no table's location is the root itself: every local table)
    if bare.endswith(":") and bare[:-1].isalnum():
        return bare + "//"  # a scheme alone: every table it holds
    try:
        return normalize_prefix(text)
    except CommitOwnerError:
        return None


class Views:
    def __init__(self, reads: Reads, names: NameStore, browse: BrowseStore, storage: StorageRouter,
                 maintenance: MaintenanceLog) -> None:
        self.reads = reads  # a table's registration
        self.names = names
        self.browse = browse
        self.storage = storage  # read only: a table's log
        self.maintenance = maintenance  # what `commit-owner maintain` / `optimize` / `vacuum` did

    # -- browsing ----------------------------------------------------------------------------------------

    async def catalogs(self, scope: Sequence[str] | None) -> tuple[list[tuple[str, str | None, int]], int]:
        """``(name, comment, tables the viewer may read)`` of the first 1,000 catalogs, and the tables without a
        name. A catalog holding no table the viewer may read is shown only to a viewer who sees everything."""
        counts, unnamed = await self.browse.catalog_counts(scope)
        rows = await self.names.list_catalogs(None, 1000)
        return [(c.name, c.comment, counts.get(c.name, 0)) for c in rows
                if scope is None or counts.get(c.name)], unnamed

    async def schemas(self, catalog: str, scope: Sequence[str] | None) -> list[tuple[str, str | None, int]]:
        """``(name, comment, tables)`` of the catalog's first 1,000 schemas. A catalog the lists hide from the
        viewer (it holds no table the viewer may read) is answered as one that does not exist. Raises
        NotFoundError."""
        counts = await self.browse.schema_counts(catalog, scope)
        rows = await self.names.list_schemas(catalog, None, 1000)
        if scope is not None and not counts:
            raise missing_catalog(catalog)
        return [(s.name, s.comment, counts.get(s.name, 0)) for s in rows if scope is None or counts.get(s.name)]

    async def schema_tables(self, catalog: str, schema: str, after: str | None, limit: int,
                            scope: Sequence[str] | None) -> list[TableRow]:
        """A schema the lists hide from the viewer is answered as one that does not exist. Raises
        NotFoundError (no such schema)."""
        await self.names.get_schema(catalog, schema)
        if scope is not None and not (await self.browse.schema_counts(catalog, scope)).get(schema):
            raise missing_schema(catalog, schema)
        return await self.browse.named_page(catalog, schema, after, limit, scope)

    async def search(self, query: str, after: str | None, limit: int, scope: Sequence[str] | None, *,
                     unnamed: bool = False) -> list[TableRow]:
        """Tables by location: every one, the unnamed ones, or those matching ``query`` (a location prefix when it
        looks like a location, else the start of a name)."""
        query = query.strip()
        if not query:
            return await self.browse.located_page(after, limit, scope, unnamed=unnamed)
        prefix = location_prefix(query)
        if prefix is not None:
            return await self.browse.located_page(after, limit, scope, location_prefix=prefix, unnamed=unnamed)
        return await self.browse.located_page(after, limit, scope, name_prefix=query, unnamed=unnamed)

    async def most_behind(self, limit: int, scope: Sequence[str] | None) -> list[TableRow]:
        return await self.browse.most_behind(limit, scope)

    # -- one table ---------------------------------------------------------------------------------------

    async def table(self, table_id: str) -> TableRow:
        """Raises TableNotFoundError."""
        return await self.reads.table(table_id)

    async def identity(self, table: TableRow) -> Identity:
        """The table's name row and, from its log, its columns and protocol (never raises for the log)."""
        name = await self.names.name_of(table.table_id)
        try:
            found = await newest_actions(self.storage.for_uri(table.location), table.location,
                                         ("metaData", "protocol"))
            metadata = found.get("metaData")
            columns = columns_of_metadata(metadata) if metadata else (name.columns if name else [])
            parts = metadata.get("partitionColumns") if metadata else None
            return Identity(name, columns, [p for p in parts or [] if isinstance(p, str)], found.get("protocol"))
        except CommitOwnerError as e:
            return Identity(name, name.columns if name else [], [], None, e.message)

    async def history(self, table: TableRow, before: int | None, limit: int = HISTORY_PAGE) -> list[HistoryEntry]:
        """The table's commits newest first (below ``before``), each with the summary of its actions."""
        rows = await self.browse.commits_page(table.table_id, before, min(limit, HISTORY_PAGE))
        gate = asyncio.Semaphore(HISTORY_FILES_READ)

        async def one(row: CommitRow) -> HistoryEntry:
            async with gate:
                try:
                    actions, published = await self._actions(table, row)
                except CommitOwnerError as e:
                    return HistoryEntry(row, row.backfilled_at is not None, None, e.message)
            return HistoryEntry(row, published, summarize(actions))

        return list(await asyncio.gather(*(one(r) for r in rows)))

    async def commit(self, table: TableRow, version: int) -> tuple[HistoryEntry, list[dict[str, Any]]]:
        """One ratified commit and its actions. Raises NotFoundError, UnavailableError."""
        rows = await self.browse.commits_page(table.table_id, version + 1, 1)
        if not rows or rows[0].version != version:
            raise NotFoundError(f"table {table.table_id} has no commit {version} ratified by this owner")
        actions, published = await self._actions(table, rows[0])
        return HistoryEntry(rows[0], published, summarize(actions)), actions

    async def _actions(self, table: TableRow, row: CommitRow) -> tuple[list[dict[str, Any]], bool]:
        """A commit's actions, from the bytes its row keeps while unpublished (decision 43: the row is the staged
        file's write-ahead log; a page never writes the file), else from its published ``<v>.json`` once
        backfilled (its staged file may be cleaned up by then), else from its staged file; and whether
        ``<v>.json`` was the one read."""
        if row.body is not None:
            try:
                return parse_actions(row.body), False
            except ValueError as e:
                raise UnavailableError(f"commit of version {row.version} unreadable: {type(e).__name__}") from e
        staged = staged_file(table.location, table.commit_dir, row.file_name)
        published = delta_file(table.location, row.version)
        order = [(published, True), (staged, False)] if row.backfilled_at is not None else [(staged, False), (published, True)]
        storage = self.storage.for_uri(table.location)
        for path, is_published in order:
            try:
                info = await storage.info(path)
                if info.size > MAX_COMMIT_FILE_BYTES:
                    raise UnavailableError(f"commit file of version {row.version} is {info.size} bytes: too large to show")
                return parse_actions(await storage.read(path)), is_published
            except FileNotFoundError:
                continue
            except ValueError as e:  # not JSON lines (storage failures are UnavailableError already)
                raise UnavailableError(f"commit file of version {row.version} unreadable: {type(e).__name__}") from e
        raise UnavailableError(f"neither the staged nor the published file of version {row.version} exists any more "
                               "(log cleanup)")

    async def maintenance_runs(self, table: TableRow, limit: int = MAINTENANCE_SHOWN) -> list[MaintenanceRun]:
        """The table's newest maintenance steps, newest first."""
        return await self.maintenance.recent(table.table_id, limit)

    async def checkpoints(self, table: TableRow) -> Checkpoints:
        """The checkpoints in the table's log (newest first) and the version ``_last_checkpoint`` names.
        Raises UnavailableError."""
        storage = self.storage.for_uri(table.location)
        last = None
        try:
            names = await storage.list_names(log_dir(table.location))
            if LAST_CHECKPOINT in names:
                hint = orjson.loads(await storage.read(f"{log_dir(table.location)}/{LAST_CHECKPOINT}"))
                last = hint.get("version") if isinstance(hint, dict) and isinstance(hint.get("version"), int) else None
        except FileNotFoundError:
            names = []
        except ValueError as e:  # _last_checkpoint is not JSON (storage failures are UnavailableError already)
            raise UnavailableError(f"_last_checkpoint of {table.location} unreadable: {type(e).__name__}") from e
        versions = sorted({cp[0] for cp in map(parse_checkpoint_file, names) if cp is not None}, reverse=True)
        return Checkpoints(versions, last)

    # -- activity ----------------------------------------------------------------------------------------

    async def activity(self, hours: float, scope: Sequence[str] | None, table_id: str | None = None) -> Activity:
        """Commits per minute and publication lag over the last ``hours``, of one table or of the owner."""
        since = (int(time.time() // 60) - int(hours * 60) + 1) * 60_000
        return Activity(since, await self.browse.minutes(since, scope, table_id))


__all__ = ["Activity", "Checkpoints", "HISTORY_PAGE", "HistoryEntry", "Identity", "Views", "location_prefix"]
