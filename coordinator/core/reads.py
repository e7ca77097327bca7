"""Reads: the commits a reader is handed, what a version conflict's loser missed, and the tables as the
adapters and the status pages see them. Every commit handed out goes through ``Context.for_readers``: its
staged file is made sure of first, and it is named as getCommits names it."""

from __future__ import annotations

from dataclasses import dataclass

from client.contract.commits import commit_json
from client.contract.errors import (
    CommitOwnerError,
    CommitVersionConflictError,
    InvalidArgumentError,
    TableNotFoundError,
    UnavailableError,
)
from client.contract.layout import normalize_location
from coordinator.core.context import Context, check_range
from coordinator.core.rows import Handed
from coordinator.store import TableRow

#: At most this many commits ride on a version conflict's answer (``unseenCommits``); a writer further behind
#: reads the rest with getCommits.
UNSEEN_COMMITS_LIMIT = 100


@dataclass(frozen=True)
class Overview:
    """Counts of tables by status; the tables most behind (each with its oldest unpublished commit's
    ratification time, ms); live tables accepting no commits; the first tables by location."""

    counts: dict[str, int]
    behind: list[tuple[TableRow, int]]
    stopped: list[TableRow]
    first: list[TableRow]


class Reads:
    """What the adapters read through the core."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.unseen_limit = UNSEEN_COMMITS_LIMIT

    # -- commits -------------------------------------------------------------------------------------

    async def get_commits(self, table_id: str, start: int | None, end: int | None) -> tuple[TableRow, list[Handed]]:
        """The table and its ratified commits not yet published, from ``start`` to ``end`` (getCommits)."""
        check_range(start, end)
        table, rows = await self.ctx.store.get_commits(table_id, start, end)
        return table, await self.ctx.for_readers(table, rows)

    async def unpublished_commits(self, table_id: str) -> tuple[TableRow, list[Handed]]:
        """The table and its ratified commits not yet published as ``<v>.json``, in one read."""
        return await self.get_commits(table_id, None, None)

    async def commits_between(self, table_id: str, start: int, end: int | None) -> tuple[TableRow, list[Handed]]:
        """The table and the ratified commits from ``start`` to ``end``, published or not, in one read: at most
        ``get_commits_page_size`` of them, the lowest versions first. A reply with fewer commits than the range
        holds is a page: the caller asks again from the version after the last one listed."""
        check_range(start, end)
        table, rows = await self.ctx.store.get_commits(table_id, start, end, backfilled=True,
                                                       limit=self.ctx.settings.get_commits_page_size)
        return table, await self.ctx.for_readers(table, rows)

    async def add_unseen_commits(self, err: CommitVersionConflictError, table_id: str, version: int) -> None:
        """Put on ``err`` (a refusal of ``version``) the ratified commits from ``version`` on, at most
        ``unseen_limit``, read in one statement with the table's latest version, and whether they are all of them.

        Only a refusal pays this read, and not even that when this process ratified every commit the loser
        missed (a busy table: they are in the table's memory, and ``latest_table_version`` is the newest this
        process knows). When the store cannot answer, the conflict is still the answer: it then carries no
        commit and says it is incomplete (the writer reads the table as it would without them).
        """
        memory = self.ctx.memories.get(table_id)
        if memory is not None and (known := memory.unseen(version, self.unseen_limit)) is not None:
            err.latest_table_version = memory.latest
            err.unseen_commits, err.unseen_commits_complete = [commit_json(c.row, c.path) for c in known], True
            return
        try:
            table, rows = await self.ctx.store.commits_from(table_id, version, self.unseen_limit)
            handed = await self.ctx.for_readers(table, rows)
        except (UnavailableError, TableNotFoundError):
            err.unseen_commits, err.unseen_commits_complete = [], False
            return
        err.unseen_commits = [commit_json(c.row, c.path) for c in handed]
        err.latest_table_version = table.reported_latest
        err.unseen_commits_complete = [r.version for r in rows] == list(range(version, table.latest_version + 1))
        if memory is not None and memory.across is not None and memory.across.shared and err.unseen_commits_complete:
            memory.learned(handed)  # a table other processes commit to too (decision 53)

    # -- tables --------------------------------------------------------------------------------------

    async def find_table(self, location: str) -> TableRow:
        """The table registered at ``location``. Raises TableNotFoundError."""
        return await self.ctx.store.find_table(normalize_location(location))

    async def table(self, table_id: str) -> TableRow:
        """The registration of ``table_id``. Raises TableNotFoundError."""
        return await self.ctx.store.get_table(table_id)

    async def tables(self) -> list[TableRow]:
        return await self.ctx.store.list_tables()

    async def table_at(self, table_id: str, table_uri: str) -> TableRow:
        """The table ``table_id`` after checking that ``table_uri`` is its registered location.
        Raises TableNotFoundError, InvalidArgumentError."""
        table = await self.ctx.store.get_table(table_id)
        if table.dropped_at is not None:
            raise TableNotFoundError(f"table {table_id} was dropped")
        if normalize_location(table_uri) != table.location:
            raise InvalidArgumentError(f"table_uri {table_uri[:200]!r} is not the registered location of table "
                                       f"{table.table_id}")
        return table

    async def tables_near(self, location: str) -> list[TableRow]:
        """The registered tables at, above or below ``location`` (normalized)."""
        return await self.ctx.store.tables_near(location)

    async def location_of(self, table_id: str) -> str:
        """Where ``table_id`` lives (cached: a location never changes). Raises TableNotFoundError."""
        return (await self.ctx.place(table_id)).location

    # -- status --------------------------------------------------------------------------------------

    async def backlog(self) -> tuple[dict[str, int], list[tuple[TableRow, int]]]:
        """Tables by status, and every table with unpublished commits with the ratification time (ms) of its
        oldest one, the one waiting longest first. Its cost follows the backlog, not the number of tables."""
        return await self.ctx.store.table_counts(), await self.ctx.store.behind()

    async def overview(self, limit: int) -> Overview:
        """What the status page shows: counts, then at most ``limit`` tables of each kind worth a look."""
        store = self.ctx.store
        behind = await store.behind(limit)
        return Overview(await store.table_counts(), behind, await store.stopped_tables(limit),
                        await store.first_tables(limit))

    async def ping(self) -> dict[str, str | None]:
        """Whether the database and the log storage answer: None when they do, else what went wrong."""
        out: dict[str, str | None] = {"database": None, "storage": None}
        try:
            await self.ctx.store.ping()
        except CommitOwnerError as e:
            out["database"] = e.message
        try:
            await self.ctx.storage.ping()
        except OSError as e:
            out["storage"] = f"unreachable: {type(e).__name__}"
        return out


__all__ = ["UNSEEN_COMMITS_LIMIT", "Overview", "Reads"]
