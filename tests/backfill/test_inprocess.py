"""The service, the store and the backfiller driven directly, in this process, on every backend.

The app is the real one (``create_app``) with the background backfiller off and a backlog cap of 3, so a
table's state changes only when a test asks; its parts come from the app keys. Refusals assert that the
database rows and the files are as they were.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import select

from backfill.worker import Backfiller
from client import (
    CommitVersionConflictError,
    ForeignCommitFileError,
    IdempotencyKeyReusedError,
    InvalidArgumentError,
    InvalidCommitError,
    TableNotAcceptingCommitsError,
    TooManyUnbackfilledCommitsError,
    UnavailableError,
)
from client.contract.layout import COMMITS_DIR, staged_file, staged_file_name
from coordinator.store import CommitRow, now_ms
from coordinator.store.schema import owned_tables
from tests.conftest import BACKENDS, make_backend
from tests.inprocess import InProcess
from tests.security.conftest import db_state
from tests.support import actions, data_commit, delta_file, delta_rs_table, delta_rs_target, ndjson, version0

CAP = 3


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=[f"{d}-{s}" for d, s in BACKENDS])
async def parts(request: pytest.FixtureRequest) -> AsyncIterator[InProcess]:
    """No background backfill, backlog cap 3, a database and bucket of its own."""
    db, storage = request.param.split("-")
    b = make_backend(request, db, storage, f"parts-{request.param}")
    app = await InProcess.start(b, {"COMMIT_OWNER_BACKFILL": "false",
                                    "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": str(CAP)})
    yield app
    await app.stop()


async def picture(p: InProcess, loc: str) -> tuple[Any, dict[str, bytes]]:
    """Every row of the store and every file of the table."""
    rows = await asyncio.to_thread(db_state, p.backend.database_url)
    return rows, await asyncio.to_thread(p.backend.snapshot, loc)


async def published(p: InProcess, loc: str) -> list[int]:
    names = await asyncio.to_thread(p.backend.list, f"{loc}/_delta_log")
    return sorted(int(n.split(".")[0]) for n in names if n.endswith(".json"))


async def lease(p: InProcess, table_id: str) -> tuple[str | None, int | None]:
    """The table's backfill lease columns, read with the app's own engine."""
    t = owned_tables.c
    async with p.store.engine.connect() as conn:
        row = (await conn.execute(select(t.lease_owner, t.lease_expires_at).where(t.table_id == table_id))).one()
    return row[0], row[1]


async def commit(p: InProcess, table_id: str, version: int, acts: list[dict[str, Any]] | None = None) -> bytes:
    """Ratify through the service object itself (no HTTP); returns the body."""
    data = ndjson(acts if acts is not None else actions())
    handed = await p.service.commit(table_id, version, data, None)
    assert handed.row.version == version
    return data


async def test_ratified_commits_are_recorded_then_published_in_order(parts: InProcess) -> None:
    p = parts
    table_id, loc = await p.create_table()
    bodies = {v: await commit(p, table_id, v) for v in range(1, CAP + 1)}
    t = await p.store.get_table(table_id)
    assert (t.base_version, t.latest_version, t.latest_backfilled_version, t.unbackfilled) == (0, 3, 0, 3)
    assert t.last_commit_timestamp is not None and t.accepting and t.status == "ACTIVE"
    rows = await p.store.unbackfilled(table_id)
    assert [r.version for r in rows] == [1, 2, 3] and all(r.backfilled_at is None for r in rows)
    for r in rows:  # each row names its staged file, whose bytes are the body
        assert r.content_sha256 == hashlib.sha256(bodies[r.version]).hexdigest()
        assert r.file_name.startswith(f"{r.version:020d}.") and r.file_size == len(bodies[r.version])
    assert await published(p, loc) == [0]

    after = await p.backfiller.backfill(table_id, 2)
    assert after.latest_backfilled_version == 2
    assert await published(p, loc) == [0, 1, 2]
    for v in (1, 2):
        assert await asyncio.to_thread(p.backend.read, delta_file(loc, v)) == bodies[v]
    assert [r.version for r in await p.store.unbackfilled(table_id)] == [3]
    kept = {r.version: r for r in await p.store.recent_commits(table_id)}
    assert kept[1].backfilled_at is not None and kept[2].backfilled_at is not None and kept[3].backfilled_at is None
    t = await p.store.get_table(table_id)
    assert (t.latest_backfilled_version, t.unbackfilled) == (2, 1)
    assert await lease(p, table_id) == (None, None)  # a backfiller without a background loop hands it back

    assert (await p.backfiller.backfill(table_id)).latest_backfilled_version == 3  # everything ratified
    assert await published(p, loc) == [0, 1, 2, 3]
    assert (await p.get_commits(table_id))["commits"] == []  # published commits leave getCommits


async def test_the_store_judges_each_proposal_and_a_refusal_writes_no_row(parts: InProcess) -> None:
    p = parts
    table_id, loc = await p.create_table()
    await commit(p, table_id, 1)
    [one] = await p.store.unbackfilled(table_id)
    ts = one.commit_timestamp

    def proposal(version: int, commit_timestamp: int, key: str | None = None) -> CommitRow:
        return dataclasses.replace(one, version=version, commit_timestamp=commit_timestamp,
                                   idempotency_key=key or str(uuid.uuid4()), ratified_at=now_ms(),
                                   file_name=staged_file_name(version, str(uuid.uuid4())))

    before = await picture(p, loc)
    cases: list[tuple[CommitRow, type[Exception], str]] = [
        (proposal(1, ts + 1), CommitVersionConflictError, "Expected version: 2"),  # taken
        (proposal(3, ts + 1), InvalidCommitError, "Expected version: 2"),  # a gap
        (proposal(2, ts), InvalidCommitError, "must be greater than the previous commit"),  # time stood still
        (proposal(2, ts + 1, key=one.idempotency_key), IdempotencyKeyReusedError, "already used for version 1"),
    ]
    for row, error, message in cases:
        with pytest.raises(error, match=message):
            await p.store.ratify(row, max_unbackfilled=CAP, releases=False)
    assert await picture(p, loc) == before
    assert await p.store.ratify(one, max_unbackfilled=CAP, releases=False) == one  # its own replay
    # the store records what the service staged: stage version 2 the way the service does, then ratify it
    body = ndjson(actions(ict=ts + 1))
    ok = dataclasses.replace(proposal(2, ts + 1), file_size=len(body), content_sha256=hashlib.sha256(body).hexdigest(),
                             body=body)
    await asyncio.to_thread(p.backend.write, staged_file(loc, COMMITS_DIR, ok.file_name), body)
    assert await p.store.ratify(ok, max_unbackfilled=CAP, releases=False) == ok
    t = await p.store.get_table(table_id)
    assert (t.latest_version, t.last_commit_timestamp, t.unbackfilled) == (2, ts + 1, 2)
    await p.backfiller.backfill(table_id, 2)
    assert await asyncio.to_thread(p.backend.read, delta_file(loc, 2)) == body


async def test_a_backfill_beyond_the_latest_version_is_refused_and_changes_nothing(parts: InProcess) -> None:
    p = parts
    table_id, loc = await p.create_table()
    await commit(p, table_id, 1)
    before = await picture(p, loc)
    with pytest.raises(InvalidArgumentError, match="latest ratified version is 1"):
        await p.backfiller.backfill(table_id, 9)
    status, reply = await p.post_json(f"/api/v1/tables/{table_id}/backfill", {"version": 9})
    assert status == 400 and reply["error"]["code"] == "INVALID_ARGUMENT", reply
    assert await picture(p, loc) == before


async def test_the_backlog_cap_answers_429_until_the_client_backfills(parts: InProcess) -> None:
    p = parts
    table_id, loc = await p.create_table()
    for v in range(1, CAP + 1):
        await commit(p, table_id, v)
    before = await picture(p, loc)
    status, reply = await p.commit(table_id, CAP + 1, ndjson(actions()))
    err = reply["error"]
    assert status == 429 and (err["code"], err["retryable"], err["conflict"]) == \
        ("TOO_MANY_UNBACKFILLED_COMMITS", True, False), reply
    assert "backfill is behind" in err["message"]
    with pytest.raises(TooManyUnbackfilledCommitsError):
        await p.service.commit(table_id, CAP + 1, ndjson(actions()), None)
    assert await picture(p, loc) == before  # no row, no staged file left behind
    c = p.client()
    r = await asyncio.to_thread(c.commit, table_id, CAP + 1, actions())  # the client backfills, then retries
    c.close()
    assert r.version == CAP + 1
    assert await asyncio.to_thread(p.backend.exists, delta_file(loc, CAP))


async def test_the_lease_is_taken_renewed_refused_and_taken_over_once_expired(parts: InProcess) -> None:
    p = parts
    table_id, _ = await p.create_table()
    s = p.store
    assert await s.acquire_lease(table_id, "a", 1.5)
    assert await s.acquire_lease(table_id, "a", 1.5)  # its own lease: renewed
    assert not await s.acquire_lease(table_id, "b", 1.5)  # someone else's live lease
    await s.release_lease(table_id, "b")  # only the holder may release: nothing happens
    assert (await lease(p, table_id))[0] == "a"
    await asyncio.sleep(1.6)
    assert await s.acquire_lease(table_id, "b", 10)  # expired: taken over
    assert not await s.acquire_lease(table_id, "a", 10)
    await s.release_lease(table_id, "b")
    assert await lease(p, table_id) == (None, None)


async def test_a_dead_holders_lease_blocks_backfill_until_it_expires(parts: InProcess) -> None:
    p = parts
    table_id, loc = await p.create_table()
    bodies = {v: await commit(p, table_id, v) for v in (1, 2)}
    hold = 1.5
    assert await p.store.acquire_lease(table_id, "dead-process", hold)  # died holding it
    held_since = time.monotonic()
    before = await picture(p, loc)
    with pytest.raises(UnavailableError, match="being backfilled by another process"):
        await p.backfiller.backfill(table_id, 2, wait_seconds=0.3)
    assert await picture(p, loc) == before, "published while another holder's lease was live"
    other = Backfiller(p.store, p.storage, p.settings, background=False, holder="newcomer")
    t = await other.backfill(table_id, 2, wait_seconds=30)  # waits for the expiry, then takes over
    assert time.monotonic() - held_since >= hold - 0.2
    assert t.latest_backfilled_version == 2
    assert await published(p, loc) == [0, 1, 2]
    for v in (1, 2):
        assert await asyncio.to_thread(p.backend.read, delta_file(loc, v)) == bodies[v]
    assert await lease(p, table_id) == (None, None)


async def test_a_foreign_delta_file_fences_the_table_and_is_never_overwritten(parts: InProcess) -> None:
    p = parts
    table_id, loc = await p.create_table()
    await commit(p, table_id, 1)
    await commit(p, table_id, 2)
    await p.backfiller.backfill(table_id, 1)
    foreign = ndjson(actions()) + (b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,'
                                   b'"dataChange":true}}\n')
    await asyncio.to_thread(p.backend.write, delta_file(loc, 2), foreign)  # someone bypassed the owner
    with pytest.raises(ForeignCommitFileError):
        await p.backfiller.backfill(table_id, 2)
    assert await asyncio.to_thread(p.backend.read, delta_file(loc, 2)) == foreign  # never overwritten
    t = await p.store.get_table(table_id)
    assert t.status == "FENCED" and not t.accepting and "did not ratify" in (t.status_reason or "")
    before = await picture(p, loc)
    status, reply = await p.commit(table_id, 3, ndjson(actions()))
    err = reply["error"]
    assert status == 409 and (err["code"], err["retryable"], err["conflict"]) == \
        ("TABLE_NOT_ACCEPTING_COMMITS", False, False), reply
    with pytest.raises(TableNotAcceptingCommitsError):
        await p.service.commit(table_id, 3, ndjson(actions()), str(uuid.uuid4()))
    assert await picture(p, loc) == before
    assert not await asyncio.to_thread(p.backend.exists, delta_file(loc, 3))


async def test_the_release_commit_stops_acceptance_and_is_published_at_once(parts: InProcess) -> None:  # K03, K04
    p = parts
    table_id, loc = await p.create_table()
    await commit(p, table_id, 1)
    meta = version0()[2]
    meta["metaData"]["configuration"] = {"delta.enableInCommitTimestamps": "true"}  # owner property dropped
    release = [actions(0)[0], meta]
    await p.commit_ok(table_id, 2, release)
    # published at once, before the reply, although this app's background backfiller is off
    assert await asyncio.to_thread(p.backend.read, delta_file(loc, 2)) == ndjson(release)
    t = await p.store.get_table(table_id)
    assert not t.accepting and t.status == "RELEASED"
    before = await picture(p, loc)
    status, reply = await p.commit(table_id, 3, ndjson(actions()))
    err = reply["error"]
    assert status == 409 and (err["code"], err["retryable"], err["conflict"]) == \
        ("TABLE_NOT_ACCEPTING_COMMITS", False, False), reply
    assert await picture(p, loc) == before
    assert not await asyncio.to_thread(p.backend.exists, delta_file(loc, 3))


async def test_a_backfill_repairs_a_missing_published_file(parts: InProcess) -> None:
    p = parts
    table_id, loc = await p.create_table()
    bodies = {v: await commit(p, table_id, v) for v in range(1, 4)}
    await p.backfill_to(table_id, 3)
    fs = p.backend.fs()
    await asyncio.to_thread(fs.rm, p.backend._p(delta_file(loc, 2)))
    assert await published(p, loc) == [0, 1, 3]
    status, reply = await p.post_json(f"/api/v1/tables/{table_id}/backfill",
                                      {"version": 3, "lastKnownBackfilledVersion": 2})
    assert status == 200, reply
    assert await asyncio.to_thread(p.backend.read, delta_file(loc, 2)) == bodies[2]


async def test_delta_rs_reads_every_backfilled_version_and_a_stale_one_before(parts: InProcess) -> None:
    p = parts
    b = p.backend
    table_id, loc = await p.create_table()
    expected: dict[int, list[int]] = {0: []}
    rows: list[int] = []
    for v in range(1, CAP + 1):
        ids = list(range(v * 10, v * 10 + v))
        await commit(p, table_id, v, await asyncio.to_thread(data_commit, b, loc, ids))
        rows = rows + ids
        expected[v] = rows
    # before backfill: delta-rs sees version 0 only (stale, not broken)
    assert await asyncio.to_thread(lambda: delta_rs_table(b, loc).version()) == 0
    assert await asyncio.to_thread(lambda: delta_rs_table(b, loc).to_pyarrow_table().num_rows) == 0
    await p.backfill_to(table_id, CAP)
    assert await asyncio.to_thread(lambda: delta_rs_table(b, loc).version()) == CAP
    for v, want in expected.items():
        got = await asyncio.to_thread(
            lambda v=v: delta_rs_table(b, loc, version=v).to_pyarrow_table().column("id").to_pylist())
        assert sorted(got) == sorted(want), v
    # delta-rs refuses to write an owned table
    import deltalake
    import pyarrow as pa

    uri, opts = delta_rs_target(b, loc)
    with pytest.raises(Exception, match="(?i)feature"):
        await asyncio.to_thread(deltalake.write_deltalake, uri, pa.table({"id": pa.array([1], pa.int64())}),
                                mode="append", storage_options=opts)
