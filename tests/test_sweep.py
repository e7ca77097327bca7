"""The backfiller's sweep costs what is waiting for publication, not what the database holds.

Every second every process asks which tables have commits not yet published. The answer comes from the
commit rows not yet backfilled, through their partial index: the plan must use that index on both databases
(no scan of every table or every commit row), and it must name exactly the tables whose latest version is
above their latest published one.
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from coordinator.bench.growth import add_grown_tables
from coordinator.store import CommitRow, OwnershipStore, now_ms
from coordinator.store import create_engine as create_async_store_engine
from coordinator.store.backlog import behind_statement
from tests.conftest import make_backend


@pytest.fixture(params=["sqlite", "postgres"])
def own_database(request: pytest.FixtureRequest) -> str:
    return make_backend(request, request.param, "local", f"sweep-{request.param}").database_url


def plain_connection(url: str) -> tuple[Any, bool]:
    """A DB-API connection in autocommit (what the bench's growth uses), and whether it is SQLite."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        return sqlite3.connect(str(u.database), isolation_level=None), True
    import psycopg

    return psycopg.connect(u.set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True), False


def row(table_id: str, version: int) -> CommitRow:
    key = str(uuid.uuid4())
    return CommitRow(table_id=table_id, version=version, file_name=f"{version:020d}.{key}.json", idempotency_key=key,
                     file_size=10, file_modification_time=now_ms(), commit_timestamp=now_ms() + version,
                     content_sha256="0" * 64, ratified_at=now_ms())


async def test_the_sweep_reads_the_unpublished_commits_index_and_finds_exactly_the_tables_behind(
        own_database: str, tmp_path: Any) -> None:
    engine = create_async_store_engine(own_database)
    store = OwnershipStore(engine)
    db, sqlite = plain_connection(own_database)
    try:
        # Four states: never committed, committed and unpublished, partly published, fully published.
        ids = {name: str(uuid.uuid4()) for name in ("registered", "unpublished", "partly", "published")}
        for name, tid in ids.items():
            await store.register(tid, str(tmp_path / name), "_commits", 0)  # its writer writes version 1
        for name, latest in (("unpublished", 3), ("partly", 4), ("published", 3)):
            for v in range(2, latest + 1):
                await store.ratify(row(ids[name], v), max_unbackfilled=50, releases=False)
        await store.mark_backfilled(ids["partly"], 3)
        await store.mark_backfilled(ids["published"], 3)
        # Many more tables, all published, as the bench's growth scenario adds them (and ANALYZEd by it).
        grown_tables, _ = add_grown_tables(db, sqlite, (tmp_path / "grown-").as_uri(), 3000, 3)
        assert grown_tables == 3004

        behind = await store.tables_behind()
        assert sorted(behind) == sorted([ids["unpublished"], ids["partly"]])
        by_table_row = {r[0] for r in db.execute(
            "SELECT table_id FROM owned_tables WHERE latest_version > latest_backfilled_version").fetchall()}
        assert set(behind) == by_table_row
        assert await store.tables_behind(limit=1) == [ids["unpublished"]]  # its unpublished commit is the oldest
        # the background sweep's filter (decision 59): only tables whose oldest unpublished commit is older
        assert await store.tables_behind(ratified_before=now_ms() - 60_000) == []
        assert sorted(await store.tables_behind(ratified_before=now_ms() + 1)) == sorted(behind)
        db.execute(f"UPDATE commits SET ratified_at = ratified_at - 120000 WHERE table_id = '{ids['partly']}'")
        assert await store.tables_behind(ratified_before=now_ms() - 60_000) == [ids["partly"]]
        # ... and the tables the sweeping process holds the lease of, at any age (it publishes them)
        assert await store.tables_behind(ratified_before=now_ms() - 60_000, held={ids["unpublished"]}) == \
            [ids["partly"], ids["unpublished"]]
        # ... except a table the sweeping process published through its newest unrecorded commit (its mark
        # waits for the table's next ratification, decision 62); through an older one, it is still behind
        assert await store.tables_behind(held={ids["unpublished"]}, published={ids["unpublished"]: 3}) == \
            [ids["partly"]]
        assert await store.tables_behind(published={ids["unpublished"]: 2, ids["partly"]: 4}) == [ids["unpublished"]]

        sql = str(behind_statement(1000).compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
        if sqlite:
            plan = " | ".join(str(r[3]) for r in db.execute("EXPLAIN QUERY PLAN " + sql).fetchall())
        else:
            plan = " | ".join(str(r[0]) for r in db.execute("EXPLAIN " + sql).fetchall())
        assert "ix_commits_unbackfilled" in plan, plan
        assert "Seq Scan" not in plan and "owned_tables" not in plan, plan
    finally:
        db.close()
        await engine.dispose()
