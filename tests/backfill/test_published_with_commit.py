"""With ``publish_with_commit``, a commit that its process can publish next is published before it is
answered, and stages nothing (decision 61).

The real app runs in this process on a real database and storage. The first commit of a table takes the
staged way (the process does not hold the table's lease yet); once its background run published it, each
next commit is ratified, written as ``_delta_log/<v>.json`` and answered with that file. Its row keeps the
bytes until the mark, so a reader in another process, which cannot know the version is published, is handed
the staged file written from the row. Where the process cannot publish at once (a batch size, a failing
publication), the commit is staged as before and the answer names the staged file.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
import pytest_asyncio

from client.contract.layout import staged_file
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


@pytest.mark.asyncio(loop_scope="session")
async def test_the_next_commit_is_answered_with_its_published_file_and_stages_nothing(backend) -> None:  # type: ignore[no-untyped-def]
    a = await _start(backend)
    b = await _start(backend)  # another process on the same database and storage
    try:
        tid, loc = await a.create_table()
        first = await _first_commit_published(a, tid, loc)
        body = ndjson(actions(tag="own-2"))
        started = time.monotonic()
        status, reply = await a.commit(tid, 2, body)
        assert status == 200, reply
        row_name = db_commit_files(a.backend.database_url, tid)[2]
        # the answer names the ratified commit as every answer does, and the file to read: its <v>.json
        assert (reply["version"], reply["fileName"], reply["path"]) == (2, row_name, delta_file(loc, 2))
        assert a.backend.read(delta_file(loc, 2)) == body, "the answer names a file that is there"
        assert _staged(a, loc) == [first["fileName"]], "version 2 was published, not staged"

        if time.monotonic() - started < DELAY_MS / 1000 * 0.8:  # (the marks still wait: the window is open)
            # version 2's ratification carried version 1's mark (decision 62): neither process lists it now;
            # this process lists version 2 by the file its writer was answered with ...
            listed = (await a.get_commits(tid))["commits"]
            assert [(c["version"], c["path"]) for c in listed] == [(2, delta_file(loc, 2))]
            assert _staged(a, loc) == [first["fileName"]]
            # ... another process does not: it is handed the staged file, written from the row first
            listed = (await b.get_commits(tid))["commits"]
            assert [(c["version"], c["fileName"]) for c in listed] == [(2, row_name)]
            assert a.backend.read(staged_file(loc, "_commits", row_name)) == body
        deadline = time.monotonic() + DELAY_MS / 1000 + 30
        while (await b.get_commits(tid))["commits"]:  # the marks land: nothing is listed as unpublished
            assert time.monotonic() < deadline, "the mark of version 2 never landed"
            await asyncio.sleep(0.05)
    finally:
        await b.stop()
        await a.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_without_the_setting_every_commit_is_staged(backend) -> None:  # type: ignore[no-untyped-def]
    a = await _start(backend, COMMIT_OWNER_PUBLISH_WITH_COMMIT="false")
    try:
        tid, loc = await a.create_table()
        await _first_commit_published(a, tid, loc)
        reply = await a.commit_ok(tid, 2)
        assert reply["path"] == staged_file(loc, "_commits", reply["fileName"]), "the default stages every commit"
        assert a.backend.exists(reply["path"])
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
    a = await _start(backend, COMMIT_OWNER_FAULT_INJECTION=f"put_error=1;match=_delta_log/{2:020d}.json")
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
        assert published["path"] == delta_file(loc, 2)
        theirs = await b.commit_ok(tid, 3)
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
