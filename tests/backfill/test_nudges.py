"""A process refused a table's lease asks the holder on the same host to publish at once (decision 66).

Two real apps in this process share one database and one storage, as two workers of `serve --workers 2` do;
each background backfiller has its own socket (its holder id names another pid-and-tag, the same host). The
sweep and the lease's expiry are set a minute away, so nothing but the nudge can publish a commit of the
process that does not hold the lease within the test: on a build without nudges these tests wait for the
sweep and fail.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

import backfill.worker
from backfill import nudges
from backfill.worker import Backfiller
from client.contract.layout import staged_file
from tests.backfill.test_background_runs import calls
from tests.conftest import make_backend
from tests.inprocess import InProcess
from tests.support import delta_file

FAR = 60.0  # the sweep, the idle hand-back and the lease's expiry: never, within a test
SOON = 15.0  # what the tests wait at most: well before any of them


@pytest_asyncio.fixture(loop_scope="session", params=["sqlite-local", "postgres-local"])
async def pair(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[InProcess, InProcess]]:
    """Two services on one database: A (which will hold the tables' leases) and B."""
    monkeypatch.setattr(backfill.worker, "SWEEP_SECONDS", FAR)
    db, storage = request.param.split("-")
    b = make_backend(request, db, storage, f"nudge-{request.param}")
    env = {"COMMIT_OWNER_BACKFILL_LEASE_SECONDS": str(int(FAR * 2))}
    apps = (await InProcess.start(b, env), await InProcess.start(b, env))
    yield apps
    for p in apps:
        await p.stop()


async def _until(what: str, check, timeout: float = SOON) -> float:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < timeout, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)
    return time.monotonic() - started


