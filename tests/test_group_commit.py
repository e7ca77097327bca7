"""Group commit: ratifications of different tables that arrive together share one database round trip.

On every backend with real apps in this process. To make proposals share a round trip on purpose, a test
holds a database lock from outside (PostgreSQL: one table row ``FOR UPDATE``; SQLite: ``BEGIN IMMEDIATE``)
so that one proposal's round trip waits in the database; the proposals sent meanwhile queue up and leave
together once the lock is let go. Each must still be judged on its own.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from client.contract.errors import CommitVersionConflictError, UnavailableError
from coordinator.store import CommitRow, OwnershipStore, now_ms
from coordinator.store import create_engine as create_async_store_engine
from coordinator.store.engine import sync_url
from tests.conftest import make_backend
from tests.inprocess import InProcess
from tests.support import Backend, actions, db_commit_files, ndjson

GROUPED = {"COMMIT_OWNER_GROUP_COMMIT_MAX_ROWS": "64"}


def db_state(database_url: str, table_id: str) -> tuple[Any, list[Any]]:
    """The table's row (None when it has none) and its commit rows, straight from the database."""
    engine = create_engine(sync_url(database_url))
    try:
        with engine.connect() as conn:
            table = conn.execute(text("SELECT latest_version, last_commit_timestamp, accepting, status "
                                      "FROM owned_tables WHERE table_id = :t"), {"t": table_id}).first()
            rows = conn.execute(text("SELECT version, file_name, idempotency_key, content_sha256 FROM commits "
                                     "WHERE table_id = :t ORDER BY version"), {"t": table_id}).all()
            return (tuple(table) if table is not None else None), [tuple(r) for r in rows]
    finally:
        engine.dispose()


class Blocker:
    """Holds a write lock in the database from outside the app, in a thread (the app runs on this loop).

    SQLite: the whole file (``BEGIN IMMEDIATE``). PostgreSQL: the commits table in EXCLUSIVE mode (every
    ratification's INSERT waits, reads go on), or with ``row=True`` one table's row ``FOR UPDATE`` (which
    group commit skips rather than waits for)."""

    def __init__(self, backend: Backend, table_id: str, *, row: bool = False) -> None:
        self.backend, self.table_id, self.row = backend, table_id, row
        self._conn: Any = None

    def _hold(self) -> None:
        u = make_url(self.backend.database_url)
        if u.drivername.startswith("sqlite"):
            # Every writer of the file waits (busy_timeout) until this transaction ends.
            self._conn = sqlite3.connect(u.database, isolation_level=None, check_same_thread=False)
            self._conn.execute("BEGIN IMMEDIATE")
            return
        import psycopg

        self._conn = psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database)
        if self.row:
            self._conn.execute("SELECT 1 FROM owned_tables WHERE table_id = %s FOR UPDATE", (self.table_id,))
        else:
            self._conn.execute("LOCK TABLE commits IN EXCLUSIVE MODE")

    def _let_go(self) -> None:
        if isinstance(self._conn, sqlite3.Connection):
            self._conn.execute("COMMIT")
        else:
            self._conn.commit()
        self._conn.close()

    async def hold(self) -> None:
        await asyncio.to_thread(self._hold)

    async def let_go(self) -> None:
        await asyncio.to_thread(self._let_go)


