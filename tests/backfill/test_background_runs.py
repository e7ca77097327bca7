"""The background backfiller: it publishes at once and records what it published a moment later (decision 44),
and a process that commits nothing to a busy table leaves it to the lease holder.

Each test runs the real app in this process with the background backfiller on and a mark delay of 2 s, long
enough to see the window on a loaded machine: the files are there, the database still lists the versions as
unpublished, and then the marks land. An explicit backfill and ``stop`` record the pending marks before they
return. (That the marks of many tables share one round trip is a cost: the benchmark's statements per commit.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from client.contract.errors import TooManyUnbackfilledCommitsError
from tests.backfill.test_inprocess import commit
from tests.conftest import make_backend
from tests.inprocess import InProcess
from tests.support import delta_file

DELAY_MS = 2000


@pytest_asyncio.fixture(loop_scope="session", params=["sqlite-local", "postgres-local"])
async def app(request: pytest.FixtureRequest) -> AsyncIterator[InProcess]:
    db, storage = request.param.split("-")
    b = make_backend(request, db, storage, f"marks-{request.param}")
    p = await InProcess.start(b, {"COMMIT_OWNER_BACKFILL_MARK_DELAY_MS": str(DELAY_MS),
                                  "COMMIT_OWNER_GROUP_COMMIT_MAX_ROWS": "64"})  # (group commit on, as served)
    yield p
    await p.stop()


async def _until(what: str, check, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def _marked(p: InProcess, table_id: str) -> int:
    return (await p.store.get_table(table_id)).latest_backfilled_version


@pytest.mark.asyncio(loop_scope="session")
async def test_published_at_once_and_recorded_a_moment_later(app: InProcess) -> None:
    p = app
    tables = [await p.create_table() for _ in range(3)]
    started = time.monotonic()
    for tid, _ in tables:
        await commit(p, tid, 1)
    for tid, loc in tables:
        await _until(f"version 1 of {tid} published", lambda loc=loc: asyncio.to_thread(p.backend.exists,
                                                                                        delta_file(loc, 1)))
    published_after = time.monotonic() - started
    if published_after < DELAY_MS / 1000 * 0.8:  # (a machine too slow to publish within the delay proves nothing)
        assert [await _marked(p, tid) for tid, _ in tables] == [0, 0, 0], "the marks wait for the delay"
        assert [c["version"] for c in (await p.get_commits(tables[0][0]))["commits"]] == [1]
    for tid, _ in tables:
        await _until(f"version 1 of {tid} recorded", lambda tid=tid: _eq(_marked(p, tid), 1))
    assert (await p.get_commits(tables[0][0]))["commits"] == []


def calls(owner: object, method: str, note=lambda kw: time.monotonic()) -> list:  # type: ignore[no-untyped-def,type-arg]
    """``note(keyword arguments)`` of every call of ``owner.method`` from now on, by default when it came (the real
    method still runs)."""
    seen: list = []  # type: ignore[type-arg]
    real = getattr(owner, method)

    async def counted(*args, **kw):  # type: ignore[no-untyped-def]
        seen.append(note(kw))
        return await real(*args, **kw)

    setattr(owner, method, counted)
    return seen


def lease_asks(p: InProcess) -> list[float]:
    """When ``p`` asks the database for a table's backfill lease from now on (the real statement still runs)."""
    return calls(p.store, "acquire_lease")


async def _eq(value, expected: int) -> bool:  # type: ignore[no-untyped-def]
    return await value == expected


@pytest.mark.asyncio(loop_scope="session")
async def test_runs_asked_for_while_a_table_is_being_published_wait_as_one(app: InProcess) -> None:
    """A table's runs take turns (its lock). The commits made while one runs ask for one run afterwards, not a
    run each that waits its turn to read the table again: on a table shared by two processes those queued runs
    fell behind the commits until the cap refused them (decision 58)."""
    p = app
    tid, loc = await p.create_table()
    runs = calls(p.backfiller, "backfill")
    lock = p.backfiller._locks.setdefault(tid, asyncio.Lock())
    async with lock:  # as if a run were publishing the table the whole time
        for v in range(1, 31):
            await commit(p, tid, v)
        await asyncio.sleep(0.3)  # the background loop has seen every ask
        asked = len(runs)
    await _until("version 30 published", lambda: asyncio.to_thread(p.backend.exists, delta_file(loc, 30)))
    assert asked <= 1, f"{asked} runs of one table started while its lock was held"
    assert len(runs) <= 3, f"{len(runs)} runs to publish 30 versions asked for while the table was busy"


@pytest.mark.asyncio(loop_scope="session")
async def test_an_explicit_backfill_and_stop_record_pending_marks_before_they_return(app: InProcess) -> None:
    p = app
    (a, loc_a), (b, loc_b) = await p.create_table(), await p.create_table()
    await commit(p, a, 1)
    await commit(p, b, 1)
    for loc in (loc_a, loc_b):
        await _until("version 1 published", lambda loc=loc: asyncio.to_thread(p.backend.exists, delta_file(loc, 1)))
    t = await p.backfiller.backfill(a, 1)  # already published: it only records the pending mark
    assert t.latest_backfilled_version == 1 and await _marked(p, a) == 1
    assert (await p.get_commits(a))["commits"] == []
    await p.backfiller.stop()
    assert await _marked(p, b) == 1


