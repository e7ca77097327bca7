"""Commits of one table take turns inside the process; a stale proposal is answered from memory.

Whatever shortcut the service takes, the database still decides: these tests check that a stale proposal
changes nothing, that a keyed retry is still replayed, and that a crowd of racing writers ends with one
file per version, contiguous versions and no orphan files. On every backend, with the app in this process.
"""

from __future__ import annotations

import asyncio

from tests.inprocess import InProcess
from tests.support import actions, db_commit_files, ndjson


async def test_a_stale_proposal_is_a_conflict_that_changes_nothing(inproc: InProcess) -> None:
    s = inproc
    table_id, loc = await s.create_table()
    await s.commit_ok(table_id, 1)
    await s.commit_ok(table_id, 2)
    await s.backfill_to(table_id, 2)
    files = await asyncio.to_thread(s.backend.snapshot, loc)
    rows = await asyncio.to_thread(db_commit_files, s.backend.database_url, table_id)
    cases = [(ndjson(actions()), None), (b"{not json", None),  # even a malformed body: the version comes first
             (ndjson(actions()), "0b7e6d1e-8d53-4a0c-9a57-3f1e2d4c5b6a")]  # a key nobody used: no replay
    for body, key in cases:
        status, reply = await s.commit(table_id, 2, body, key)
        assert status == 409, reply
        err = reply["error"]
        assert (err["code"], err["retryable"], err["conflict"], err["latestTableVersion"]) == \
            ("COMMIT_VERSION_CONFLICT", True, True, 2)
        assert "Expected version: 3" in err["message"]
    assert await asyncio.to_thread(s.backend.snapshot, loc) == files
    assert await asyncio.to_thread(db_commit_files, s.backend.database_url, table_id) == rows
    assert (await s.get_commits(table_id))["latestTableVersion"] == 2


async def test_a_keyed_retry_of_an_old_version_is_still_replayed(inproc: InProcess) -> None:
    s = inproc
    table_id, _ = await s.create_table()
    key = "6f1c4a52-0a8e-4c61-9f57-2d7f0c1b9e11"
    body = ndjson(actions())
    status, first = await s.commit(table_id, 1, body, key)
    assert status == 200
    await s.commit_ok(table_id, 2)
    status, again = await s.commit(table_id, 1, body, key)  # version 1 is old now, but this is its own retry
    assert status == 200 and again == first
    status, reply = await s.commit(table_id, 1, ndjson(actions()), key)
    assert status == 422 and reply["error"]["code"] == "IDEMPOTENCY_KEY_REUSED", reply
    assert (await s.get_commits(table_id))["latestTableVersion"] == 2


async def test_racing_writers_leave_one_file_per_version_and_no_orphans(inproc: InProcess) -> None:
    s = inproc
    table_id, loc = await s.create_table()
    acked: list[tuple[int, str]] = []

    async def writer() -> None:
        known = 0
        for _ in range(6):
            while True:
                status, reply = await s.commit(table_id, known + 1, ndjson(actions()))
                if status == 200:
                    acked.append((reply["version"], reply["fileName"]))
                    known = reply["version"]
                    break
                assert status == 409 and reply["error"]["conflict"], reply
                known = reply["error"]["latestTableVersion"]

    await asyncio.gather(*(writer() for _ in range(12)))
    assert sorted(v for v, _ in acked) == list(range(1, 73))
    assert await asyncio.to_thread(db_commit_files, s.backend.database_url, table_id) == dict(acked)
    staged = await asyncio.to_thread(s.backend.list, f"{loc}/_delta_log/_commits")
    # every loser's file was removed; every ratified commit has its own (decision 67)
    assert set(staged) == {name for _, name in acked}