async def until(pred: Any, what: str, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@pytest_asyncio.fixture
async def grouped(inproc_backend: Backend) -> AsyncIterator[InProcess]:
    """A fresh app with group commit on, on every backend."""
    app = await InProcess.start(inproc_backend, GROUPED)
    yield app
    await app.stop()


async def one_batch(app: InProcess, blocker_table: str, requests: list[Any]) -> list[Any]:
    """Send ``requests`` (coroutines) while a round trip of ``blocker_table`` waits in the database, so that
    they all queue and leave together; returns their answers and the blocked commit's answer last."""
    group = app.store.ratify_group
    assert group is not None
    blocker = Blocker(app.backend, blocker_table)
    await blocker.hold()
    trips = group.round_trips
    try:
        first = asyncio.ensure_future(app.commit(blocker_table, 1, ndjson(actions())))
        await until(lambda: group.round_trips == trips + 1 and group.pending == 0, "the blocked round trip")
        tasks = [asyncio.ensure_future(r) for r in requests]
        await until(lambda: group.pending == len(requests), f"{len(requests)} queued proposals")
    finally:
        await blocker.let_go()
    answers = await asyncio.gather(*tasks, first)
    assert group.round_trips == trips + 2, "the queued proposals left in one round trip"
    assert group.largest >= len(requests)
    return list(answers)


async def test_many_tables_committing_together_land_exactly_once(grouped: InProcess) -> None:
    s = grouped
    x, _ = await s.create_table()
    tables = [await s.create_table() for _ in range(16)]
    answers = await one_batch(s, x, [s.commit(t, 1, ndjson(actions())) for t, _ in tables])
    assert all(status == 200 for status, _ in answers), answers
    # then free-running: every table's writer commits versions 2..4 at once with the others
    acked = {t: [(1, str(a["fileName"]))] for (t, _), (_, a) in zip(tables, answers[:-1], strict=True)}

    async def writer(table_id: str) -> None:
        for v in (2, 3, 4):
            status, reply = await s.commit(table_id, v, ndjson(actions()))
            assert status == 200, reply
            acked[table_id].append((reply["version"], reply["fileName"]))

    await asyncio.gather(*(writer(t) for t, _ in tables))
    for table_id, loc in tables:
        assert sorted(v for v, _ in acked[table_id]) == [1, 2, 3, 4]
        assert await asyncio.to_thread(db_commit_files, s.backend.database_url, table_id) == dict(acked[table_id])
        staged = await asyncio.to_thread(s.backend.list, f"{loc}/_delta_log/_commits")
        assert set(staged) <= {name for _, name in acked[table_id]}  # no orphans (published ones may be gone)
        assert (await s.get_commits(table_id))["latestTableVersion"] == 4


async def test_one_batch_answers_each_proposal_on_its_own_and_refusals_change_nothing(
        grouped: InProcess) -> None:
    s = grouped
    other = await InProcess.start(s.backend, GROUPED)  # another process: its commits are unknown to ``s``
    try:
        x, _ = await s.create_table()
        good = [await s.create_table() for _ in range(3)]
        conflict, conflict_loc = await s.create_table()
        replay, replay_loc = await s.create_table()
        reused, reused_loc = await s.create_table()
        gone, gone_loc = await s.create_table()
        replay_key, reused_key = str(uuid.uuid4()), str(uuid.uuid4())
        replay_body = ndjson(actions())
        await other.commit_ok(conflict, 1)
        status, replayed_first = await other.commit(replay, 1, replay_body, replay_key)
        assert status == 200, replayed_first
        status, reply = await other.commit(reused, 1, ndjson(actions()), reused_key)
        assert status == 200, reply
        for t in (conflict, replay, reused):
            await other.backfill_to(t, 1)  # nothing left to publish: the snapshots below stay still
        await s.service.reads.location_of(gone)  # ``s`` knows where the table lives, then it is forgotten
        assert await s.store.forget_registration(gone)
        before = {t: (await asyncio.to_thread(db_state, s.backend.database_url, t),
                      await asyncio.to_thread(s.backend.snapshot, loc))
                  for t, loc in ((conflict, conflict_loc), (replay, replay_loc), (reused, reused_loc),
                                 (gone, gone_loc))}

        answers = await one_batch(s, x, [
            *(s.commit(t, 1, ndjson(actions())) for t, _ in good),
            s.commit(conflict, 1, ndjson(actions())),
            s.commit(replay, 1, replay_body, replay_key),
            s.commit(reused, 2, ndjson(actions()), reused_key),
            s.commit(gone, 1, ndjson(actions())),
        ])
        *good_answers, conflicted, replayed, reused_answer, gone_answer, blocked = answers
        assert blocked[0] == 200, blocked
        for (t, _), (status, reply) in zip(good, good_answers, strict=True):
            assert status == 200 and reply["version"] == 1, reply
            assert await asyncio.to_thread(db_commit_files, s.backend.database_url, t) == {1: reply["fileName"]}
        assert conflicted[0] == 409, conflicted
        assert (conflicted[1]["error"]["code"], conflicted[1]["error"]["latestTableVersion"]) == \
            ("COMMIT_VERSION_CONFLICT", 1)
        assert replayed == (200, replayed_first)
        assert reused_answer[0] == 422 and reused_answer[1]["error"]["code"] == "IDEMPOTENCY_KEY_REUSED", reused_answer
        assert gone_answer[0] == 404 and gone_answer[1]["error"]["code"] == "TABLE_NOT_FOUND", gone_answer
        for t, (state, files) in before.items():
            assert await asyncio.to_thread(db_state, s.backend.database_url, t) == state
            loc = {conflict: conflict_loc, replay: replay_loc, reused: reused_loc, gone: gone_loc}[t]
            assert await asyncio.to_thread(s.backend.snapshot, loc) == files
    finally:
        await other.stop()


async def test_a_table_row_held_elsewhere_holds_up_only_that_tables_commit(grouped: InProcess) -> None:
    """A table row another transaction holds (a stuck writer, an operator's session) is skipped by the batch
    it is in: the batch's other proposals are answered at once, and later round trips too, while that one
    proposal waits for the row on its own and lands once the row is let go."""
    s = grouped
    if s.store.is_sqlite:
        pytest.skip("SQLite has no row locks: an outside writer holds the whole file (one_batch above)")
    group = s.store.ratify_group
    assert group is not None
    x, _ = await s.create_table()
    held, held_loc = await s.create_table()
    others = [await s.create_table() for _ in range(8)]
    row_lock, table_lock = Blocker(s.backend, held, row=True), Blocker(s.backend, x)
    await row_lock.hold()
    try:
        # the held table's proposal and the others' leave in one batch (queued behind x's blocked round trip)
        await table_lock.hold()
        trips = group.round_trips
        try:
            first = asyncio.ensure_future(s.commit(x, 1, ndjson(actions())))
            await until(lambda: group.round_trips == trips + 1 and group.pending == 0, "the blocked round trip")
            stuck = asyncio.ensure_future(s.commit(held, 1, ndjson(actions())))
            tasks = [asyncio.ensure_future(s.commit(t, 1, ndjson(actions()))) for t, _ in others]
            await until(lambda: group.pending == 9, "9 queued proposals")
        finally:
            await table_lock.let_go()
        answers = await asyncio.gather(*tasks, first)
        assert all(status == 200 for status, _ in answers), answers
        assert group.largest == 9  # the held table's proposal was in the batch, and was skipped
        # the next round trips are not held up either
        more = await asyncio.gather(*(s.commit(t, 2, ndjson(actions())) for t, _ in others))
        assert all(status == 200 for status, _ in more), more
        assert not stuck.done()
        assert await asyncio.to_thread(db_commit_files, s.backend.database_url, held) == {}
    finally:
        await row_lock.let_go()
    status, reply = await stuck
    assert (status, reply["version"]) == (200, 1), reply
    assert await asyncio.to_thread(db_commit_files, s.backend.database_url, held) == {1: reply["fileName"]}
    for (t, _), (_, one), (_, two) in zip(others, answers, more, strict=False):
        assert await asyncio.to_thread(db_commit_files, s.backend.database_url, t) == \
            {1: one["fileName"], 2: two["fileName"]}


async def test_a_lone_commit_waiting_for_a_held_row_does_not_hold_up_the_group(grouped: InProcess) -> None:
    """The first proposal to find the group idle leads alone; when its table row is held elsewhere it is
    skipped too and waits on its own, so the proposals arriving after it are not queued behind it."""
    s = grouped
    if s.store.is_sqlite:
        pytest.skip("SQLite has no row locks: an outside writer holds the whole file (one_batch above)")
    group = s.store.ratify_group
    assert group is not None
    held, _ = await s.create_table()
    others = [await s.create_table() for _ in range(4)]
    row_lock = Blocker(s.backend, held, row=True)
    await row_lock.hold()
    try:
        trips = group.round_trips
        stuck = asyncio.ensure_future(s.commit(held, 1, ndjson(actions())))
        await until(lambda: group.round_trips == trips + 1, "the lone round trip")
        # bounded: were the others queued behind the waiting leader, they would wait for its statement timeout
        answers = await asyncio.wait_for(asyncio.gather(*(s.commit(t, 1, ndjson(actions())) for t, _ in others)),
                                         15)
        assert all(status == 200 for status, _ in answers), answers
        assert not stuck.done()
    finally:
        await row_lock.let_go()
    status, reply = await stuck
    assert (status, reply["version"]) == (200, 1), reply
    assert await asyncio.to_thread(db_commit_files, s.backend.database_url, held) == {1: reply["fileName"]}


async def test_a_batch_holds_at_most_the_configured_number_of_proposals(inproc_backend: Backend) -> None:
    s = await InProcess.start(inproc_backend, {"COMMIT_OWNER_GROUP_COMMIT_MAX_ROWS": "4"})
    try:
        group = s.store.ratify_group
        assert group is not None
        x, _ = await s.create_table()
        tables = [await s.create_table() for _ in range(10)]
        blocker = Blocker(s.backend, x)
        await blocker.hold()
        trips = group.round_trips
        try:
            first = asyncio.ensure_future(s.commit(x, 1, ndjson(actions())))
            await until(lambda: group.round_trips == trips + 1 and group.pending == 0, "the blocked round trip")
            tasks = [asyncio.ensure_future(s.commit(t, 1, ndjson(actions()))) for t, _ in tables]
            await until(lambda: group.pending == 10, "10 queued proposals")
        finally:
            await blocker.let_go()
        answers = await asyncio.gather(*tasks, first)
        assert all(status == 200 for status, _ in answers), answers
        assert group.largest == 4 and group.round_trips == trips + 1 + 3  # 4 + 4 + 2
    finally:
        await s.stop()


# -- the store alone, on a database of its own (nothing else running on it) --------------------------------

@pytest.fixture(params=["sqlite", "postgres"])
def own_database(request: pytest.FixtureRequest) -> str:
    return make_backend(request, request.param, "local", f"group-{request.param}").database_url


_ticks = itertools.count(1)


def commit_row(table_id: str, version: int, key: str | None = None) -> CommitRow:
    key = key or str(uuid.uuid4())
    return CommitRow(table_id=table_id, version=version, file_name=f"{version:020d}.{key}.json",
                     idempotency_key=key, file_size=10, file_modification_time=now_ms(),
                     commit_timestamp=now_ms() + next(_ticks), content_sha256="0" * 64, ratified_at=now_ms())


async def test_a_lone_commit_takes_one_round_trip(own_database: str, tmp_path: Any) -> None:
    engine = create_async_store_engine(own_database)
    store = OwnershipStore(engine, group_max_rows=64)
    statements: list[str] = []
    ends: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda _c, _cur, sql, *_a: statements.append(sql))
    event.listen(engine.sync_engine, "commit", lambda _c: ends.append("commit"))
    try:
        table_id = str(uuid.uuid4())
        await store.register(table_id, str(tmp_path / "t"), "_commits", 0)
        statements.clear(), ends.clear()
        row = commit_row(table_id, 2)
        assert await store.ratify(row, max_unbackfilled=50, releases=False) == row
        group = store.ratify_group
        assert group is not None and (group.round_trips, group.largest) == (1, 1)
        if store.is_sqlite:  # one transaction: the UPDATE and the INSERT, then COMMIT
            assert len(statements) == 2 and ends == ["commit"], statements
        else:  # one statement in autocommit: no BEGIN, no COMMIT
            assert len(statements) == 1 and ends == [], statements
        assert (await store.get_table(table_id)).latest_version == 2
    finally:
        await engine.dispose()


