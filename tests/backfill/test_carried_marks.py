"""A table's next ratification carries the backfill mark its process has yet to record (decision 62).

The real app runs in this process on a real database and storage, its timed flush of the marks set a minute
away: whatever the database learns of a publication within a test, it learns from a ratification. Read
straight from the database: the table row's published version, and each commit row's mark and bytes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import create_engine, text

from coordinator.store.engine import sync_url
from tests.conftest import make_backend
from tests.inprocess import InProcess
from tests.support import actions, delta_file, ndjson
from tests.test_group_commit import GROUPED, one_batch

NEVER_MS = "60000"  # the timed flush of the marks: never, within a test


@pytest_asyncio.fixture(loop_scope="session", params=["sqlite-s3", "postgres-local"])
async def backend(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    db, storage = request.param.split("-")
    return make_backend(request, db, storage, f"carry-{request.param}")


def db_marks(database_url: str, table_id: str) -> tuple[int, dict[int, tuple[bool, bool]]]:
    """The table row's latest backfilled version, and version -> (marked backfilled, bytes still kept)."""
    engine = create_engine(sync_url(database_url))
    try:
        with engine.connect() as conn:
            published = conn.execute(text("SELECT latest_backfilled_version FROM owned_tables WHERE table_id = :t"),
                                     {"t": table_id}).scalar_one()
            rows = conn.execute(text("SELECT version, backfilled_at IS NOT NULL, body IS NOT NULL FROM commits "
                                     "WHERE table_id = :t"), {"t": table_id}).all()
            return int(published), {int(v): (bool(m), bool(b)) for v, m, b in rows}
    finally:
        engine.dispose()


async def _marks(p: InProcess, table_id: str) -> tuple[int, dict[int, tuple[bool, bool]]]:
    return await asyncio.to_thread(db_marks, p.backend.database_url, table_id)


async def _published(p: InProcess, table_id: str, loc: str, version: int) -> None:
    """Until this process published ``version`` (its mark pending): the file is there, the database unaware."""
    deadline = time.monotonic() + 30
    while p.backfiller.mark_to_carry(table_id) < version:
        assert time.monotonic() < deadline, f"version {version} was never published"
        await asyncio.sleep(0.02)
    assert p.backend.exists(delta_file(loc, version))


async def _on_storage(p: InProcess, loc: str, version: int) -> None:
    """Until ``version``'s file is published, whether or not its mark is recorded yet: with a short flush delay the
    pending mark can be recorded between two looks, so the mark is not what to wait for."""
    deadline = time.monotonic() + 30
    while not p.backend.exists(delta_file(loc, version)):
        assert time.monotonic() < deadline, f"version {version} was never published"
        await asyncio.sleep(0.02)


