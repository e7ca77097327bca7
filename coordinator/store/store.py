"""The ownership store: the only place SQL lives.

Guarantees (on SQLite and PostgreSQL alike):

* ``ratify`` is one transaction: ``UPDATE owned_tables SET latest_version = v ... WHERE latest_version = v-1
  AND accepting AND <backlog below cap> AND <inCommitTimestamp increases>`` followed by the INSERT of the
  commit row. The primary key (table_id, version) is the final arbiter; nothing is checked before acting.
  When the UPDATE matches no row, the row is re-read and the refusal classified.
* With group commit (``group_max_rows`` > 1), ratifications of different tables that arrive together share
  one round trip (PostgreSQL: one statement over arrays of rows; SQLite: one transaction), each judged on
  its own by the same conditions; a proposal whose key is already used loses its UPDATE instead of failing
  the batch. On PostgreSQL the batch takes its table rows ``FOR UPDATE SKIP LOCKED``: a row another
  transaction holds is skipped, and that proposal waits for it alone, on the one-row path, in its caller's
  task. Backfill bookkeeping is grouped the same way.
* Driver errors never leave this module: connection failures become ``UnavailableError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sqlalchemy import BigInteger, and_, bindparam, cast, exists, func, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from client.contract.errors import (
    AlreadyExistsError,
    CommitVersionConflictError,
    IdempotencyKeyReusedError,
    InvalidCommitError,
    NotFoundError,
    TableAlreadyExistsError,
    TableNotAcceptingCommitsError,
    TableNotFoundError,
    TooManyUnbackfilledCommitsError,
    UnavailableError,
)

from .group import Group
from .rows import CommitRow, NameRow, TableRow
from .schema import commits, owned_tables, schemas, staging_tables, table_names


class _StateMoved(Exception):
    """The ratification UPDATE matched nothing, yet the re-read finds no reason to refuse: try again."""


def now_ms() -> int:
    return int(time.time() * 1000)


def version_message(asked: int, expected: int) -> str:
    return f"Commit version {asked} is not valid. Expected version: {expected}."


class OwnershipStore:
    def __init__(self, engine: AsyncEngine, *, group_max_rows: int = 1) -> None:
        """``group_max_rows``: at most this many ratifications (and backfill marks) of different tables share
        one database round trip; 1 runs each on its own (docs/decisions.md, group commit)."""
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"
        # SQLite has one writer at a time; serialising writers in-process avoids "database is locked".
        self._write_lock = asyncio.Lock() if self.is_sqlite else None
        # PostgreSQL: a single statement is atomic by itself, so it runs in autocommit mode and costs one
        # round trip instead of three (BEGIN, the statement, COMMIT). The same pool serves both.
        self._autocommit = None if self.is_sqlite else engine.execution_options(isolation_level="AUTOCOMMIT")
        self.ratify_group: Group[tuple[CommitRow, int], bool | None] | None = None
        self.mark_group: Group[tuple[str, int], bool] | None = None
        if group_max_rows > 1:
            self.ratify_group = Group(self._ratify_many, lambda item: item[0].table_id, group_max_rows)
            self.mark_group = Group(self._mark_many, lambda item: item[0], group_max_rows)

    # -- plumbing -----------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _tx(self, write: bool = True, single: bool = False) -> AsyncIterator[AsyncConnection]:
        """A transaction; with ``single`` (the block runs exactly one statement) autocommit where that is atomic."""
        lock = self._write_lock if write else None
        try:
            if lock is not None:
                await lock.acquire()
            try:
                if single and self._autocommit is not None:
                    async with self._autocommit.connect() as conn:
                        yield conn
                else:
                    async with self.engine.begin() as conn:
                        yield conn
            finally:
                if lock is not None:
                    lock.release()
        except IntegrityError:
            raise
        except (OperationalError, DBAPIError) as e:
            if isinstance(e, IntegrityError):
                raise
            cause = e.orig if getattr(e, "orig", None) else e
            raise UnavailableError(f"ownership store unavailable: {type(cause).__name__}") from e
        except (OSError, ConnectionError) as e:
            raise UnavailableError(f"ownership store unavailable: {type(e).__name__}") from e  # no host paths

    async def ping(self) -> None:
        async with self._tx(write=False, single=True) as conn:
            await conn.execute(select(1))

    # -- tables -------------------------------------------------------------------------------------

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
            async with self._tx(single=name is None) as conn:
                await conn.execute(owned_tables.insert().values(**values))
                if name is not None:
                    await conn.execute(table_names.insert().values(**_name_values(name)))
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
        async with self._tx(write=False) as conn:
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
        async with self._tx() as conn:
            await conn.execute(table_names.delete().where(and_(
                table_names.c.table_id == table_id, select(owned_tables.c.table_id).where(unratified).exists())))
            res = await conn.execute(owned_tables.delete().where(unratified))
            return bool(res.rowcount)

    async def forget_table(self, table_id: str, latest_version: int) -> bool:
        """Drop a table's registration and its commit rows in one transaction (the operator's `tables forget`).

        Only while the table's latest version is still ``latest_version`` (what the caller checked the log
        against): a commit ratified meanwhile makes this return False and change nothing.
        """
        t = owned_tables.c
        try:
            async with self._tx() as conn:
                await conn.execute(commits.delete().where(commits.c.table_id == table_id))
                res = await conn.execute(owned_tables.delete().where(
                    and_(t.table_id == table_id, t.latest_version == latest_version)))
                if res.rowcount != 1:
                    raise _StateMoved()  # rolls the commit rows back too
        except _StateMoved:
            return False
        return True

    async def unfence(self, table_id: str, latest_version: int) -> bool:
        """Accept commits again on a FENCED table whose latest version is still ``latest_version``. Returns whether
        it did; the recorded backfill error is cleared with the fence."""
        t = owned_tables.c
        async with self._tx(single=True) as conn:
            res = await conn.execute(
                update(owned_tables)
                .where(and_(t.table_id == table_id, t.status == "FENCED", t.latest_version == latest_version))
                .values(accepting=True, status="ACTIVE", status_reason=None, backfill_error=None,
                        backfill_error_at=None, updated_at=now_ms()))
            return res.rowcount == 1

    async def get_table(self, table_id: str) -> TableRow:
        async with self._tx(write=False, single=True) as conn:
            row = (await conn.execute(_named_tables().where(owned_tables.c.table_id == table_id))).first()
        if row is None:
            raise TableNotFoundError(f"no table with id {table_id}")
        return _table(row)

    async def find_table(self, location: str) -> TableRow:
        async with self._tx(write=False, single=True) as conn:
            row = (await conn.execute(_named_tables().where(owned_tables.c.location == location))).first()
        if row is None:
            raise TableNotFoundError(f"no owned table at {location}")
        return _table(row)

    async def list_tables(self) -> list[TableRow]:
        async with self._tx(write=False, single=True) as conn:
            rows = (await conn.execute(_named_tables().order_by(owned_tables.c.location))).all()
        return [_table(r) for r in rows]

    async def set_not_accepting(self, table_id: str, status: str, reason: str) -> None:
        """Stop accepting commits (a fenced or released table)."""
        async with self._tx(single=True) as conn:
            await conn.execute(
                update(owned_tables).where(owned_tables.c.table_id == table_id)
                .values(accepting=False, status=status, status_reason=reason, updated_at=now_ms())
            )

    # -- commits ------------------------------------------------------------------------------------

    async def ratify(self, row: CommitRow, *, max_unbackfilled: int, releases: bool) -> CommitRow:
        """Record that ``row.file_name`` IS version ``row.version``.

        Returns the ratified row: ``row`` itself, or the earlier row when this is an idempotent replay
        (same key, same bytes). Raises CommitVersionConflictError (true,true), InvalidCommitError for a
        gap or a non-increasing timestamp (false,false), TableNotAcceptingCommitsError (false,false),
        TooManyUnbackfilledCommitsError (true,false), IdempotencyKeyReusedError, TableNotFoundError.
        """
        for _attempt in range(3):
            # A release (once in a table's life) sets more columns: it always takes the one-row path.
            won = await self.ratify_group.submit((row, max_unbackfilled)) if self.ratify_group and not releases \
                else None
            if won is None:  # not grouped, or the group skipped it (its row was held): on its own, in this task
                won = await self._ratify_one(row, _ratify_params(row, max_unbackfilled), releases)
            if won:
                return row
            try:
                return await self._classify(row, max_unbackfilled)
            except _StateMoved:
                continue  # nothing refuses this proposal now: what refused it a moment ago has passed
        raise UnavailableError(
            f"table {row.table_id} changed three times while version {row.version} was judged; retry"
        )

    async def _ratify_one(self, row: CommitRow, params: dict[str, Any], releases: bool) -> bool:
        """One proposal in its own round trip; whether it won (False: classify it)."""
        try:
            if self._autocommit is not None:
                # PostgreSQL: the UPDATE feeds the INSERT in one statement (one round trip, atomic by itself).
                async with self._tx(single=True) as conn:
                    return (await conn.execute(_ratify_statements(releases)[1], params)).first() is not None
            async with self._tx() as conn:
                res = await conn.execute(_ratify_statements(releases)[0], params)
                if res.rowcount == 1:
                    await conn.execute(commits.insert(), _commit_values(row))
                    return True
                return False
        except IntegrityError:
            return False  # the (table, version) key or the idempotency key decided: classify

    async def _ratify_many(self, items: list[tuple[CommitRow, int]]) -> list[bool | None]:
        """The group's round trip: which of these proposals (of distinct tables) won; None for one that was
        not judged and must run on its own, in its caller's task (``ratify``).

        PostgreSQL takes the table rows with ``FOR UPDATE SKIP LOCKED``, a lone proposal too: a row held by
        another transaction (a stuck writer, another process's one-row ratification) is skipped, so the round
        trip never waits for it and the writes queued behind it are not held up; that proposal waits for the
        row alone. A proposal whose idempotency key is already used loses its UPDATE (the guard), so the
        usual refusals fail nobody else. A key violation can still come from a proposal racing another
        process for the same key; then the database undid the whole batch, and each proposal runs on its
        own. SQLite (no row locks: one writer at a time) runs the batch as one transaction.
        """
        now = now_ms()
        ordered = sorted(items, key=lambda item: item[0].table_id)
        try:
            if self._autocommit is not None and len(items) == 1:
                row, cap = items[0]
                async with self._tx(single=True) as conn:
                    judged, won = (await conn.execute(_ratify_lone_statement(),
                                                      _ratify_params(row, cap, now))).one()
                return [bool(won) if judged else None]
            if self._autocommit is not None:
                arrays: dict[str, Any] = {"a_" + n: [getattr(r, n) for r, _ in ordered] for n in _RATIFIED}
                arrays["a_max_unbackfilled"] = [cap for _, cap in ordered]
                arrays["p_now"] = now
                async with self._tx(single=True) as conn:
                    got = {r[0]: (r[1], r[2]) for r in (await conn.execute(_ratify_many_statement(), arrays)).all()}
                return [got[r.table_id][1] if got[r.table_id][0] else None for r, _ in items]
            if len(items) == 1:
                row, cap = items[0]
                return [await self._ratify_one(row, _ratify_params(row, cap), False)]
            out = {}
            async with self._tx() as conn:
                for row, cap in ordered:
                    res = await conn.execute(_guarded_update(), _ratify_params(row, cap, now))
                    if res.rowcount == 1:
                        await conn.execute(commits.insert(), _commit_values(row))
                    out[row.table_id] = res.rowcount == 1
            return [out[r.table_id] for r, _ in items]
        except (IntegrityError, UnavailableError) as e:
            if isinstance(e, UnavailableError) and not _deadlock(e):
                raise
            return [None] * len(items)

    async def _classify(self, row: CommitRow, max_unbackfilled: int) -> CommitRow:
        table = await self.get_table(row.table_id)
        prior = await self.replay(row.table_id, row.idempotency_key, row.version, row.content_sha256,
                                  table.reported_latest)
        if prior is not None:
            return prior
        v, latest = row.version, table.latest_version
        if not table.accepting:
            raise TableNotAcceptingCommitsError(
                f"table {table.table_id} is not accepting commits ({table.status}: {table.status_reason})",
                latest_table_version=table.reported_latest,
            )
        if latest >= v:
            raise CommitVersionConflictError(version_message(v, latest + 1), latest_table_version=table.reported_latest)
        if latest < v - 1:
            raise InvalidCommitError(version_message(v, latest + 1), latest_table_version=table.reported_latest)
        if table.unbackfilled >= max_unbackfilled:
            raise TooManyUnbackfilledCommitsError(
                f"table {table.table_id} has {table.unbackfilled} unbackfilled commits (limit {max_unbackfilled}): "
                "backfill is behind; ask for a backfill and retry",
                latest_table_version=table.reported_latest,
            )
        if table.last_commit_timestamp is not None and row.commit_timestamp <= table.last_commit_timestamp:
            raise InvalidCommitError(
                f"inCommitTimestamp {row.commit_timestamp} must be greater than the previous commit's "
                f"{table.last_commit_timestamp}",
                latest_table_version=table.reported_latest,
            )
        # Nothing refuses the proposal any more: the row changed between the UPDATE and this read (say the
        # backlog was full and the backfiller freed it). Not a conflict, since version v is still free.
        raise _StateMoved()

    async def replay(self, table_id: str, key: str, version: int, sha256: str,
                     latest_table_version: int | None) -> CommitRow | None:
        """The commit ratified under idempotency key ``key`` when this proposal repeats it (same version,
        same bytes); None when the key was never used. Raises IdempotencyKeyReusedError otherwise."""
        prior = await self._find_commit(commits.c.table_id == table_id, commits.c.idempotency_key == key)
        if prior is None or (prior.version == version and prior.content_sha256 == sha256):
            return prior
        raise IdempotencyKeyReusedError(
            f"idempotency key {key} was already used for version {prior.version} with different content",
            latest_table_version=latest_table_version,
        )

    async def get_commit(self, table_id: str, version: int) -> CommitRow | None:
        return await self._find_commit(commits.c.table_id == table_id, commits.c.version == version)

    async def _find_commit(self, *cond: Any) -> CommitRow | None:
        async with self._tx(write=False, single=True) as conn:
            r = (await conn.execute(select(commits).where(and_(*cond)))).first()
        return _commit(r) if r is not None else None

    async def get_commits(
        self, table_id: str, start: int | None, end: int | None, *, backfilled: bool = False
    ) -> tuple[TableRow, list[CommitRow]]:
        """The table and its unbackfilled commits in ``[start, end]``, ascending, read in one statement;
        with ``backfilled`` every ratified commit in the range (the rows are kept after publication)."""
        stmt = _get_commits_statement(start is not None, end is not None, backfilled)
        async with self._tx(write=False, single=True) as conn:
            rows = (await conn.execute(stmt, {"p_table_id": table_id, "p_start": start, "p_end": end})).all()
        if not rows:
            raise TableNotFoundError(f"no table with id {table_id}")
        table = _table(rows[0])
        out = []
        for r in rows:
            m = r._mapping
            if m["c_version"] is None:
                continue
            out.append(CommitRow(**{c.name: m["c_" + c.name] for c in commits.c}))
        return table, out

    async def commits_from(self, table_id: str, start: int, limit: int) -> tuple[TableRow, list[CommitRow]]:
        """The table and its ratified commits from ``start`` on (published or not), ascending, at most ``limit``,
        read in one statement: what a writer that lost the race for ``start`` has not seen. Versions are
        contiguous, one row each, so the range ``[start, start + limit - 1]`` is the bound."""
        return await self.get_commits(table_id, start, start + max(1, limit) - 1, backfilled=True)

    async def unbackfilled(self, table_id: str, up_to: int | None = None, limit: int | None = None) -> list[CommitRow]:
        cond = [commits.c.table_id == table_id, commits.c.backfilled_at.is_(None)]
        if up_to is not None:
            cond.append(commits.c.version <= up_to)
        stmt = select(commits).where(and_(*cond)).order_by(commits.c.version)
        if limit:
            stmt = stmt.limit(limit)
        async with self._tx(write=False, single=True) as conn:
            return [_commit(r) for r in (await conn.execute(stmt)).all()]

    async def recent_commits(self, table_id: str, limit: int = 20) -> list[CommitRow]:
        stmt = select(commits).where(commits.c.table_id == table_id).order_by(commits.c.version.desc()).limit(limit)
        async with self._tx(write=False, single=True) as conn:
            return [_commit(r) for r in (await conn.execute(stmt)).all()]

    async def mark_backfilled(self, table_id: str, up_to: int) -> None:
        """Record in one transaction that every version <= ``up_to`` is published. Idempotent."""
        if self.mark_group is not None and await self.mark_group.submit((table_id, up_to)):
            return  # else the group skipped it (its table row was held): on its own, in this task
        params = {"p_table_id": table_id, "p_up_to": up_to, "p_now": now_ms()}
        rows, table, both = _mark_statements()
        if self._autocommit is not None:
            # PostgreSQL runs a data-modifying WITH exactly once even when nothing reads it: one atomic statement.
            async with self._tx(single=True) as conn:
                await conn.execute(both, params)
            return
        async with self._tx() as conn:
            await conn.execute(rows, params)
            await conn.execute(table, params)

    async def _mark_many(self, items: list[tuple[str, int]]) -> list[bool]:
        """The group's round trip of backfill bookkeeping (distinct tables, sent in table order): one
        statement or transaction. Returns whether each was marked; PostgreSQL skips a table whose row
        another transaction holds (``FOR UPDATE SKIP LOCKED``, as ratifications do), and a deadlock with
        another process's batch marks nothing: those are marked on their own by their callers."""
        now = now_ms()
        rows, table, _ = _mark_statements()
        ordered = sorted(items)
        try:
            if self._autocommit is not None and len(items) == 1:
                (t, up_to), = items
                async with self._tx(single=True) as conn:
                    taken = {r[0] for r in (await conn.execute(_mark_lone_statement(),
                                                               {"p_table_id": t, "p_up_to": up_to, "p_now": now}))}
                return [t in taken]
            if self._autocommit is not None:
                arrays = {"a_table_id": [t for t, _ in ordered], "a_up_to": [u for _, u in ordered], "p_now": now}
                async with self._tx(single=True) as conn:
                    taken = {r[0] for r in (await conn.execute(_mark_many_statement(), arrays)).all()}
                return [t in taken for t, _ in items]
            async with self._tx() as conn:
                for t, up_to in ordered:
                    p = {"p_table_id": t, "p_up_to": up_to, "p_now": now}
                    await conn.execute(rows, p)
                    await conn.execute(table, p)
        except UnavailableError as e:
            if not _deadlock(e):
                raise
            return [False] * len(items)
        return [True] * len(items)

    async def record_backfill_error(self, table_id: str, message: str) -> None:
        async with self._tx(single=True) as conn:
            await conn.execute(
                update(owned_tables).where(owned_tables.c.table_id == table_id)
                .values(backfill_error=message[:2000], backfill_error_at=now_ms())
            )

    async def tables_behind(self, limit: int = 1000) -> list[str]:
        """Ids of accepting-or-not tables with unbackfilled commits."""
        t = owned_tables.c
        stmt = select(t.table_id).where(t.latest_version > t.latest_backfilled_version).order_by(t.updated_at).limit(limit)
        async with self._tx(write=False, single=True) as conn:
            return [r[0] for r in (await conn.execute(stmt)).all()]

    async def oldest_unbackfilled(self) -> dict[str, int]:
        """table id -> ratification time (ms) of its oldest unbackfilled commit, for tables that have one."""
        c = commits.c
        stmt = select(c.table_id, func.min(c.ratified_at)).where(c.backfilled_at.is_(None)).group_by(c.table_id)
        async with self._tx(write=False, single=True) as conn:
            return {r[0]: int(r[1]) for r in (await conn.execute(stmt)).all()}

    # -- backfill leases ----------------------------------------------------------------------------

    async def acquire_lease(self, table_id: str, holder: str, ttl_seconds: float) -> bool:
        """Take or renew the table's backfill lease if it is free, expired or already ours (a conditional UPDATE)."""
        ts = now_ms()
        t = owned_tables.c
        async with self._tx(single=True) as conn:
            res = await conn.execute(
                update(owned_tables)
                .where(and_(t.table_id == table_id,
                            or_(t.lease_owner.is_(None), t.lease_owner == holder, t.lease_expires_at < ts)))
                .values(lease_owner=holder, lease_expires_at=ts + int(ttl_seconds * 1000))
            )
            return res.rowcount == 1

    async def release_lease(self, table_id: str, holder: str) -> None:
        t = owned_tables.c
        async with self._tx(single=True) as conn:
            await conn.execute(
                update(owned_tables).where(and_(t.table_id == table_id, t.lease_owner == holder))
                .values(lease_owner=None, lease_expires_at=None)
            )

    async def ratified_file_names(self, table_id: str, low: int, high: int) -> dict[int, str]:
        """version -> ratified file name for the versions in ``[low, high]`` (the orphan janitor's one read)."""
        stmt = select(commits.c.version, commits.c.file_name).where(
            and_(commits.c.table_id == table_id, commits.c.version >= low, commits.c.version <= high))
        async with self._tx(write=False, single=True) as conn:
            return {int(v): str(f) for v, f in (await conn.execute(stmt)).all()}

    async def stats(self) -> dict[str, int]:
        async with self._tx(write=False) as conn:
            n_tables = (await conn.execute(select(func.count()).select_from(owned_tables))).scalar_one()
            n_commits = (await conn.execute(select(func.count()).select_from(commits))).scalar_one()
        return {"tables": int(n_tables), "commits": int(n_commits)}


@functools.cache
def _ratify_statements(releases: bool) -> tuple[Any, Any]:
    """The ratification statements, built once with bound parameters (building and hashing a statement per
    commit cost more CPU than running it): the conditional UPDATE alone (SQLite: followed by the INSERT in
    the same transaction) and, for PostgreSQL, the UPDATE feeding the INSERT in one statement."""
    t = owned_tables.c
    values: dict[str, Any] = dict(
        latest_version=bindparam("p_version"), last_commit_timestamp=bindparam("p_commit_timestamp"),
        last_commit_at=bindparam("p_now"), updated_at=bindparam("p_now"),
    )
    if releases:
        values.update(accepting=False, status="RELEASED", status_reason=bindparam("p_status_reason"))
    upd = (
        update(owned_tables)
        .where(
            and_(
                t.table_id == bindparam("p_table_id"),
                t.latest_version == bindparam("p_previous"),
                t.accepting.is_(True),
                (t.latest_version - t.latest_backfilled_version) < bindparam("p_max_unbackfilled"),
                or_(t.last_commit_timestamp.is_(None), t.last_commit_timestamp < bindparam("p_commit_timestamp")),
            )
        )
        .values(**values)
    )
    won = upd.returning(t.table_id).cte("won")
    pick = select(*[bindparam("c_" + c.name, type_=c.type).label(c.name) for c in commits.c]).select_from(won)
    both = commits.insert().from_select([c.name for c in commits.c], pick).returning(commits.c.version)
    return upd, both


@functools.cache
def _ratify_lone_statement() -> Any:
    """PostgreSQL's grouped ratification for a batch of one: the one-row statement (decision 13's UPDATE
    feeding the INSERT, plus the unused-key guard) on the table row taken ``FOR UPDATE SKIP LOCKED``, cheaper
    to plan than the arrays. Returns one row: whether the proposal was judged (its row taken) and won."""
    t, c = owned_tables.c, commits.c
    upd = _ratify_statements(False)[0]
    taken = (select(t.table_id).where(t.table_id == bindparam("p_table_id"))
             .with_for_update(skip_locked=True).cte("taken"))
    won = (upd.where(and_(t.table_id.in_(select(taken.c.table_id)),
                          ~exists().where(and_(c.table_id == bindparam("p_table_id"),
                                               c.idempotency_key == bindparam("c_idempotency_key")))))
           .returning(t.table_id).cte("won"))
    pick = select(*[bindparam("c_" + col.name, type_=col.type).label(col.name) for col in commits.c]).select_from(won)
    inserted = commits.insert().from_select([col.name for col in commits.c], pick).returning(c.version).cte("inserted")
    return select(select(taken.c.table_id).exists().label("judged"),
                  select(inserted.c.version).exists().label("won"))


@functools.cache
def _mark_lone_statement() -> Any:
    """PostgreSQL's grouped backfill bookkeeping for a batch of one: ``_mark_statements``' single statement on
    the table row taken ``FOR UPDATE SKIP LOCKED``; returns the table's id when it was taken, no row else."""
    t, c = owned_tables.c, commits.c
    rows, table, _ = _mark_statements()
    taken = (select(t.table_id).where(t.table_id == bindparam("p_table_id"))
             .with_for_update(skip_locked=True).cte("taken"))
    marked = rows.where(c.table_id.in_(select(taken.c.table_id))).returning(c.version).cte("marked")
    advanced = table.where(t.table_id.in_(select(taken.c.table_id))).returning(t.table_id).cte("advanced")
    return select(taken.c.table_id).add_cte(marked).add_cte(advanced)


def _deadlock(e: BaseException) -> bool:
    """Whether the database aborted the statement to break a deadlock (PostgreSQL's SQLSTATE 40P01)."""
    cause = e.__cause__
    return getattr(getattr(cause, "orig", None), "sqlstate", None) == "40P01"


_RATIFIED = tuple(c.name for c in commits.c if c.name != "backfilled_at")  # a new commit is unbackfilled


def _ratify_params(row: CommitRow, max_unbackfilled: int, now: int | None = None) -> dict[str, Any]:
    v = row.version
    params: dict[str, Any] = {
        "p_table_id": row.table_id, "p_version": v, "p_previous": v - 1, "p_max_unbackfilled": max_unbackfilled,
        "p_commit_timestamp": row.commit_timestamp, "p_now": now_ms() if now is None else now,
        "p_status_reason": f"ownership given up at version {v}",
    }
    params.update({"c_" + k: val for k, val in _commit_values(row).items()})
    return params


@functools.cache
def _guarded_update() -> Any:
    """SQLite's grouped ratification: the one-row UPDATE, which also loses when the proposal's idempotency key
    is already used (the INSERT's key violation would otherwise undo the whole group's transaction)."""
    c = commits.c
    return _ratify_statements(False)[0].where(~exists().where(and_(
        c.table_id == bindparam("p_table_id"), c.idempotency_key == bindparam("c_idempotency_key"))))


@functools.cache
def _ratify_many_statement() -> Any:
    """PostgreSQL's grouped ratification, one statement: the proposals as arrays (``unnest``), the table rows
    taken with ``FOR UPDATE SKIP LOCKED`` (a row another transaction holds is skipped, never waited for), the
    conditional UPDATE of each taken row (the same conditions as one row, plus the unused-key guard) and the
    INSERT of the winners' commit rows. Returns one row per proposal: its table id, whether it was judged
    (its row was taken) and whether it won. At most one proposal per table (the group's rule)."""
    t, c = owned_tables.c, commits.c
    cols = [*_RATIFIED, "max_unbackfilled"]
    types = [*(c[n].type for n in _RATIFIED), BigInteger()]
    p = (select(func.unnest(*[cast(bindparam("a_" + n), ARRAY(ty)) for n, ty in zip(cols, types, strict=True)])
                .table_valued(*cols).render_derived(name="p"))
         .cte("p"))
    taken = (select(t.table_id).where(t.table_id.in_(select(p.c.table_id)))
             .with_for_update(skip_locked=True).cte("taken"))
    won = (
        update(owned_tables)
        .where(and_(
            t.table_id == p.c.table_id,
            t.table_id.in_(select(taken.c.table_id)),
            t.latest_version == p.c.version - 1,
            t.accepting.is_(True),
            (t.latest_version - t.latest_backfilled_version) < p.c.max_unbackfilled,
            or_(t.last_commit_timestamp.is_(None), t.last_commit_timestamp < p.c.commit_timestamp),
            ~exists().where(and_(c.table_id == p.c.table_id, c.idempotency_key == p.c.idempotency_key)),
        ))
        .values(latest_version=p.c.version, last_commit_timestamp=p.c.commit_timestamp,
                last_commit_at=bindparam("p_now"), updated_at=bindparam("p_now"))
        .returning(t.table_id)
        .cte("won")
    )
    pick = select(*[p.c[n] for n in _RATIFIED]).select_from(p.join(won, won.c.table_id == p.c.table_id))
    inserted = commits.insert().from_select(list(_RATIFIED), pick).returning(c.table_id).cte("inserted")
    return select(p.c.table_id, p.c.table_id.in_(select(taken.c.table_id)).label("judged"),
                  p.c.table_id.in_(select(inserted.c.table_id)).label("won"))


@functools.cache
def _mark_many_statement() -> Any:
    """PostgreSQL's grouped backfill bookkeeping, one statement: ``_mark_statements`` over arrays of
    (table, up_to), at most one per table, on the table rows taken with ``FOR UPDATE SKIP LOCKED``; returns
    the ids of the tables taken (the others were held by another transaction and are left as they were)."""
    c, t = commits.c, owned_tables.c
    p = (select(func.unnest(cast(bindparam("a_table_id"), ARRAY(t.table_id.type)),
                            cast(bindparam("a_up_to"), ARRAY(BigInteger())))
                .table_valued("table_id", "up_to").render_derived(name="p"))
         .cte("p"))
    taken = (select(t.table_id).where(t.table_id.in_(select(p.c.table_id)))
             .with_for_update(skip_locked=True).cte("taken"))
    rows = (update(commits)
            .where(and_(c.table_id == p.c.table_id, c.table_id.in_(select(taken.c.table_id)),
                        c.version <= p.c.up_to, c.backfilled_at.is_(None)))
            .values(backfilled_at=bindparam("p_now"))
            .returning(c.version).cte("marked"))
    table = (update(owned_tables)
             .where(and_(t.table_id == p.c.table_id, t.table_id.in_(select(taken.c.table_id)),
                         t.latest_backfilled_version < p.c.up_to, t.latest_version >= p.c.up_to))
             .values(latest_backfilled_version=p.c.up_to, backfill_error=None, backfill_error_at=None,
                     updated_at=bindparam("p_now"))
             .returning(t.table_id).cte("advanced"))
    return select(taken.c.table_id).add_cte(rows).add_cte(table)


@functools.cache
def _get_commits_statement(has_start: bool, has_end: bool, backfilled: bool = False) -> Any:
    """The table row outer-joined with its unbackfilled (or all) commits in a version range, built once."""
    cond = [commits.c.table_id == owned_tables.c.table_id]
    if not backfilled:
        cond.append(commits.c.backfilled_at.is_(None))
    if has_start:
        cond.append(commits.c.version >= bindparam("p_start"))
    if has_end:
        cond.append(commits.c.version <= bindparam("p_end"))
    return (
        select(owned_tables, *[c.label("c_" + c.name) for c in commits.c])
        .select_from(owned_tables.outerjoin(commits, and_(*cond)))
        .where(owned_tables.c.table_id == bindparam("p_table_id"))
        .order_by(commits.c.version)
    )


@functools.cache
def _mark_statements() -> tuple[Any, Any, Any]:
    """Backfill bookkeeping, built once: mark the rows, advance the table, and both as one statement."""
    up_to: Any = bindparam("p_up_to")
    rows = (update(commits)
            .where(and_(commits.c.table_id == bindparam("p_table_id"), commits.c.version <= up_to,
                        commits.c.backfilled_at.is_(None)))
            .values(backfilled_at=bindparam("p_now")))
    table = (update(owned_tables)
             .where(and_(owned_tables.c.table_id == bindparam("p_table_id"),
                         owned_tables.c.latest_backfilled_version < up_to, owned_tables.c.latest_version >= up_to))
             .values(latest_backfilled_version=up_to, backfill_error=None, backfill_error_at=None,
                     updated_at=bindparam("p_now")))
    return rows, table, table.add_cte(rows.returning(commits.c.version).cte("marked"))


def _commit_values(row: CommitRow) -> dict[str, Any]:
    return {f: getattr(row, f) for f in CommitRow.__dataclass_fields__}


def _table(r: Any) -> TableRow:
    m = r._mapping
    return TableRow(**{f: m[f] for f in TableRow.__dataclass_fields__ if f in m})


def _named_tables() -> Any:
    """owned_tables with each table's full name (NULL when it has none)."""
    n = table_names.c
    full = (n.catalog_name + "." + n.schema_name + "." + n.name).label("name")
    return select(owned_tables, full).select_from(
        owned_tables.outerjoin(table_names, table_names.c.table_id == owned_tables.c.table_id))


def _name_values(row: NameRow) -> dict[str, Any]:
    return {f: getattr(row, f) for f in NameRow.__dataclass_fields__}


def _commit(r: Any) -> CommitRow:
    m = r._mapping
    return CommitRow(**{f: m[f] for f in CommitRow.__dataclass_fields__})


__all__: Sequence[str] = ["OwnershipStore", "now_ms", "version_message"]
