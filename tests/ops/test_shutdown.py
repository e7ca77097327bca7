"""Graceful shutdown: nothing is left behind, and a commit in flight at SIGTERM is answered."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from coordinator.api import create_app
from coordinator.runtime.settings import Settings
from tests.conftest import make_backend
from tests.ops.helpers import pg_connect, pg_connections, post_commit
from tests.support import ROOT, Backend, Service, actions, delta_file, free_port, ndjson, version0, wait_until


async def _exercise(backend: Backend, port: int) -> list[str]:
    """Start the app in this loop, register a table, commit, backfill, stop. Returns leftover task names."""
    import aiohttp
    from aiohttp import web

    settings = Settings.load({"database_url": backend.database_url, "port": port, "backfill_interval_ms": 50,
                              "allow_location": backend.allowed_roots()},
                             environ={})
    runner = web.AppRunner(create_app(settings), handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    base = f"http://127.0.0.1:{port}/api/v1"
    loc = backend.new_location()
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/tables", json={"location": loc, "currentVersion": -1}) as r:
            assert r.status == 201, await r.text()
            table_id = (await r.json())["tableId"]
        backend.write(delta_file(loc, 0), ndjson(version0()))
        for v in (1, 2):
            async with http.post(f"{base}/tables/{table_id}/commits?version={v}", data=ndjson(actions()),
                                 headers={"Content-Type": "application/x-ndjson"}) as r:
                assert r.status == 200, await r.text()
        async with http.post(f"{base}/tables/{table_id}/backfill", json={"version": 2}) as r:
            assert r.status == 200 and (await r.json())["latestBackfilledVersion"] == 2
        async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
            assert r.status == 200
    await runner.cleanup()
    me = asyncio.current_task()
    return sorted(t.get_name() for t in asyncio.all_tasks() if t is not me and not t.done())


def _run_in_fresh_loop(backend: Backend) -> list[str]:
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(asyncio.run(_exercise(backend, free_port())))
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            out.append(e)

    t = threading.Thread(target=target, name="ops-app-loop")
    t.start()
    t.join(60)
    assert not t.is_alive(), "the app did not stop"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


@pytest.mark.parametrize("db", ["postgres", "sqlite"])
def test_start_and_stop_leave_no_task_thread_or_connection_behind(request: pytest.FixtureRequest, db: str) -> None:
    backend = make_backend(request, db, "local", f"ops-leak-{db}")
    if db == "postgres":
        assert pg_connections(backend.database_url) == 0
    threads_before = {t.ident for t in threading.enumerate()}
    leftover_tasks = _run_in_fresh_loop(backend)
    assert leftover_tasks == []
    # storage thread pool, aiosqlite connection threads, the backfiller: all gone
    wait_until(lambda: {t.ident for t in threading.enumerate()} <= threads_before, timeout=5,
               what="threads started by the app to end")
    if db == "postgres":
        wait_until(lambda: pg_connections(backend.database_url) == 0, timeout=5,
                   what="the app's database connections to close")


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_finishes_the_commit_in_flight_and_exits_0(ops_backend: Backend, workers: int) -> None:
    # log format "auto" with stderr going to a file: JSON lines. With 2 workers the supervisor gets the
    # SIGTERM and forwards it; the worker holding the commit answers it before it stops.
    svc = Service(ops_backend, extra_env={"COMMIT_OWNER_LOG_FORMAT": "auto"}, workers=workers).start()
    try:
        loc = ops_backend.new_location()
        table_id = svc.client().register_table(loc, current_version=-1).table_id
        ops_backend.write(delta_file(loc, 0), ndjson(version0()))
        result: list[tuple[int, Any]] = []
        with pg_connect(ops_backend.database_url) as conn:
            with conn.transaction():
                # hold the table's row so that the commit is in the middle of its ratification at SIGTERM
                conn.execute("SELECT 1 FROM owned_tables WHERE table_id = %s FOR UPDATE", (table_id,))
                t = threading.Thread(target=lambda: result.append(post_commit(svc, table_id, 1, actions())[::2]))
                t.start()
                wait_until(lambda: _waiting_on_lock(conn), what="the commit to wait for the row lock")
                assert svc.proc is not None
                svc.proc.send_signal(signal.SIGTERM)
                # it stops accepting at once...
                wait_until(lambda: not _accepts(svc.port), timeout=5, what="the listener to close")
                time.sleep(0.3)
                assert svc.proc.poll() is None, "exited with a commit in flight"
            # ...and the lock is released here: the commit completes and is answered
        t.join(20)
        assert result and result[0][0] == 200, result
        assert result[0][1]["version"] == 1
        assert svc.proc.wait(20) == 0
        records = [json.loads(line) for line in svc.log_text().splitlines() if line.startswith("{")]
        messages = [r["msg"] for r in records if r["logger"] == "commit_owner.serve"]
        assert any("shutting down" in m for m in messages) and messages[-1] == "commit-owner stopped"
        # the commit answered during shutdown was logged before the stop
        [commit_line] = [r for r in records if r["logger"] == "commit_owner.access" and r.get("table_id") == table_id
                         and r["method"] == "POST" and r["path"].endswith("/commits")]
        assert commit_line["outcome"] == "ok" and records.index(commit_line) < len(records) - 1
        with pg_connect(ops_backend.database_url) as conn:
            row = conn.execute("SELECT latest_version FROM owned_tables WHERE table_id = %s", (table_id,)).fetchone()
        assert row[0] == 1
    finally:
        svc.stop()


def _waiting_on_lock(conn: Any) -> bool:
    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock'").fetchone()
    return bool(row[0])


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.mark.parametrize(
    "args",
    [["serve", "--port", "not-a-number"], ["no-such-command"], ["serve", "--commit-dir", "_elsewhere"]],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    from tests.ops.test_cli import cli_here

    res = cli_here(*args)
    assert res.returncode == 2, res.stderr
    assert "Usage" in res.stderr or "error" in res.stderr.lower()


def test_help_documents_the_exit_codes() -> None:
    res = subprocess.run([sys.executable, "-m", "coordinator", "--help"], cwd=str(ROOT), capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0
    for line in ("0  success", "1  the work failed", "2  bad usage", "3  the database schema"):
        assert line in res.stdout, res.stdout