async def test_a_key_violation_in_a_batch_fails_no_other_proposal(own_database: str, tmp_path: Any) -> None:
    """A commit row the table's row does not account for (only a writer around the owner could leave one)
    makes the batch's INSERT violate the key: the database undoes the batch, each proposal is judged alone."""
    engine = create_async_store_engine(own_database)
    store = OwnershipStore(engine, group_max_rows=64)
    try:
        ids = [str(uuid.uuid4()) for _ in range(4)]
        for i, t in enumerate(ids):
            await store.register(t, str(tmp_path / f"t{i}"), "_commits", 0)
        stray = commit_row(ids[2], 2)
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO commits (table_id, version, file_name, idempotency_key, "
                                    "file_size, file_modification_time, commit_timestamp, content_sha256, "
                                    "ratified_at) VALUES (:t, 2, :f, :k, 1, 1, 1, :s, 1)"),
                               {"t": ids[2], "f": stray.file_name, "k": stray.idempotency_key, "s": "1" * 64})
        rows = [commit_row(t, 2) for t in ids]
        # The first proposal finds the group idle and goes alone; the other three queue behind it and share.
        results = await asyncio.gather(*(store.ratify(r, max_unbackfilled=50, releases=False) for r in rows),
                                       return_exceptions=True)
        group = store.ratify_group
        # 1 + the shared one + the stray's two further attempts alone (nothing refuses it, yet it cannot land)
        assert group is not None and (group.round_trips, group.largest) == (4, 3)
        assert [results[i] for i in (0, 1, 3)] == [rows[i] for i in (0, 1, 3)]
        # the stray row's table is refused (its row and the commit rows disagree: retryable), and only it
        assert isinstance(results[2], UnavailableError), results[2]
        for t in (ids[0], ids[1], ids[3]):
            assert (await store.get_table(t)).latest_version == 2
        assert (await store.get_table(ids[2])).latest_version == 1
    finally:
        await engine.dispose()


