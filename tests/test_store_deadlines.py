"""The store's own time limits on PostgreSQL: an exhausted pool, the connection parameters of the URL, and
the rule that a replay whose first attempt's COMMIT was cut is acknowledged only once the row is as durable
as a fresh commit (docs/decisions.md, a store that never hangs the owner)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from client.contract.errors import CommitVersionConflictError, UnavailableError
from coordinator.runtime.settings import Settings
from coordinator.store import CommitRow, OwnershipStore, migrate, now_ms
from coordinator.store import create_engine as create_store_engine
from coordinator.store.db import Db
from coordinator.store.engine import TCP_DEFAULTS
from harness.pgcluster import PgCluster, missing_tools


def commit_row(table_id: str, version: int, key: str | None = None) -> CommitRow:
    key = key or str(uuid.uuid4())
    return CommitRow(table_id=table_id, version=version, file_name=f"{version:020d}.{key}.json",
                     idempotency_key=key, file_size=10, file_modification_time=now_ms(),
                     commit_timestamp=now_ms() + version, content_sha256="0" * 64, ratified_at=now_ms())


def rows_of(url: str, sql: str) -> list[tuple[Any, ...]]:
    u = make_url(url)
    with psycopg.connect(host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else []


async def test_an_exhausted_pool_is_unavailable_naming_the_pool_limit(request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_database_factory")()
    engine = create_store_engine(url, pool_size=1, timeout=0.5)
    db = Db(engine)
    held, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:  # the pool's one connection, held past the deadline (outside the store's deadline)
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
            held.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    try:
        await held.wait()
        t0 = time.monotonic()
        with pytest.raises(UnavailableError) as e:
            await db.ping()
        assert e.value.retryable and e.value.http_status == 503
        assert "connection pool exhausted" in e.value.message and "db_pool_size" in e.value.message
        assert time.monotonic() - t0 < 2.0
        release.set()
        await holder
        await db.ping()  # the pool's one connection is back and works
    finally:
        release.set()
        await engine.dispose()


async def test_connection_parameters_of_the_url_are_kept_and_the_defaults_fill_the_rest(
    request: pytest.FixtureRequest,
) -> None:
    url = request.getfixturevalue("pg_database_factory")()
    engine = create_store_engine(f"{url}?keepalives_idle=33&connect_timeout=7&application_name=ha-test",
                                 pool_size=1, timeout=3.0)
    try:
        async with engine.connect() as conn:
            raw = await conn.get_raw_connection()
            params = raw.driver_connection.info.get_parameters()  # what libpq connected with
            setting = (await conn.execute(text("SHOW statement_timeout"))).scalar()
        assert params["keepalives_idle"] == "33" and params["connect_timeout"] == "7"
        assert params["application_name"] == "ha-test"
        assert params["tcp_user_timeout"] == str(TCP_DEFAULTS["tcp_user_timeout"])
        assert params["keepalives_count"] == str(TCP_DEFAULTS["keepalives_count"])
        assert setting == "3s"
    finally:
        await engine.dispose()


@pytest.mark.parametrize("query, named", [
    ("bogus_option=1", '"bogus_option"'),
    ("keepalives_idle=soon", "keepalives_idle must be a whole number"),
    ("tcp_user_timeout=-5", "tcp_user_timeout must be a whole number"),
])
def test_bad_url_parameters_are_refused_when_the_settings_load(query: str, named: str) -> None:
    with pytest.raises(ValueError) as e:
        Settings.load({"database_url": f"postgresql+psycopg://postgres@127.0.0.1/owner?{query}"})
    assert "COMMIT_OWNER_DATABASE_URL" in str(e.value) and named in str(e.value)


# -- a primary that cannot replicate: a standby named for synchronous replication that never connects ------

@pytest.fixture
def unreplicated() -> Iterator[PgCluster]:
    """A server of this test alone (its replication setting is changed on purpose)."""
    why = missing_tools()
    if why:
        pytest.skip(f"!!! cannot start a throwaway PostgreSQL cluster: {why} !!!")
    pg = PgCluster().init()
    pg.start()
    try:
        yield pg
    finally:
        pg.destroy()


def synchronous_standby(pg: PgCluster, name: str) -> None:
    rows_of(pg.admin_url, f"ALTER SYSTEM SET synchronous_standby_names = '{name}'")
    rows_of(pg.admin_url, "SELECT pg_reload_conf()")
    time.sleep(0.3)  # the backends read the reloaded file at their next command


async def test_a_replay_of_a_commit_cut_before_replication_is_acknowledged_only_once_replicated(
    unreplicated: PgCluster, tmp_path: Any,
) -> None:
    pg = unreplicated
    url = pg.create_database("owner")
    migrate(url)
    engine = create_store_engine(url, pool_size=2, timeout=1.0)
    store = OwnershipStore(engine)
    try:
        table_id = str(uuid.uuid4())
        await store.register(table_id, str(tmp_path / "t"), "_commits", 0)
        assert await store.ratify(commit_row(table_id, 2), max_unbackfilled=50, releases=False)

        synchronous_standby(pg, "ghost")  # every COMMIT now waits for a standby that never comes
        row = commit_row(table_id, 3)
        t0 = time.monotonic()
        with pytest.raises(UnavailableError) as cut:
            await store.ratify(row, max_unbackfilled=50, releases=False)
        assert "no answer within 1s, connection closed" in cut.value.message and time.monotonic() - t0 < 2.5
        # The primary gives up waiting for its standby (an operator cancels the wait, or a failover manager
        # does): the row is now committed here, on this server only, and a plain read sees it.
        waiting = "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE datname = 'owner' AND wait_event = 'SyncRep'"
        assert rows_of(pg.admin_url, waiting) == [(True,)]
        seen = f"SELECT idempotency_key FROM commits WHERE table_id = '{table_id}' AND version = 3"
        for _ in range(50):
            if rows_of(url, seen):
                break
            time.sleep(0.05)
        assert rows_of(url, seen) == [(row.idempotency_key,)]

        # The writer retries with the same key: the replay is found, but not acknowledged while the row is
        # not where the store promises (on the synchronous standby): outcome still unknown, retry.
        with pytest.raises(UnavailableError):
            await store.ratify(row, max_unbackfilled=50, releases=False)
        rows_of(pg.admin_url, waiting)  # (the settle's wait: let it go)

        # Nor is any other answer given from a read that saw that row: a refusal of another writer's proposal
        # for the same version (a failover can still lose the row that takes it, and a server that is no longer
        # the primary reads the same way), a key called unused, the rows read to be published.
        other = commit_row(table_id, 3)
        answers = {
            "the conflict": lambda: store.ratify(other, max_unbackfilled=50, releases=False),
            "the unused key": lambda: store.replay(table_id, other.idempotency_key, 3, other.content_sha256, 3),
            "the staged name unknown": lambda: store.replayed(table_id, 3, other.file_name),
            "the rows to publish": lambda: store.get_commits(table_id, None, None, settle=True),
        }
        for what, answer in answers.items():
            with pytest.raises(UnavailableError, match="no answer within 1s"):
                await answer()
                pytest.fail(f"{what} was answered from a row that is not durable")
            rows_of(pg.admin_url, waiting)
        assert rows_of(url, f"SELECT count(*) FROM commits WHERE table_id = '{table_id}'") == [(2,)]

        synchronous_standby(pg, "")  # replication healthy again (here: not required any more)
        assert await store.ratify(row, max_unbackfilled=50, releases=False) == row
        assert (await store.get_table(table_id)).latest_version == 3
        with pytest.raises(CommitVersionConflictError):
            await store.ratify(other, max_unbackfilled=50, releases=False)
        assert await store.replay(table_id, other.idempotency_key, 3, other.content_sha256, 3) is None
        assert [c.version for c in (await store.get_commits(table_id, None, None, settle=True))[1]] == [2, 3]
    finally:
        await engine.dispose()