async def _start(backend: Any, **env: str) -> InProcess:
    return await InProcess.start(backend, {"COMMIT_OWNER_BACKFILL_MARK_DELAY_MS": NEVER_MS, **env})


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("publish_with_commit", ["false", "true"])
async def test_the_next_commit_records_what_was_published_before_it(backend, publish_with_commit: str) -> None:  # type: ignore[no-untyped-def]
    a = await _start(backend, COMMIT_OWNER_PUBLISH_WITH_COMMIT=publish_with_commit)
    try:
        tid, loc = await a.create_table()
        await a.commit_ok(tid, 1)
        await _published(a, tid, loc, 1)
        assert await _marks(a, tid) == (0, {1: (False, True)}), "the mark waits (the flush is a minute away)"

        await a.commit_ok(tid, 2)
        published, rows = await _marks(a, tid)
        assert published >= 1 and rows[1] == (True, False), "version 2's ratification recorded version 1's mark"
        assert rows[2] == (False, True) or published == 2
        assert a.backfiller.mark_to_carry(tid) in (-1, 2), "nothing of version 1 is left to record"
        await _published(a, tid, loc, 2)
        await a.commit_ok(tid, 3)
        published, rows = await _marks(a, tid)
        assert published >= 2 and rows[2] == (True, False)
        assert a.backend.read(delta_file(loc, 2)), "a version is marked only once its file is there"
    finally:
        await a.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_refused_commit_carries_no_mark_and_changes_nothing(backend) -> None:  # type: ignore[no-untyped-def]
    a = await _start(backend)
    # Another process, which publishes nothing of this table. Without a backfiller: one would ask A, the lease
    # holder, to publish its commit at once, and A would record its marks then (decision 66).
    b = await _start(backend, COMMIT_OWNER_BACKFILL="false")
    a_running = True
    try:
        tid, loc = await a.create_table()
        await a.commit_ok(tid, 1)
        await _published(a, tid, loc, 1)
        before = await _marks(a, tid), a.backend.snapshot(loc)

        status, reply = await a.commit(tid, 1, ndjson(actions(tag="taken")))
        assert status == 409 and reply["error"]["code"] == "COMMIT_VERSION_CONFLICT", reply
        status, reply = await a.commit(tid, 3, ndjson(actions(tag="gap")))
        assert status == 400 and "Expected version: 2" in reply["error"]["message"], reply
        assert (await _marks(a, tid), a.backend.snapshot(loc)) == before, "refusals record nothing"
        assert a.backfiller.mark_to_carry(tid) == 1, "the mark still waits in its process"

        await b.commit_ok(tid, 2)  # a ratification by a process that did not publish carries no mark
        published, rows = await _marks(a, tid)
        assert published == 0 and rows[1] == (False, True)
        a_running = False
        await a.stop()  # stopping records what is left
        published, rows = await _marks(b, tid)
        assert published >= 1 and rows[1] == (True, False)
    finally:
        await b.stop()
        if a_running:
            await a.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_commits_sharing_a_round_trip_each_carry_their_own_mark(backend) -> None:  # type: ignore[no-untyped-def]
    a = await _start(backend, **GROUPED)
    try:
        blocker, _ = await a.create_table()
        tables = [await a.create_table() for _ in range(3)]
        for t, loc in tables:
            await a.commit_ok(t, 1)
            await _published(a, t, loc, 1)
        idle, idle_loc = await a.create_table()  # committed to in the batch with no mark to carry
        answers = await one_batch(a, blocker, [*(a.commit(t, 2, ndjson(actions())) for t, _ in tables),
                                               a.commit(idle, 1, ndjson(actions()))])
        assert all(status == 200 for status, _ in answers), answers
        for t, _ in tables:
            published, rows = await _marks(a, t)
            assert published >= 1 and rows[1] == (True, False), (t, published, rows)
            assert a.backfiller.mark_to_carry(t) in (-1, 2)
        assert await _marks(a, idle) == (0, {1: (False, True)})
    finally:
        await a.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_mark_far_ahead_of_the_recorded_one_is_recorded_without_waiting_for_a_ratification(
        backend, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A table another process commits to as well: the publishing process's ratifications carry its mark only now
    and then, so the timed flush leaves a mark for them only while it is fewer than ``CARRY_VERSIONS`` past the
    recorded one (else the backlog grows until commits are refused). The carry window, the sweep and the idle
    lease's return (which records the mark) are set to a minute here: only that bound can record the mark
    within the test."""
    from backfill import worker

    monkeypatch.setattr(worker, "CARRY_SECONDS", 60.0)
    monkeypatch.setattr(worker, "SWEEP_SECONDS", 60.0)
    a = await _start(backend, COMMIT_OWNER_BACKFILL_MARK_DELAY_MS="20")
    b = await _start(backend, COMMIT_OWNER_BACKFILL_MARK_DELAY_MS="20")  # commits; cannot publish (a's lease)
    try:
        tid, loc = await a.create_table()
        await a.commit_ok(tid, 1)
        await _on_storage(a, loc, 1)
        await a.commit_ok(tid, 2)  # carries 1 unless the flush recorded it first: recorded either way
        await _published(a, tid, loc, 2)
        assert (await _marks(a, tid))[0] == 1
        far = 2 + worker.CARRY_VERSIONS + 2
        for v in range(3, far):
            await b.commit_ok(tid, v)
        await a.commit_ok(tid, far)  # staged (a never saw b's versions); its run publishes them all
        await _on_storage(a, loc, far)
        deadline = time.monotonic() + 30
        while (await _marks(a, tid))[0] < far:
            assert time.monotonic() < deadline, "a mark far ahead of the recorded one waited for a ratification"
            await asyncio.sleep(0.05)
        published, rows = await _marks(a, tid)
        assert all(rows[v] == (True, False) for v in range(1, far + 1)), rows
    finally:
        await b.stop()
        await a.stop()
