"""Which commit file a reader is handed (``coordinator/core/context.py``, ``Context.for_readers``).

The owner writes an /api/v1 commit's staged file while the ratifying transaction runs (decision 43): a crash
between the two leaves a ratified row whose file is not there. Every way a reader is handed a commit must make
sure of the file first (written from the row) and name it as getCommits names it: getCommits, a consistent
multi-table read (/api/v1/snapshots), a version conflict's unseen commits, and the Unity Catalog API's
getCommits. A process that never saw the commit stands for the one that finds the crash's leftovers. Publishing
is off, so the commit stays unpublished (its row keeps its bytes) while the readers look.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlencode

import pytest
import pytest_asyncio

from client.contract.layout import COMMITS_DIR, staged_file
from tests.conftest import BACKENDS, make_backend
from tests.inprocess import InProcess
from tests.support import Backend, actions, ndjson

QUIET = {"COMMIT_OWNER_BACKFILL": "false", "COMMIT_OWNER_JANITOR_INTERVAL_SECONDS": "0"}
UC = "/api/2.1/unity-catalog"

Read = Callable[[InProcess, str, str], Awaitable[list[dict]]]


@pytest.fixture(scope="module", params=[f"{d}-{s}" for d, s in BACKENDS])
def quiet_backend(request: pytest.FixtureRequest) -> Backend:
    """A backend of its own: no other in-process service publishes (or sweeps) its tables."""
    db, storage = request.param.split("-")
    return make_backend(request, db, storage, request.param + "-readers")


@pytest_asyncio.fixture(loop_scope="session")
async def writer(quiet_backend: Backend) -> AsyncIterator[InProcess]:
    s = await InProcess.start(quiet_backend, QUIET)
    yield s
    await s.stop()


async def get_commits(s: InProcess, table_id: str, loc: str) -> list[dict]:
    status, reply = await s.call("GET", f"/api/v1/tables/{table_id}/commits")
    assert status == 200, reply
    return reply["commits"]


async def snapshot(s: InProcess, table_id: str, loc: str) -> list[dict]:
    status, reply = await s.post_json("/api/v1/snapshots", {"tableIds": [table_id]})
    assert status == 200, reply
    return reply["tables"][0]["commits"]


async def unseen(s: InProcess, table_id: str, loc: str) -> list[dict]:
    status, reply = await s.commit(table_id, 1, ndjson(actions()))
    assert status == 409 and reply["error"]["unseenCommitsComplete"], reply
    return reply["error"]["unseenCommits"]


async def uc_get_commits(s: InProcess, table_id: str, loc: str) -> list[dict]:
    query = urlencode({"table_id": table_id, "table_uri": loc, "start_version": 1})
    status, reply = await s.call("GET", f"{UC}/delta/preview/commits?{query}")
    assert status == 200, reply
    return [{"version": c["version"], "fileName": c["file_name"], "path": staged_file(loc, COMMITS_DIR, c["file_name"])}
            for c in reply["commits"]]


@pytest.mark.parametrize("read", [get_commits, snapshot, unseen, uc_get_commits], ids=lambda r: r.__name__)
async def test_a_reader_is_handed_the_staged_file_a_crash_left_unwritten_written_from_its_row(
        writer: InProcess, read: Read) -> None:
    table_id, loc = await writer.create_table()
    body = ndjson(actions())
    status, ratified = await writer.commit(table_id, 1, body)
    assert status == 200, ratified
    path = staged_file(loc, COMMITS_DIR, ratified["fileName"])
    assert ratified["path"] == path
    await asyncio.to_thread(writer.backend.remove, path)  # the crash: a ratified row, no file
    fresh = await InProcess.start(writer.backend, QUIET)
    try:
        handed = await read(fresh, table_id, loc)
    finally:
        await fresh.stop()
    assert [(c["version"], c["fileName"], c["path"]) for c in handed] == [(1, ratified["fileName"], path)]
    assert await asyncio.to_thread(writer.backend.read, path) == body
