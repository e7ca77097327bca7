"""The store's reads for the UI, over SQLite and PostgreSQL: keyset pages that cover every table once, in
order; the permission filter in SQL with the ``covers`` rule (a path-segment boundary; ``%`` and ``_`` in a
prefix are plain characters); search by location prefix and by name; a table's commits newest first; commits
per minute with their publication lag."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from coordinator.core.catalog import new_name
from coordinator.store import CommitRow, OwnershipStore, create_engine, now_ms
from coordinator.store.browse import BrowseStore
from coordinator.store.names import NameStore
from coordinator.store.rows import CatalogRow, SchemaRow
from coordinator.views.pages import location_prefix
from tests.conftest import make_backend

LOCATIONS = ["file:///w/a", "file:///w/a_b/t", "file:///w/a/t1", "file:///w/a/t2", "file:///w/ab", "file:///w/axb/t",
             "file:///w/b%/t", "file:///w/bz/t"]


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[tuple[OwnershipStore, BrowseStore, dict[str, str]]]:
    url = make_backend(request, request.param, "local", f"ui-store-{request.param}").database_url
    engine = create_engine(url)
    store = OwnershipStore(engine)
    names = NameStore(store)
    ids = {}
    try:
        ts = now_ms()
        await names.create_catalog(CatalogRow("main", str(uuid.uuid4()), None, {}, ts, ts))
        await names.create_schema(SchemaRow("main", "s", str(uuid.uuid4()), None, {}, ts, ts))
        for i, loc in enumerate(LOCATIONS):
            tid = str(uuid.uuid4())
            name = dataclasses.replace(new_name("main", "s", f"t{i}_%x" if i == 3 else f"t{i}", "EXTERNAL"),
                                       table_id=tid) if i % 2 else None
            await store.register(tid, loc, "_commits", 0, name=name)
            ids[loc] = tid
        yield store, BrowseStore(store), ids
    finally:
        await engine.dispose()


async def _all_pages(browse: BrowseStore, size: int, scope: list[str] | None, **kw: object) -> list[str]:
    seen: list[str] = []
    after = None
    while True:
        page = await browse.located_page(after, size, scope, **kw)  # type: ignore[arg-type]
        seen += [t.location for t in page]
        if len(page) < size:
            return seen
        after = page[-1].location


async def test_keyset_pages_cover_every_table_once_in_location_order(stores: tuple) -> None:
    _, browse, _ = stores
    for size in (1, 3, 100):
        assert await _all_pages(browse, size, None) == sorted(LOCATIONS)


async def test_the_scope_covers_on_path_segment_boundaries_and_reads_percent_and_underscore_literally(
        stores: tuple) -> None:
    _, browse, _ = stores
    assert await _all_pages(browse, 2, ["file:///w/a"]) == ["file:///w/a", "file:///w/a/t1", "file:///w/a/t2"]
    assert await _all_pages(browse, 2, ["file:///w/a_b"]) == ["file:///w/a_b/t"]
    assert await _all_pages(browse, 2, ["file:///w/b%"]) == ["file:///w/b%/t"]
    assert await _all_pages(browse, 2, ["file:///w/a/t2", "file:///w/bz"]) == ["file:///w/a/t2", "file:///w/bz/t"]
    assert await _all_pages(browse, 2, []) == []
    assert await _all_pages(browse, 2, ["*"]) == sorted(LOCATIONS)


async def test_search_by_location_prefix_and_by_name(stores: tuple) -> None:
    _, browse, _ = stores
    assert await _all_pages(browse, 2, None, location_prefix="file:///w/a_") == ["file:///w/a_b/t"]
    assert await _all_pages(browse, 2, None, name_prefix="t3_%") == ["file:///w/a/t2"]
    assert await _all_pages(browse, 2, None, name_prefix="main.s.t1") == ["file:///w/a_b/t"]
    assert await _all_pages(browse, 2, None, unnamed=True) == [LOCATIONS[i] for i in (0, 2, 4, 6)]
    assert await _all_pages(browse, 2, ["file:///w/a"], name_prefix="main.") == ["file:///w/a/t2"]
    # what the search box makes of a location root: every table under it, not a name that starts "file:///"
    for text in ("file:///", "/", "file://"):
        prefix = location_prefix(text)
        assert await _all_pages(browse, 2, None, location_prefix=prefix) == sorted(LOCATIONS), text
    assert location_prefix("s3://") == "s3://" and await _all_pages(browse, 2, None, location_prefix="s3://") == []
    assert location_prefix("file:///w/a") == "file:///w/a" and location_prefix("sales") is None
    counts, unnamed = await browse.catalog_counts(["file:///w/a"])
    assert counts == {"main": 1} and unnamed == 2
    named = await browse.named_page("main", "s", "t1", 10, None)
    assert [t.name for t in named] == ["main.s.t3_%x", "main.s.t5", "main.s.t7"]


async def test_commits_newest_first_and_per_minute_with_their_publication_lag(stores: tuple) -> None:
    store, browse, ids = stores
    tid = ids["file:///w/a"]
    base = now_ms()
    for v in range(2, 7):
        key = str(uuid.uuid4())
        row = CommitRow(tid, v, f"{v:020d}.{key}.json", key, 10, base, base + v, "0" * 64, base)
        assert await store.ratify(row, max_unbackfilled=50, releases=False) == row
    await store.mark_backfilled(tid, 4)
    assert [c.version for c in await browse.commits_page(tid, None, 3)] == [6, 5, 4]
    assert [c.version for c in await browse.commits_page(tid, 4, 10)] == [3, 2]
    minutes = await browse.minutes(base - 60_000, None, tid)
    assert sum(m.commits for m in minutes) == 5 and sum(m.unpublished for m in minutes) == 2
    assert all(m.lag_max_ms is not None and m.lag_max_ms >= 0 for m in minutes if m.commits > m.unpublished)
    owner = await browse.minutes(base - 60_000, ["file:///w/a"])
    assert sum(m.commits for m in owner) == 5
    assert await browse.minutes(base - 60_000, ["file:///w/bz"]) == []
    [behind] = await browse.most_behind(10, None)
    assert behind.table_id == tid and behind.unbackfilled == 2


async def test_one_table_s_window_is_found_walking_back_from_its_newest_commit(stores: tuple,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from coordinator.store import browse as browse_module

    store, browse, ids = stores
    tid = ids["file:///w/bz/t"]
    now = now_ms()
    times = {2: now - 3_600_000, 3: now - 3_000_000, 4: now - 90_000, 5: now - 30_000, 6: now, 7: now}
    for v, at in times.items():
        key = str(uuid.uuid4())
        row = CommitRow(tid, v, f"{v:020d}.{key}.json", key, 10, at, now + v, "0" * 64, at)
        assert await store.ratify(row, max_unbackfilled=50, releases=False) == row
    for step in (1, 2, 3, 2000):  # the walk's step changes how many rows it reads, never the answer
        monkeypatch.setattr(browse_module, "WALK_STEP", step)
        assert sum(m.commits for m in await browse.minutes(now - 120_000, None, tid)) == 4, step
        assert sum(m.commits for m in await browse.minutes(now - 7_200_000, None, tid)) == 6, step
        assert await browse.minutes(now + 60_000, None, tid) == [], step
    assert await browse.minutes(now - 120_000, None, ids["file:///w/a_b/t"]) == []  # no commit at all