@pytest.mark.asyncio(loop_scope="session")
async def test_a_process_that_commits_nothing_to_a_busy_table_does_not_poll_its_lease(
    request: pytest.FixtureRequest,
) -> None:
    """Two services on one database: A commits to a table steadily (and holds its lease), B commits nothing to
    it. The table is behind at most moments, by commits A is about to publish; B's sweep must leave it to A,
    not read it and ask for its lease (ten times a second before decision 44, once a second before 59)."""
    b = make_backend(request, "postgres", "local", "marks-two")
    a_app = await InProcess.start(b, {})
    b_app = await InProcess.start(b, {})
    try:
        tid, loc = await a_app.create_table()
        asked = lease_asks(b_app)
        reads = [calls(b_app.store, "get_table"), calls(b_app.store, "get_commits")]
        a_runs = calls(a_app.backfiller, "backfill")
        a_own = calls(a_app.backfiller, "publish_own")  # its commits that published themselves (decision 61)
        started = time.monotonic()
        v = 0
        while time.monotonic() - started < 4.0:
            v += 1
            await commit(a_app, tid, v)
            await asyncio.sleep(0.01)
        busy = len(a_runs) + len(a_own)
        await _until("everything published", lambda: asyncio.to_thread(b.exists, delta_file(loc, v)))
        assert busy >= 10, f"A published its {v} commits in only {busy} runs: not a busy table"
        # B's sweep runs once a second; it never saw an unpublished commit as old as a sweep, so it left the
        # table to A (decision 59): before, it read the table and was refused its lease at every sweep (about
        # 4 reads and 4 asks in 4 s), and earlier still it asked ten times a second (decision 44)
        assert len(asked) <= 1, f"B asked for A's table's lease {len(asked)} times in 4 s"
        sweep_reads = [t for seen in reads for t in seen if t >= started]
        assert len(sweep_reads) <= 2, f"B read A's busy table {len(sweep_reads)} times in 4 s"
    finally:
        await b_app.stop()
        await a_app.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_process_whose_commits_another_publishes_asks_for_the_lease_a_few_times_a_second(
    request: pytest.FixtureRequest,
) -> None:
    """Two services on one database take turns committing to one table (writers of one table on both workers
    of `serve --workers 2`). One holds its lease and publishes every version, the other's included. The other
    asks for the lease again at most once per LEASE_RETRY_SECONDS, however many commits it makes: asking after
    each of its commits (and again for each refusal) was two statements per commit, hundreds a second."""
    from backfill.worker import LEASE_RETRY_SECONDS

    b = make_backend(request, "postgres", "local", "marks-both")
    apps = [await InProcess.start(b, {}), await InProcess.start(b, {})]
    try:
        tid, loc = await apps[0].create_table()
        asked = [lease_asks(p) for p in apps]
        started = time.monotonic()
        v = 0
        while time.monotonic() - started < 3.0:
            v += 1
            while True:  # both services share this test's one thread, the backfill too: on a loaded machine it
                try:     # may fall behind, and the cap's refusal asks the writer to wait and retry, as clients do
                    await commit(apps[v % 2], tid, v)
                    break
                except TooManyUnbackfilledCommitsError:
                    await asyncio.sleep(0.05)
        elapsed = time.monotonic() - started
        await _until(f"version {v} published", lambda: asyncio.to_thread(b.exists, delta_file(loc, v)))
        assert all(b.exists(delta_file(loc, n)) for n in range(1, v + 1))
        bound = elapsed / LEASE_RETRY_SECONDS + 2 * (elapsed + 1) + 4  # looks again, sweeps, first asks
        assert v / 2 > bound, f"too few commits ({v}) in {elapsed:.1f} s to tell asking per commit from the bound"
        counts = [len(a) for a in asked]
        assert sum(counts) <= bound, f"{counts} asks for the lease for {v} commits in {elapsed:.1f} s (bound {bound:.0f})"
    finally:
        for p in apps:
            await p.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_standalone_worker_sweeps_every_table_behind_and_a_serving_process_only_the_stale_ones(
    request: pytest.FixtureRequest,
) -> None:
    """Decision 59: the sweep of a process that ratifies leaves a backlog younger than a sweep to the process
    whose commits made it; `backfill-worker` ratifies nothing, so its sweep takes every table behind at once
    (else a deployment that publishes only through it would wait a second more for every version)."""
    from backfill.worker import SWEEP_SECONDS, Backfiller

    b = make_backend(request, "postgres", "local", "sweep-young")
    api = await InProcess.start(b, {"COMMIT_OWNER_BACKFILL": "false"})  # `serve --no-backfill`
    try:
        serving = Backfiller(api.store, api.storage, api.settings, background=True)
        standalone = Backfiller(api.store, api.storage, api.settings, background=True, ratifies=False)
        asked = calls(api.store, "tables_behind", note=lambda kw: kw)
        await serving.start()
        await asyncio.sleep(SWEEP_SECONDS * 1.5)  # one sweep of the serving process
        await serving.stop()
        assert asked and all(isinstance(kw.get("ratified_before"), int) for kw in asked), asked
        asked.clear()
        tid, loc = await api.create_table()
        for v in range(1, 4):
            await commit(api, tid, v)
        await standalone.start()
        await _until("version 3 published by the standalone worker",
                     lambda: asyncio.to_thread(b.exists, delta_file(loc, 3)))
        await standalone.stop()
        assert asked and all(kw.get("ratified_before") is None for kw in asked), asked
    finally:
        await api.stop()