async def test_proposals_of_one_table_arriving_together_are_judged_one_after_the_other(
        own_database: str, tmp_path: Any) -> None:
    engine = create_async_store_engine(own_database)
    store = OwnershipStore(engine, group_max_rows=64)
    try:
        table_id, other = str(uuid.uuid4()), str(uuid.uuid4())
        await store.register(table_id, str(tmp_path / "t"), "_commits", 0)
        await store.register(other, str(tmp_path / "o"), "_commits", 0)
        first, rival, third, elsewhere = (commit_row(table_id, 2), commit_row(table_id, 2), commit_row(table_id, 3),
                                          commit_row(other, 2))
        results = await asyncio.gather(*(store.ratify(r, max_unbackfilled=50, releases=False)
                                         for r in (first, rival, third, elsewhere)), return_exceptions=True)
        group = store.ratify_group
        assert group is not None and group.round_trips == 3 and group.largest == 2  # {first, elsewhere}, ...
        assert results[0] == first and results[2] == third and results[3] == elsewhere
        assert isinstance(results[1], CommitVersionConflictError), results[1]
        rows = {r.version: r.idempotency_key for r in await store.recent_commits(table_id)}
        assert rows == {2: first.idempotency_key, 3: third.idempotency_key}
    finally:
        await engine.dispose()
