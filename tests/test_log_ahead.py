"""The log checked against the store before a table's first ratification (coordinator/core/log_ahead.py), and the
adoption of published versions decided by the database (coordinator/store/adopt.py), on SQLite and PostgreSQL.

A version published beyond the store's record refuses the table's commits; a version ratified by another process
while the check looked is looked past, not refused; only "not ahead" is remembered, so a refused table is looked at
again. An adoption conditioned on a table row that moved changes nothing.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from client.contract.errors import LogAheadOfStoreError
from client.contract.layout import delta_file, staged_file_name
from coordinator.core.context import new_commit_row
from coordinator.core.log_ahead import LogAhead
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter
from coordinator.store import OwnershipStore, migrate
from coordinator.store import create_engine as create_async_store_engine
from tests.support import actions, ndjson


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url = (f"sqlite+aiosqlite:///{tmp_path}/ahead.db" if request.param == "sqlite"
           else request.getfixturevalue("pg_database_factory")())
    migrate(url)
    return url


def _row(table_id: str, version: int) -> Any:
    return new_commit_row(table_id, version, ndjson(actions()), file_name=staged_file_name(version),
                          uid=str(uuid.uuid4()), commit_timestamp=1_000 + version, keeps_body=False)


def _write(location: str, version: int) -> None:
    path = Path(delta_file(location, version)[len("file://"):])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(ndjson(actions()))


async def test_a_published_version_beyond_the_store_refuses_until_it_is_gone_and_a_moved_table_is_looked_past(
        database_url: str, tmp_path: Path) -> None:
    store = OwnershipStore(create_async_store_engine(database_url))
    storage = StorageRouter(Settings.load({}, environ={}))
    try:
        ahead = LogAhead(store, storage)
        # the store records version 0, the log holds <1>.json: refused, and looked at again next time
        tid, loc = str(uuid.uuid4()), (tmp_path / "a").as_uri()
        await store.register(tid, loc, "_commits", -1)
        _write(loc, 1)
        for _ in range(2):
            with pytest.raises(LogAheadOfStoreError) as e:
                await ahead.check(tid)
            assert e.value.http_status == 503 and e.value.retryable and not e.value.conflict
            assert f"commit-owner tables reconcile {tid}" in e.value.message
            assert not ahead.verified(tid)
        Path(delta_file(loc, 1)[len("file://"):]).unlink()
        await ahead.check(tid)
        assert ahead.verified(tid)

        # another process ratified and published version 1 after the caller read the row at 0: looked past
        tid2, loc2 = str(uuid.uuid4()), (tmp_path / "b").as_uri()
        stale = await store.register(tid2, loc2, "_commits", -1)
        assert (await store.ratify(_row(tid2, 1), max_unbackfilled=50, releases=False)).version == 1
        _write(loc2, 1)
        await ahead.check(tid2, stale)
        assert ahead.verified(tid2)
    finally:
        await storage.close()
        await store.close()
        await store.engine.dispose()


async def test_an_adoption_over_a_table_that_moved_changes_nothing(database_url: str, tmp_path: Path) -> None:
    store = OwnershipStore(create_async_store_engine(database_url))
    try:
        tid = str(uuid.uuid4())
        stale = await store.register(tid, (tmp_path / "c").as_uri(), "_commits", -1)
        ratified = await store.ratify(_row(tid, 1), max_unbackfilled=50, releases=False)
        assert not await store.adopt(stale, [_row(tid, 1), _row(tid, 2)])  # latest is 1 now, not 0
        table, rows = await store.get_commits(tid, None, None, backfilled=True)
        assert (table.latest_version, table.latest_backfilled_version) == (1, 0)
        assert [(r.version, r.file_name) for r in rows] == [(1, ratified.file_name)]
        assert await store.adopt(table, [_row(tid, 2), _row(tid, 3)])  # from the row as it is: adopted
        table, rows = await store.get_commits(tid, None, None, backfilled=True)
        assert (table.latest_version, table.latest_backfilled_version) == (3, 3)
        assert [r.version for r in rows] == [1, 2, 3] and all(r.backfilled_at is not None for r in rows)
    finally:
        await store.close()
        await store.engine.dispose()
