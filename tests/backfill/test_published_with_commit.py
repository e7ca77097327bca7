"""The design card's shape (decision 67): every ratified commit has its staged file, durable before the answer,
and ``<v>.json`` is a byte-equal copy of it. With ``publish_with_commit`` (the default), a commit that its process
can publish next is published before it is answered too (decisions 61, 62).

The real app runs in this process on a real database and storage. The first commit of a table is published by
a background run (the process does not hold the table's lease yet); once it is, each next commit is ratified,
staged and published as ``_delta_log/<v>.json`` before its answer, which names the staged file. Where the
process cannot publish at once (a batch size, a failing publication), it is published a moment later.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest
import pytest_asyncio

from client.contract.layout import staged_file
from harness.storage_faults import STORAGE_FAULTS
from tests.conftest import make_backend
from tests.inprocess import InProcess
from tests.support import actions, db_commit_files, delta_file, ndjson

DELAY_MS = 2000  # the marks wait this long: the window in which the database still lists published versions


@pytest_asyncio.fixture(loop_scope="session", params=["sqlite-s3", "postgres-local"])
async def backend(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    db, storage = request.param.split("-")
    return make_backend(request, db, storage, f"own-{request.param}")


async def _start(backend, **env: str) -> InProcess:  # type: ignore[no-untyped-def]
    return await InProcess.start(backend, {"COMMIT_OWNER_BACKFILL_MARK_DELAY_MS": str(DELAY_MS),
                                           "COMMIT_OWNER_PUBLISH_WITH_COMMIT": "true", **env})


async def _until(what: str, check, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def _staged(p: InProcess, loc: str) -> list[str]:
    return sorted(p.backend.list(f"{loc}/_delta_log/_commits"))


async def _first_commit_published(p: InProcess, tid: str, loc: str) -> dict:  # type: ignore[type-arg]
    reply = await p.commit_ok(tid, 1)
    assert reply["path"] == staged_file(loc, "_commits", reply["fileName"]), "a table's first commit is staged"
    await _until("version 1 published", lambda: p.backfiller.published_through(tid) == 1)
    return reply


def _inode(p: InProcess, uri: str) -> int:
    return os.stat(uri.removeprefix("file://")).st_ino


@pytest.mark.asyncio(loop_scope="session")
async def test_the_next_commit_is_published_before_its_answer_and_keeps_its_staged_file(backend) -> None:  # type: ignore[no-untyped-def]
    a = await _start(backend)
    b = await _start(backend)  # another process on the same database and storage
    try:
        tid, loc = await a.create_table()
        first = await _first_commit_published(a, tid, loc)
        body = ndjson(actions(tag="own-2"))
        status, reply = await a.commit(tid, 2, body)
        assert status == 200, reply
        row_name = db_commit_files(a.backend.database_url, tid)[2]
        # the answer names the ratified commit and its staged file, which is there; so is <v>.json, its copy
        assert (reply["version"], reply["fileName"], reply["path"]) == (2, row_name, staged_file(loc, "_commits", row_name))
        assert a.backend.read(reply["path"]) == body, "the answer names a file that is there"
        assert a.backend.read(delta_file(loc, 2)) == body, "published before the answer"
        assert _staged(a, loc) == sorted([first["fileName"], row_name])
        # both processes list an unrecorded version by its staged file
        for p in (a, b):
            listed = (await p.get_commits(tid))["commits"]
            assert all(c["path"] == staged_file(loc, "_commits", c["fileName"]) for c in listed), listed
            assert all(a.backend.read(c["path"]) for c in listed)
        # a keyed retry of a published commit is answered with the same staged file
        key = str(uuid.uuid4())
        body3 = ndjson(actions(tag="own-3"))
        status, third = await a.commit(tid, 3, body3, key=key)
        assert status == 200, third
        status, again = await a.commit(tid, 3, body3, key=key)
        assert status == 200 and again["path"] == third["path"] and a.backend.exists(again["path"]), again
        deadline = time.monotonic() + DELAY_MS / 1000 + 30
        while (await b.get_commits(tid))["commits"]:  # the marks land: nothing is listed as unpublished
            assert time.monotonic() < deadline, "the mark of version 3 never landed"
            await asyncio.sleep(0.05)
    finally:
        await b.stop()
        await a.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_steady_commits_of_the_lease_holder_each_have_their_staged_file_equal_to_their_published_copy(backend) -> None:  # type: ignore[no-untyped-def]
    """The card's shape at steady state: a process that holds the table's lease publishes each commit with it,
    and every version still has its ``_commits/<v>.<uuid>.json``, byte-equal to ``<v>.json`` (on local disk a
    file of its own: a later write into ``_commits/`` cannot change the published log)."""
    a = await _start(backend)
    try:
        tid, loc = await a.create_table()
        await _first_commit_published(a, tid, loc)
        replies = {v: await a.commit_ok(tid, v) for v in range(2, 22)}
        assert a.backfiller.published_through(tid) == 21, "the lease holder published each commit with it"
        names = db_commit_files(a.backend.database_url, tid)
        assert set(_staged(a, loc)) == {names[v] for v in range(1, 22)}
        for v, reply in replies.items():
            assert reply["fileName"] == names[v] and reply["path"] == staged_file(loc, "_commits", names[v])
            assert a.backend.read(reply["path"]) == a.backend.read(delta_file(loc, v)), f"version {v}"
        if a.backend.storage == "local":
            staged, published = replies[21]["path"], delta_file(loc, 21)
            assert _inode(a, staged) != _inode(a, published)
            with open(staged.removeprefix("file://"), "r+b") as f:  # a writer that could write into _commits/
                f.write(b"garbage")
            assert a.backend.read(published) != a.backend.read(staged)
            assert a.backend.read(published).startswith(b"{")
    finally:
        await a.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_without_the_setting_a_commit_is_published_after_its_answer(backend) -> None:  # type: ignore[no-untyped-def]
    a = await _start(backend, COMMIT_OWNER_PUBLISH_WITH_COMMIT="false")
    try:
        tid, loc = await a.create_table()
        await _first_commit_published(a, tid, loc)
        reply = await a.commit_ok(tid, 2)
        assert reply["path"] == staged_file(loc, "_commits", reply["fileName"])
        assert a.backend.exists(reply["path"])
        await _until("version 2 published", lambda: a.backend.exists(delta_file(loc, 2)))
        assert a.backend.read(delta_file(loc, 2)) == a.backend.read(reply["path"])
    finally:
        await a.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_with_a_batch_size_the_commit_is_staged_and_answered_with_its_staged_file(backend) -> None:  # type: ignore[no-untyped-def]
    a = await _start(backend, COMMIT_OWNER_BACKFILL_BATCH_SIZE="2")
    try:
        tid, loc = await a.create_table()
        for v in (1, 2, 3):
            reply = await a.commit_ok(tid, v)
            assert reply["path"] == staged_file(loc, "_commits", reply["fileName"])
            assert a.backend.exists(reply["path"])
        await _until("versions 1-2 published", lambda: a.backend.exists(delta_file(loc, 2)))
        reply = await a.commit_ok(tid, 4)
        assert reply["path"] == staged_file(loc, "_commits", reply["fileName"]), "a batch publishes later"
    finally:
        await a.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_publication_that_fails_leaves_the_commit_ratified_and_staged(backend) -> None:  # type: ignore[no-untyped-def]
    a = await _start(backend, **{STORAGE_FAULTS: f"put_error=1;match=_delta_log/{2:020d}.json"})
    try:
        tid, loc = await a.create_table()
        await _first_commit_published(a, tid, loc)
        body = ndjson(actions(tag="own-fails"))
        status, reply = await a.commit(tid, 2, body)
        assert status == 200, reply  # ratified: the failed publication is the background run's to retry
        assert reply["path"] == staged_file(loc, "_commits", reply["fileName"])
        assert a.backend.read(reply["path"]) == body
        assert not a.backend.exists(delta_file(loc, 2))
        assert db_commit_files(a.backend.database_url, tid)[2] == reply["fileName"]
    finally:
        await a.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_commit_refused_after_its_file_was_prepared_leaves_nothing_behind(backend) -> None:  # type: ignore[no-untyped-def]
    """Decision 62: ``<v>.json``'s write is prepared while the version is ratified; refused in the database (another
    process took the version), the prepared write is dropped: no file, hidden or not, and the table as it was."""
    a = await _start(backend)
    b = await _start(backend)  # another process: a does not know what it ratifies
    try:
        tid, loc = await a.create_table()
        await _first_commit_published(a, tid, loc)
        published = await a.commit_ok(tid, 2)
        assert a.backend.exists(published["path"]) and a.backend.exists(delta_file(loc, 2))
        theirs = await b.commit_ok(tid, 3)
        # a publishes it as the lease holder, asked by b (decision 66): the log settles before the refusal
        await _until("version 3 published", lambda: a.backend.exists(delta_file(loc, 3)))
        before = a.backend.snapshot(loc), db_commit_files(a.backend.database_url, tid)
        status, reply = await a.commit(tid, 3, ndjson(actions(tag="late")))
        assert status == 409 and reply["error"]["code"] == "COMMIT_VERSION_CONFLICT", reply
        assert (a.backend.snapshot(loc), db_commit_files(a.backend.database_url, tid)) == before
        assert db_commit_files(a.backend.database_url, tid)[3] == theirs["fileName"]
        if a.backend.storage == "local":  # every name in the log folder, hidden ones too
            log_dir = delta_file(loc, 0).removeprefix("file://").rsplit("/", 1)[0]
            assert not [n for n in os.listdir(log_dir) if n.startswith(".")], os.listdir(log_dir)
    finally:
        await b.stop()
        await a.stop()
