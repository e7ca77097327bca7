"""The ownership store: the service's one handle on its SQL, composed of one part per thing it stores.

* ``tables.Tables``: the owned tables (registration, lookup, fencing, forgetting);
* ``commits.Commits``: ratification, commit rows and the backfill bookkeeping, with group commit;
* ``leases.Leases``: the backfill leases;
* ``backlog.Backlog``: read-only views over every table (what is left to publish, counts);
* ``transactions.Transactions``: multi-table transactions (one database transaction for N commits).

The rules they write by live in ``rules.py``, each once; the differences between PostgreSQL and SQLite in
``dialect.py``, chosen once from the engine; the transactions and the translation of driver errors (never
leaving the store: connection failures become ``UnavailableError``) in ``db.py``. ``OwnershipStore``
delegates each of its methods to the part that owns it, and adds nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from coordinator.store.adopt import adopt
from coordinator.store.backlog import Backlog
from coordinator.store.commits import Commits, version_message
from coordinator.store.db import Db
from coordinator.store.leases import Leases
from coordinator.store.rows import CommitRow, NameRow, TableRow, now_ms
from coordinator.store.tables import Tables
from coordinator.store.transactions import Transactions
from coordinator.store.turns import TableTurns


class OwnershipStore:
    def __init__(self, engine: AsyncEngine, *, group_max_rows: int = 1, turn_wait_seconds: float = 3.0,
                 linger_seconds: float = 0.0) -> None:
        """``group_max_rows``: at most this many ratifications (and backfill marks) of different tables share
        one database round trip; 1 runs each on its own (docs/decisions.md, group commit).
        ``turn_wait_seconds``: how long a process waits for a table's turn held by another one (decision 53).
        ``linger_seconds``: how long a connection of a one-statement unit of work is kept for the next one
        (PostgreSQL; ``Db``, decision 63); ``close`` lets go of them."""
        self.engine = engine
        self.db = Db(engine, linger_seconds=linger_seconds)
        self.is_sqlite = self.db.dialect.name == "sqlite"
        self.tables = Tables(self.db)
        self.commits = Commits(self.db, group_max_rows=group_max_rows)
        self.leases = Leases(self.db)
        self.backlog = Backlog(self.db)
        self.transactions = Transactions(self.db, self.commits)  # multi-table transactions (issue 28)
        self.ratify_group = self.commits.ratify_group
        self.mark_group = self.commits.mark_group
        self.turns = TableTurns(engine, wait_seconds=turn_wait_seconds)  # the tables' turns among processes

    async def close(self) -> None:
        """Let go of what the store opened beside the engine (the turns' connections, the ones kept idle)."""
        await self.db.close()
        await self.turns.close()

    async def ping(self) -> None:
        await self.db.ping()

    # -- tables -------------------------------------------------------------------------------------

    async def register(self, table_id: str, location: str, commit_dir: str, current_version: int,
                       *, name: NameRow | None = None, staging_id: str | None = None) -> TableRow:
        return await self.tables.register(table_id, location, commit_dir, current_version, name=name,
                                          staging_id=staging_id)

    async def forget_registration(self, table_id: str) -> bool:
        return await self.tables.forget_registration(table_id)

    async def forget_with_commits(self, table_id: str, latest_version: int) -> bool:
        return await self.tables.forget_with_commits(table_id, latest_version)

    async def drop_table(self, table_id: str, name: str | None, reason: str) -> bool:
        return await self.tables.drop_table(table_id, name, reason)

    async def unfence(self, table_id: str, latest_version: int) -> bool:
        return await self.tables.unfence(table_id, latest_version)

    async def get_table(self, table_id: str) -> TableRow:
        return await self.tables.get_table(table_id)

    async def find_table(self, location: str) -> TableRow:
        return await self.tables.find_table(location)

    async def list_tables(self) -> list[TableRow]:
        return await self.tables.list_tables()

    async def tables_near(self, location: str) -> list[TableRow]:
        """The tables at, above or below the normalized ``location``, read through the location's index."""
        return await self.tables.near(location)

    async def set_not_accepting(self, table_id: str, status: str, reason: str) -> None:
        await self.tables.set_not_accepting(table_id, status, reason)

    # -- commits ------------------------------------------------------------------------------------

    async def ratify(self, row: CommitRow, *, max_unbackfilled: int, releases: bool, carried: int = -1) -> CommitRow:
        """Record that ``row.file_name`` IS version ``row.version``, and with it, when ``carried`` >= 0, that
        the table is published through ``carried`` (a backfill mark carried by the ratification, decision 62:
        every version through it must be published already).

        Returns the ratified row: ``row`` itself (the same object) when this call ratified it, and only then is
        the carried mark recorded; or the earlier row when this is an idempotent replay (same key, same bytes).
        Raises CommitVersionConflictError (true,true), InvalidCommitError for a gap or a non-increasing
        timestamp (false,false), TableNotAcceptingCommitsError (false,false), TooManyUnbackfilledCommitsError
        (true,false), IdempotencyKeyReusedError, TableNotFoundError.
        """
        return await self.commits.ratify(row, max_unbackfilled=max_unbackfilled, releases=releases, carried=carried)

    async def adopt(self, table: TableRow, rows: Sequence[CommitRow]) -> bool:
        """Record ``rows``, versions published beyond the store's record, as ratified and published, in one
        transaction conditioned on ``table``'s versions (``adopt.py``). Returns whether it did."""
        return await adopt(self.db, table, rows)

    async def replay(self, table_id: str, key: str, version: int, sha256: str,
                     latest_table_version: int | None) -> CommitRow | None:
        return await self.commits.replay(table_id, key, version, sha256, latest_table_version)

    async def replayed(self, table_id: str, version: int, file_name: str) -> CommitRow | None:
        return await self.commits.replayed(table_id, version, file_name)

    async def get_commit(self, table_id: str, version: int) -> CommitRow | None:
        return await self.commits.get_commit(table_id, version)

    async def get_commits(self, table_id: str, start: int | None, end: int | None, *, backfilled: bool = False,
                          limit: int | None = None, settle: bool = False) -> tuple[TableRow, list[CommitRow]]:
        return await self.commits.get_commits(table_id, start, end, backfilled=backfilled, limit=limit,
                                              settle=settle)

    async def commits_from(self, table_id: str, start: int, limit: int) -> tuple[TableRow, list[CommitRow]]:
        return await self.commits.commits_from(table_id, start, limit)

    async def unbackfilled(self, table_id: str, up_to: int | None = None, limit: int | None = None, *,
                           settle: bool = False) -> list[CommitRow]:
        return await self.commits.unbackfilled(table_id, up_to, limit, settle=settle)

    async def recent_commits(self, table_id: str, limit: int = 20) -> list[CommitRow]:
        return await self.commits.recent_commits(table_id, limit)

    async def ratified_file_names(self, table_id: str, low: int, high: int) -> dict[int, str]:
        return await self.commits.ratified_file_names(table_id, low, high)

    async def mark_backfilled(self, table_id: str, up_to: int) -> None:
        await self.commits.mark_backfilled(table_id, up_to)

    async def mark_backfilled_many(self, items: dict[str, int], *, later: Collection[str] = ()) -> set[str]:
        return await self.commits.mark_backfilled_many(items, later=later)

    async def record_backfill_error(self, table_id: str, message: str) -> None:
        await self.commits.record_backfill_error(table_id, message)

    # -- backlog ------------------------------------------------------------------------------------

    async def tables_behind(self, limit: int = 1000, ratified_before: int | None = None,
                            held: Collection[str] = (), published: Mapping[str, int] | None = None) -> list[str]:
        return await self.backlog.tables_behind(limit, ratified_before, held, published)

    async def behind(self, limit: int | None = None) -> list[tuple[TableRow, int]]:
        return await self.backlog.behind(limit)

    async def table_counts(self) -> dict[str, int]:
        return await self.backlog.counts()

    async def stopped_tables(self, limit: int) -> list[TableRow]:
        return await self.backlog.stopped(limit)

    async def first_tables(self, limit: int) -> list[TableRow]:
        return await self.backlog.first(limit)

    async def tables_active_since(self, ms: int) -> list[TableRow]:
        return await self.backlog.active_since(ms)

    async def live_tables_after(self, table_id: str, limit: int) -> list[TableRow]:
        return await self.backlog.live_after(table_id, limit)

    async def stats(self) -> dict[str, int]:
        return await self.backlog.stats()

    # -- backfill leases ----------------------------------------------------------------------------

    async def acquire_lease(self, table_id: str, holder: str, ttl_seconds: float) -> bool:
        return await self.leases.acquire_lease(table_id, holder, ttl_seconds)

    async def lease_holder(self, table_id: str) -> str | None:
        return await self.leases.lease_holder(table_id)

    async def release_lease(self, table_id: str, holder: str) -> None:
        await self.leases.release_lease(table_id, holder)


__all__: Sequence[str] = ["OwnershipStore", "now_ms", "version_message"]