@pytest.fixture
def own_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory of the test's own for the sockets' folder (short: a socket's path is short)."""
    path = Path(tempfile.mkdtemp(prefix="nudge-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def _true(value: bool) -> bool:
    return value


async def _holder(p: InProcess, table_id: str) -> str | None:
    return await p.store.leases.lease_holder(table_id)  # (beside the store's method, which the tests count)


async def _leased_table(a: InProcess) -> tuple[str, str]:
    """A table whose version 1 A committed and published: A holds its lease."""
    tid, loc = await a.create_table()
    await a.commit_ok(tid, 1)
    await _until("version 1 published", lambda: asyncio.to_thread(a.backend.exists, delta_file(loc, 1)))
    assert await _holder(a, tid) == a.backfiller.holder
    return tid, loc


@pytest.mark.asyncio(loop_scope="session")
async def test_a_commit_of_a_process_without_the_lease_is_published_by_the_holder_without_waiting_for_a_sweep(
    pair: tuple[InProcess, InProcess],
) -> None:
    a, b = pair
    tid, loc = await _leased_table(a)
    holder_reads = calls(a.store, "lease_holder")
    for v in (2, 3, 4):
        reply = await b.commit_ok(tid, v)
        assert reply["path"] == staged_file(loc, "_commits", reply["fileName"]), "every answer names the staged file"
        await _until(f"version {v} published", lambda v=v: asyncio.to_thread(a.backend.exists, delta_file(loc, v)))
        assert await _holder(a, tid) == a.backfiller.holder, "published by the holder, which keeps its lease"
    assert holder_reads == [], "the holder never asks who holds the lease"
    own = await a.commit_ok(tid, 5)
    assert await asyncio.to_thread(a.backend.exists, delta_file(loc, 5)), "A's own commits still publish themselves"
    assert await asyncio.to_thread(a.backend.exists, own["path"]), "... and have their staged file"


@pytest.mark.asyncio(loop_scope="session")
async def test_an_explicit_backfill_through_a_process_without_the_lease_is_answered_once_the_holder_published(
    pair: tuple[InProcess, InProcess],
) -> None:
    """A writer's `POST .../backfill` (what `write_table` sends after its commit) that lands on the process
    without the lease: that process waits for the holder, which publishes, records and says so."""
    a, b = pair
    tid, loc = await _leased_table(a)
    for v in (2, 3):
        await b.commit_ok(tid, v)
        reply = await asyncio.wait_for(b.backfill_to(tid, v), SOON)
        assert reply["latestBackfilledVersion"] >= v
        assert a.backend.exists(delta_file(loc, v))
        assert await _holder(a, tid) == a.backfiller.holder
        assert (await a.store.get_table(tid)).latest_backfilled_version >= v, "recorded before the answer"


@pytest.mark.asyncio(loop_scope="session")
async def test_a_waiting_backfill_that_asks_a_holder_gone_since_asks_the_database_and_the_holder_it_names(
    pair: tuple[InProcess, InProcess],
) -> None:
    """B remembers for a moment who refused it a table's lease, and a backfill waiting there asks that holder
    without a statement; when that process is gone (here a holder id of this host that no process answers to),
    B asks the database who holds the lease and asks it."""
    a, b = pair
    tid, loc = await _leased_table(a)
    await b.commit_ok(tid, 2)
    await _until("B's run refused", lambda: _true(tid in b.backfiller._holders))  # (its commit's background run)
    b.backfiller._holders[tid] = (f"{socket.gethostname()}:1:deadbeef", time.monotonic())  # (pid 1: not a backfiller)
    reply = await asyncio.wait_for(b.backfill_to(tid, 2), SOON)
    assert reply["latestBackfilledVersion"] >= 2 and a.backend.exists(delta_file(loc, 2))
    assert await _holder(a, tid) == a.backfiller.holder


@pytest.mark.asyncio(loop_scope="session")
async def test_a_process_that_holds_every_lease_it_needs_never_reads_who_holds_one(
    request: pytest.FixtureRequest,
) -> None:
    """The nudge costs a read only on a refusal: one process committing and publishing its own tables runs
    no statement for it."""
    b = make_backend(request, "postgres", "local", "nudge-alone")
    p = await InProcess.start(b, {})
    try:
        reads = calls(p.store, "lease_holder")
        tables = [await p.create_table() for _ in range(3)]
        for v in range(1, 6):
            for tid, _ in tables:
                await p.commit_ok(tid, v)
        for _, loc in tables:
            await _until("version 5 published", lambda loc=loc: asyncio.to_thread(b.exists, delta_file(loc, 5)))
        assert reads == []
    finally:
        await p.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_start_and_stop_leave_no_socket_file_or_task_behind(request: pytest.FixtureRequest, own_tmp: Path) -> None:
    tmp_path = own_tmp
    b = make_backend(request, "sqlite", "local", "nudge-stop")
    api = await InProcess.start(b, {"COMMIT_OWNER_BACKFILL": "false"})
    try:
        fds = len(os.listdir("/proc/self/fd"))
        tasks = asyncio.all_tasks()
        worker = Backfiller(api.store, api.storage, api.settings, background=True)
        await worker.start()
        path = nudges.address(worker.holder)
        assert path is not None and Path(path).parent == tmp_path / f"commit-owner-{os.getuid()}"
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700, "only this user's processes nudge"
        await worker.stop()
        assert not os.path.exists(path) and list(tmp_path.iterdir()) == [], "the socket and its folder are gone"
        assert asyncio.all_tasks() == tasks
        assert len(os.listdir("/proc/self/fd")) == fds
    finally:
        await api.stop()


def test_only_a_holder_on_this_host_with_a_holder_id_of_ours_has_an_address() -> None:
    here = socket.gethostname()
    assert nudges.address(f"{here}:123:ab12cd34") == os.path.join(nudges.folder(), "123-ab12cd34")
    assert nudges.address("another-host:123:ab12cd34") is None  # the sweep is its fallback
    assert nudges.address("dead-process") is None
    assert nudges.address(f"{here}:123:../x") is None


@pytest.mark.asyncio(loop_scope="session")
async def test_a_socket_folder_open_to_others_is_not_used(own_tmp: Path) -> None:
    folder = own_tmp / f"commit-owner-{os.getuid()}"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    opened = nudges.Nudges.open(f"{socket.gethostname()}:{os.getpid()}:abcdef12", lambda *a: None, lambda *a: None)
    assert opened is None
    assert list(folder.iterdir()) == []


@pytest.mark.asyncio(loop_scope="session")
async def test_the_socket_of_a_process_killed_without_stopping_is_removed_by_the_next_to_open(own_tmp: Path) -> None:
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    folder = own_tmp / f"commit-owner-{os.getuid()}"
    folder.mkdir(mode=0o700)
    left = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    left.bind(str(folder / f"{dead.stdout.strip()}-deadbeef"))  # as a SIGKILLed process leaves it
    left.close()
    opened = nudges.Nudges.open(f"{socket.gethostname()}:{os.getpid()}:abcdef12", lambda *a: None, lambda *a: None)
    assert opened is not None
    try:
        assert [p.name for p in folder.iterdir()] == [f"{os.getpid()}-abcdef12"]
    finally:
        opened.close()
    assert not folder.exists()


def test_a_temporary_directory_too_deep_for_a_socket_path_is_left_for_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    assert nudges.folder("/tmp/" + "d" * 80) == f"/tmp/commit-owner-{os.getuid()}"
    monkeypatch.setattr(tempfile, "tempdir", "/var/tmp")
    assert nudges.folder() == f"/var/tmp/commit-owner-{os.getuid()}"
    monkeypatch.setattr(tempfile, "tempdir", "/tmp/" + "d" * (nudges.MAX_BASE - len("/tmp/")))
    longest = nudges.address(f"{socket.gethostname()}:4194304:ffffffff")
    assert longest is not None and len(longest) <= 107 and longest.startswith("/tmp/ddd")
