"""The hot statements on the driver connection (``coordinator/store/driver.py``), on SQLite and PostgreSQL.

The statements themselves are judged by every suite of the store (contract, group commit, conflicts,
idempotency, deadlines); these tests pin what the seam adds: the text compiled from the Core expression
carries the statement's own values, a driver error reaches the store as SQLAlchemy's error and changes
nothing, a connection left mid-statement is never handed out again, and listeners still see the statements.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import bindparam, event, select, text
from sqlalchemy.exc import IntegrityError

from client.contract.errors import CommitVersionConflictError
from coordinator.store import CommitRow, OwnershipStore, create_engine, now_ms
from coordinator.store.db import Db
from coordinator.store.schema import commits, owned_tables
from tests.conftest import make_backend


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    return make_backend(request, request.param, "local", f"driver-{request.param}").database_url


def commit_row(table_id: str, version: int) -> CommitRow:
    key = str(uuid.uuid4())
    now = now_ms()
    return CommitRow(table_id=table_id, version=version, file_name=f"{version:020d}.{key}.json",
                     idempotency_key=key, file_size=10, file_modification_time=now, commit_timestamp=now + version,
                     content_sha256="0" * 64, ratified_at=now, body=b"{}")


async def test_a_statement_compiled_once_carries_its_own_values_and_reads_typed_rows(database_url: str,
                                                                                   tmp_path: Any) -> None:
    engine = create_engine(database_url)
    db = Db(engine)
    try:
        store = OwnershipStore(engine)
        table_id = str(uuid.uuid4())
        await store.register(table_id, str(tmp_path / "t"), "_commits", 0)
        # ``+ 1`` is a value the expression holds itself (no parameter of the caller); ``accepting`` is a
        # Boolean column, which SQLite stores as 0/1 and must come back as a bool.
        stmt = select(owned_tables.c.accepting, (owned_tables.c.latest_version + 1).label("next")).where(
            owned_tables.c.table_id == bindparam("p_table_id"))
        compiled = db.driver.statement(stmt)
        assert db.driver.statement(stmt) is compiled  # compiled once
        assert compiled.columns == ("accepting", "next")
        async with db.tx(write=False) as conn:
            rows = await db.driver.rows(conn, compiled, {"p_table_id": table_id})
        latest = (await store.get_table(table_id)).latest_version
        assert rows == [(True, latest + 1)] and type(rows[0][0]) is bool
        async with db.tx(write=False) as conn:
            assert await db.driver.rows(conn, compiled, {"p_table_id": "no such table"}) == []
    finally:
        await engine.dispose()


async def test_a_statement_with_parameters_rendered_at_execution_is_refused(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        stmt = select(owned_tables.c.table_id).where(owned_tables.c.table_id.in_(bindparam("ids", expanding=True)))
        with pytest.raises(ValueError, match="rendered at execution time"):
            Db(engine).driver.statement(stmt)
    finally:
        await engine.dispose()


async def test_a_driver_error_is_sqlalchemys_error_and_changes_nothing(database_url: str, tmp_path: Any) -> None:
    engine = create_engine(database_url)
    db = Db(engine)
    errors: list[Any] = []
    event.listen(engine.sync_engine, "handle_error", lambda ctx: errors.append(ctx.original_exception))
    try:
        store = OwnershipStore(engine)
        table_id = str(uuid.uuid4())
        await store.register(table_id, str(tmp_path / "t"), "_commits", 0)
        row = commit_row(table_id, (await store.get_table(table_id)).latest_version + 1)
        assert await store.ratify(row, max_unbackfilled=50, releases=False) == row
        values = {f: getattr(row, f) for f in CommitRow.__dataclass_fields__}
        with pytest.raises(IntegrityError):  # the (table, version) key: the database's error, SQLAlchemy's class
            async with db.tx() as conn:
                await db.driver.run(conn, commits.insert(), {**values, "idempotency_key": str(uuid.uuid4())})
        assert len(errors) == 1  # the handle_error listeners ran (the service counts database errors there)
        _, rows = await store.get_commits(table_id, None, None, backfilled=True)
        assert rows == [row] and (await store.get_table(table_id)).latest_version == row.version
        await store.ping()  # the connection went back to the pool usable
    finally:
        await engine.dispose()


@pytest_asyncio.fixture
async def watched(database_url: str, tmp_path: Any) -> AsyncIterator[tuple[OwnershipStore, str, list[str]]]:
    """A store with one registered table, and the SQL of each statement run from then on (a cursor listener)."""
    engine = create_engine(database_url)
    seen: list[str] = []
    try:
        store = OwnershipStore(engine)
        table_id = str(uuid.uuid4())
        await store.register(table_id, str(tmp_path / "t"), "_commits", 0)
        event.listen(engine.sync_engine, "before_cursor_execute", lambda _c, _cur, sql, *_a: seen.append(sql))
        yield store, table_id, seen
    finally:
        await engine.dispose()


async def test_statements_on_the_driver_are_seen_by_cursor_listeners(
    watched: tuple[OwnershipStore, str, list[str]],
) -> None:
    store, table_id, seen = watched
    await store.get_commits(table_id, None, None)
    assert len(seen) == 1 and "owned_tables" in seen[0]


async def test_a_statement_cancelled_on_the_driver_closes_its_connection(tmp_path: Any,
                                                                         request: pytest.FixtureRequest) -> None:
    """A cancelled statement leaves its connection mid-protocol: it is invalidated (closed, never pooled
    again), as SQLAlchemy does for a statement it runs; the next unit of work gets a working connection."""
    url = make_backend(request, "postgres", "local", "driver-cancel").database_url
    engine = create_engine(url, pool_size=1)
    db = Db(engine)
    used: list[Any] = []
    try:
        async def sleep() -> None:
            async with db.tx(write=False, single=True) as conn:
                used.append(conn.sync_connection.connection.driver_connection)  # type: ignore[union-attr]
                await db.driver.run(conn, text("SELECT pg_sleep(30)"), {})

        task = asyncio.create_task(sleep())
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert used and used[0].closed
        async with asyncio.timeout(10):
            await db.ping()  # the pool's one connection is a new one
    finally:
        await engine.dispose()


@pytest.mark.parametrize("returning", [True, False], ids=["returning", "changes"])
async def test_whether_an_update_matched_a_row(database_url: str, tmp_path: Any, returning: bool) -> None:
    """``Driver.matched`` by ``RETURNING`` and, on SQLite older than 3.35, by ``changes()``: the lease's
    conditional UPDATE matches a free lease and not one another holder has."""
    engine = create_engine(database_url)
    try:
        store = OwnershipStore(engine)
        if not returning:
            if engine.dialect.name != "sqlite":
                pytest.skip("the changes() answer is SQLite's")
            store.db.driver.returning = False  # type: ignore[attr-defined]
        table_id = str(uuid.uuid4())
        await store.register(table_id, str(tmp_path / "t"), "_commits", 0)
        assert await store.acquire_lease(table_id, "a", 30)
        assert not await store.acquire_lease(table_id, "b", 30)
        assert await store.acquire_lease(table_id, "a", 30)  # renewed by its holder
        await store.release_lease(table_id, "a")
        assert await store.acquire_lease(table_id, "b", 30)
        assert not await store.acquire_lease(str(uuid.uuid4()), "b", 30)  # no such table: nothing matched
    finally:
        await engine.dispose()


async def test_an_answer_read_from_the_database_is_settled_in_the_statement_that_read_it(
    watched: tuple[OwnershipStore, str, list[str]],
) -> None:
    """Decision 54: the refusal's re-read, the key called unused and the rows to publish each take one statement
    (a table not found, one more); on PostgreSQL that statement carries the settle itself."""
    store, table_id, seen = watched
    assert await store.ratify(commit_row(table_id, 2), max_unbackfilled=50, releases=False)
    seen.clear()
    pg = store.db.engine.dialect.name == "postgresql"

    def took(n: int) -> None:
        assert len(seen) == n, seen
        assert ("pg_logical_emit_message" in seen[-1]) == pg, seen
        seen.clear()

    with pytest.raises(CommitVersionConflictError):
        await store.ratify(commit_row(table_id, 2), max_unbackfilled=50, releases=False)
    took(2)  # the UPDATE that lost, then the judgement with the key's commit
    assert await store.replay(table_id, str(uuid.uuid4()), 2, "0" * 64, 2) is None
    took(1)
    assert [c.version for c in (await store.get_commits(table_id, None, None, settle=True))[1]] == [2]
    took(1)
    assert await store.replay(str(uuid.uuid4()), str(uuid.uuid4()), 1, "0" * 64, None) is None
    assert len(seen) == (2 if pg else 1), seen  # no table: the read found no row, the settle follows


async def test_a_named_table_read_on_the_driver_is_the_row_the_core_read_gives(database_url: str,
                                                                              tmp_path: Any) -> None:
    """``NameStore.get_named`` (the name lookup of every /delta/v1 request) runs on the driver: the same table
    and name rows, JSON columns decoded, as the Core statement it is compiled from."""
    from client.contract.errors import NotFoundError
    from coordinator.store.names import NameStore, _named_by_name, _pair
    from coordinator.store.rows import MANAGED, CatalogRow, NameRow, SchemaRow

    engine = create_engine(database_url)
    try:
        store = OwnershipStore(engine)
        names = NameStore(store)
        ts = now_ms()
        await names.create_catalog(CatalogRow(name="c", id=str(uuid.uuid4()), comment=None, properties={},
                                              created_at=ts, updated_at=ts))
        await names.create_schema(SchemaRow(catalog_name="c", name="s", id=str(uuid.uuid4()), comment=None,
                                            properties={}, created_at=ts, updated_at=ts))
        table_id = str(uuid.uuid4())
        name = NameRow(table_id=table_id, catalog_name="c", schema_name="s", name="t", table_type=MANAGED,
                       data_source_format="DELTA", comment="a comment",
                       columns=[{"name": "id", "type_name": "LONG", "position": 0}],
                       properties={"k": "v", "delta.feature.catalogManaged": "supported"},
                       created_at=ts, updated_at=ts)
        await store.register(table_id, str(tmp_path / "t"), "_staged_commits", -1, name=name)
        got = await names.get_named("c", "s", "t")
        async with store.db.tx(write=False) as conn:
            core = _pair((await conn.execute(_named_by_name(), {"p_catalog": "c", "p_schema": "s",
                                                                "p_name": "t"})).one())
        assert got == core
        assert got[1] == name and got[0].table_id == table_id and got[0].name == "c.s.t"
        with pytest.raises(NotFoundError):
            await names.get_named("c", "s", "nope")
    finally:
        await engine.dispose()
