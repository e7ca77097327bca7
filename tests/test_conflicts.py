"""Racing writers: a version conflict carries the commits the loser has not seen, and the client rebases on them.

On every backend, with the app in this process (real SQLite file or PostgreSQL database, local disk or the moto
S3 server): two writers race for one version and the loser's 409 names exactly the winner's commit; a writer
further behind gets every commit from the version it asked for (published or not), at most the service's
bound, and a flag that says whether that is all of them; a refused commit changes neither the database nor
storage; and Python writers racing through the client's committer each land exactly once, on contiguous
versions, rebasing on the carried commits without asking the owner again.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

from client.snapshot import load_snapshot
from client.write import write_table
from coordinator.core.reads import UNSEEN_COMMITS_LIMIT
from tests.inprocess import InProcess
from tests.support import actions, db_commit_files, delta_file, ndjson

COMMIT_KEYS = {"version", "fileName", "path", "fileSize", "fileModificationTime", "commitTimestamp"}


def unseen(reply: dict[str, Any]) -> tuple[list[int], list[str], bool, int]:
    err = reply["error"]
    assert (err["code"], err["retryable"], err["conflict"]) == ("COMMIT_VERSION_CONFLICT", True, True), err
    assert all(set(c) == COMMIT_KEYS for c in err["unseenCommits"]), err
    return ([c["version"] for c in err["unseenCommits"]], [c["fileName"] for c in err["unseenCommits"]],
            err["unseenCommitsComplete"], err["latestTableVersion"])


async def test_the_loser_of_a_race_is_told_exactly_the_commits_it_has_not_seen(inproc: InProcess) -> None:
    s = inproc
    table_id, loc = await s.create_table()
    first = [await s.commit_ok(table_id, v) for v in (1, 2)]
    await s.backfill_to(table_id, 1)  # version 1 published, version 2 not yet: both must be carried

    bodies = [ndjson(actions(tag="a")), ndjson(actions(tag="b"))]
    answers = await asyncio.gather(*(s.commit(table_id, 3, b) for b in bodies))
    assert sorted(status for status, _ in answers) == [200, 409], answers
    (won_at, won), (_, lost) = sorted(enumerate(answers), key=lambda a: a[1][0])
    winner, loser = answers[won_at][1], lost[1]
    assert loser["error"]["unseenCommits"] == [winner]  # the winner's commit, as the winner was told it
    assert unseen(loser) == ([3], [winner["fileName"]], True, 3)
    assert await asyncio.to_thread(s.backend.read, winner["path"]) == bodies[won_at]

    await s.backfill_to(table_id, 3)
    files = await asyncio.to_thread(s.backend.snapshot, loc)
    rows = await asyncio.to_thread(db_commit_files, s.backend.database_url, table_id)
    status, behind = await s.commit(table_id, 1, ndjson(actions()))  # a writer that never saw version 1
    assert status == 409, behind
    assert unseen(behind) == ([1, 2, 3], [first[0]["fileName"], first[1]["fileName"], winner["fileName"]], True, 3)
    # as each was answered, by its staged file (decision 67)
    told = behind["error"]["unseenCommits"]
    assert told == [*first, winner]
    for c in told:
        assert await asyncio.to_thread(s.backend.read, c["path"]) == \
            await asyncio.to_thread(s.backend.read, delta_file(loc, c["version"]))
    assert rows == {c["version"]: c["fileName"] for c in behind["error"]["unseenCommits"]}
    # the refusals changed nothing
    assert await asyncio.to_thread(s.backend.snapshot, loc) == files
    assert await asyncio.to_thread(db_commit_files, s.backend.database_url, table_id) == rows
    assert (await s.get_commits(table_id))["latestTableVersion"] == 3


async def test_a_conflict_carries_at_most_the_bound_and_says_when_that_is_not_all(inproc: InProcess) -> None:
    s = inproc
    assert s.service.reads.unseen_limit == UNSEEN_COMMITS_LIMIT == 100
    table_id, loc = await s.create_table()
    acked = [await s.commit_ok(table_id, v) for v in range(1, 6)]
    names = [c["fileName"] for c in acked]
    await s.backfill_to(table_id, 5)
    files = await asyncio.to_thread(s.backend.snapshot, loc)
    s.service.reads.unseen_limit = 3
    try:
        status, far = await s.commit(table_id, 2, ndjson(actions()))
        assert status == 409 and unseen(far) == ([2, 3, 4], names[1:4], False, 5), far
        status, near = await s.commit(table_id, 3, ndjson(actions()))
        assert status == 409 and unseen(near) == ([3, 4, 5], names[2:5], True, 5), near
        status, stale_keyed = await s.commit(table_id, 5, ndjson(actions()), "3d0c2f9e-51a4-4c1b-8f0e-6a7b9c2d4e10")
        assert status == 409 and unseen(stale_keyed) == ([5], names[4:], True, 5), stale_keyed
    finally:
        s.service.reads.unseen_limit = UNSEEN_COMMITS_LIMIT
    assert await asyncio.to_thread(s.backend.snapshot, loc) == files
    assert sorted(await asyncio.to_thread(db_commit_files, s.backend.database_url, table_id)) == [1, 2, 3, 4, 5]


async def test_a_busy_tables_losers_are_answered_from_the_commits_the_process_ratified(inproc: InProcess) -> None:
    s = inproc
    table_id, loc = await s.create_table()
    await s.commit_ok(table_id, 1)
    status, reply = await s.commit(table_id, 1, ndjson(actions()))  # the table's first conflict: from the database
    assert status == 409 and unseen(reply)[0] == [1], reply
    acked = [await s.commit_ok(table_id, v) for v in (2, 3, 4)]
    memory = s.service.ctx.memories.get(table_id)
    assert memory is not None and memory.recent is not None and [c.row.version for c in memory.recent] == [2, 3, 4]
    await s.backfill_to(table_id, 4)
    files = await asyncio.to_thread(s.backend.snapshot, loc)
    status, reply = await s.commit(table_id, 2, ndjson(actions()))
    assert status == 409 and reply["error"]["unseenCommits"] == acked, reply
    assert unseen(reply)[2:] == (True, 4)
    rows = await asyncio.to_thread(db_commit_files, s.backend.database_url, table_id)
    status, reply = await s.commit(table_id, 1, ndjson(actions()))  # version 1 is not in memory: the database
    assert status == 409 and unseen(reply) == ([1, 2, 3, 4], [rows[v] for v in (1, 2, 3, 4)], True, 4), reply
    assert reply["error"]["unseenCommits"][1:] == acked
    assert await asyncio.to_thread(s.backend.snapshot, loc) == files
    assert await asyncio.to_thread(db_commit_files, s.backend.database_url, table_id) == rows


async def test_other_refusals_carry_no_commits(inproc: InProcess) -> None:
    s = inproc
    table_id, _ = await s.create_table()
    await s.commit_ok(table_id, 1)
    status, gap = await s.commit(table_id, 3, ndjson(actions()))  # a gap is not a lost race
    assert status == 400 and gap["error"]["code"] == "INVALID_COMMIT", gap
    assert "unseenCommits" not in gap["error"] and "unseenCommitsComplete" not in gap["error"]


async def _get_commits_requests(s: InProcess) -> float:
    async with s.session.get(s.endpoint + "/metrics") as r:
        text = await r.text()
    return sum(sample.value for fam in text_string_to_metric_families(text) for sample in fam.samples
               if sample.name == "commit_owner_http_requests_total" and sample.labels.get("method") == "GET"
               and sample.labels.get("route", "").endswith("/commits"))


async def test_racing_python_writers_rebase_on_the_carried_commits_and_land_once_each(inproc: InProcess) -> None:
    s = inproc
    writers = 5
    loc = s.backend.new_location()
    opts = s.backend.storage_options()
    client = s.client()

    def data(n: int) -> pa.Table:
        return pa.table({"id": pa.array([n * 10 + k for k in range(3)], pa.int64())})

    first = await asyncio.to_thread(write_table, data(0), loc, client=client, storage_options=opts)
    assert first.version == 1  # version 0 created the table; the first write is version 1
    # Version 1 published before the writers read the table: a backfill landing between a reader's listing
    # and its question to the owner makes it list and ask again (one more getCommits, counted below).
    table_id = (await asyncio.to_thread(client.get_table, location=loc)).table_id
    await asyncio.to_thread(client.backfill_to_version, table_id, 1)
    barrier = threading.Barrier(writers, timeout=60)
    proposed: dict[int, list[int]] = {}

    def write(n: int) -> Any:
        def before_commit(version: int) -> None:
            proposed.setdefault(n, []).append(version)
            if len(proposed[n]) == 1:
                barrier.wait()  # every writer proposes version 2 at once: all but one lose the race

        return write_table(data(n), loc, client=client, storage_options=opts, before_commit=before_commit)

    gets_before = await _get_commits_requests(s)
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=writers) as pool:
        results = await asyncio.gather(*(loop.run_in_executor(pool, write, n) for n in range(1, writers + 1)))
    gets = await _get_commits_requests(s) - gets_before

    assert sorted(r.version for r in results) == list(range(2, writers + 2))  # once each, contiguous
    assert all(p[0] == 2 for p in proposed.values())
    assert sum(r.rebases for r in results) >= writers - 1
    # one getCommits per writer (its first read of the table); every rebase used the commits its 409 carried
    assert gets == writers, (gets, proposed, [(r.version, r.rebases) for r in results])
    snap = await asyncio.to_thread(load_snapshot, loc, client=client, storage_options=opts)
    assert snap.version == writers + 1 and len(snap.files) == writers + 1
    owned = await asyncio.to_thread(db_commit_files, s.backend.database_url, snap.owner.table_id)  # type: ignore[union-attr]
    assert sorted(owned) == list(range(1, writers + 2))


def test_a_carried_prefix_is_used_as_far_as_it_goes_and_a_list_that_does_not_start_there_is_not() -> None:
    from client.contract.errors import CommitVersionConflictError
    from client.models import carried_commits

    def commit(v: int) -> dict[str, Any]:
        return {"version": v, "fileName": f"{v:020d}.x.json", "path": f"_delta_log/_commits/{v:020d}.x.json",
                "fileSize": 10, "fileModificationTime": 1, "commitTimestamp": 1000 + v}

    err = CommitVersionConflictError("taken", latest_table_version=9)
    err.unseen_commits, err.unseen_commits_complete = [commit(5), commit(6)], False  # 7..9 came after the read
    carried = carried_commits(err, 5)
    assert carried is not None and [c.version for c in carried] == [5, 6]
    assert carried_commits(err, 4) is None  # it does not start at the version that lost
    err.unseen_commits = [commit(5), commit(7)]
    assert carried_commits(err, 5) is None  # a hole
    err.unseen_commits = []
    assert carried_commits(err, 5) is None  # the owner could not read them
