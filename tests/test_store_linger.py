"""A serving process keeps the connection of a one-statement unit of work for the next one (``Db`` with
``linger_seconds``; PostgreSQL; decision 63), on a real PostgreSQL with a pool of one or two connections: a kept
connection is used again; it is never kept when a unit of work may be waiting for it, nor after an error, nor
after a statement run through SQLAlchemy's own execution; the pool gets it back when the pool runs short, once
it was idle for the linger, and at ``close``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from coordinator.store import CommitRow, OwnershipStore, create_engine
from coordinator.store.db import Db
from coordinator.store.schema import commits
from tests.conftest import make_backend
from tests.test_store_driver import commit_row


@pytest.fixture
def url(request: pytest.FixtureRequest) -> str:
    return make_backend(request, "postgres", "local", "linger").database_url


def _out(db: Db) -> int:
    return db.engine.sync_engine.pool.checkedout()  # type: ignore[attr-defined]


async def _backend_pid(db: Db) -> int:
    """The server process of the connection a one-statement unit of work runs on."""
    async with db.tx(write=False, single=True) as conn:
        (pid,), = await db.driver.run(conn, select(func.pg_backend_pid()), {})
        return int(pid)


async def test_a_kept_connection_serves_the_next_statement_and_goes_back_at_the_linger_and_at_close(url: str) -> None:
    engine = create_engine(url, pool_size=2)
    db = Db(engine, linger_seconds=0.3)
    try:
        assert db.linger == 0.3
        first = await _backend_pid(db)
        assert _out(db) == 1, "kept: still out of the pool"
        assert await _backend_pid(db) == first, "the same connection served the next unit of work"
        await asyncio.sleep(1.0)
        assert _out(db) == 0, "back in the pool once idle for the linger"
        await _backend_pid(db)
        assert _out(db) == 1
        await db.close()
        assert _out(db) == 0, "back in the pool at close"
    finally:
        await db.close()
        await engine.dispose()


async def test_never_kept_after_an_error_or_sqlalchemys_own_execution_nor_while_the_pool_has_none_left(
        url: str, tmp_path: Any) -> None:
    engine = create_engine(url, pool_size=1)
    store = OwnershipStore(engine, linger_seconds=30)
    db = store.db
    try:
        table_id = str(uuid.uuid4())
        await store.register(table_id, str(tmp_path / "t"), "_commits", 0)
        row = commit_row(table_id, (await store.get_table(table_id)).latest_version + 1)
        assert await store.ratify(row, max_unbackfilled=50, releases=False) == row
        # A pool of one: the one connection is never kept (a unit of work may be waiting for it).
        assert _out(db) == 0

        # A second pool slot: one-statement units keep it; a failed statement's connection is not kept.
        await db.close()
        await engine.dispose()
        engine = create_engine(url, pool_size=2)
        store = OwnershipStore(engine, linger_seconds=30)
        db = store.db
        await store.get_table(table_id)
        assert _out(db) == 1 and len(db._idle) == 1
        values = {f: getattr(row, f) for f in CommitRow.__dataclass_fields__}
        with pytest.raises(IntegrityError):
            async with db.tx(single=True) as conn:
                await db.driver.run(conn, commits.insert(), {**values, "idempotency_key": str(uuid.uuid4())})
        assert _out(db) == 0 and db._idle == [], "the connection of the failed statement went back"
        await store.ping()  # SQLAlchemy's own execution (a transaction begun on its side): not kept
        assert _out(db) == 0 and db._idle == []

        # The pool runs short: the kept connection goes back to it for a unit of work that needs one, at once.
        await store.get_table(table_id)
        assert _out(db) == 1 and len(db._idle) == 1
        async with db.tx() as b:  # the pool's other connection
            await b.execute(select(1))
            assert _out(db) == 2
            async with asyncio.timeout(5):  # (the pool's own wait would be 30 s)
                async with db.tx() as c:
                    await c.execute(select(1))
            assert db._idle == []
        assert (await store.get_table(table_id)).latest_version == row.version
    finally:
        await store.close()
        await engine.dispose()
