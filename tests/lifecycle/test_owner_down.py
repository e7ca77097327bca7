"""Failing fast and clearly when the owner is down or the URL is wrong; retrying real transient faults.

Every call here is against a real closed port (bound, then closed: nothing listens) and is timed. A client that
has never reached its owner gives up within seconds, with an UnavailableError (exit code 2 on the command line)
that names the URL and what to check, and changes nothing. A fault after the owner answered (a reply lost on a
real TCP proxy) is still retried, with a visible warning per retry.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from client import CommitOwnerClient, UnavailableError, write_table
from client.snapshot import load_snapshot
from tests.support import ROOT, ReplyDroppingProxy, Service, actions, create_owned_table

#: Loose upper bound of a fail-fast (the client's own bound is about one second of quick tries).
FAST = 10.0
SCHEMA = '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}'


@pytest.fixture
def closed_endpoint() -> str:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now: every connect is refused
    return f"http://127.0.0.1:{port}"


def tree(where: Path) -> set[str]:
    return {str(p.relative_to(where)) for p in where.rglob("*")} if where.exists() else set()


def _says_where_and_what(message: str, endpoint: str) -> None:
    assert f"cannot reach the commit owner at {endpoint}" in message, message
    assert "connection refused" in message and "is it running" in message, message
    assert "COMMIT_OWNER_ENDPOINT" in message and "--endpoint" in message, message


@pytest.mark.parametrize("call", ["register_table", "commit", "get_commits", "get_table", "backfill_to_version",
                                  "list_tables"])
def test_every_client_call_fails_within_seconds_naming_the_url(call: str, closed_endpoint: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    c = CommitOwnerClient(closed_endpoint)  # the defaults: a write's deadline is 120 s once the owner answered
    calls = {
        "register_table": lambda: c.register_table("/tmp/never-registered"),
        "commit": lambda: c.commit(str(uuid.uuid4()), 1, actions()),
        "get_commits": lambda: c.get_commits(str(uuid.uuid4())),
        "get_table": lambda: c.get_table(str(uuid.uuid4())),
        "backfill_to_version": lambda: c.backfill_to_version(str(uuid.uuid4()), 3),
        "list_tables": c.list_tables,
    }
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="client.http"), pytest.raises(UnavailableError) as err:
        calls[call]()
    waited = time.monotonic() - started
    assert waited < FAST, f"{call} waited {waited:.1f} s on a closed port"
    _says_where_and_what(err.value.message, closed_endpoint)
    # a commit that never reached the owner is known not to have landed: not CommitStateUnknownError
    assert type(err.value) is UnavailableError
    # the quick tries were visible, with their count
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert len(retries) == 2 and "retry 1/2" in retries[0] and "retry 2/2" in retries[1], retries
    assert all(closed_endpoint in m and "connection refused" in m for m in retries)


def test_write_table_of_a_new_table_fails_within_seconds_and_writes_nothing(closed_endpoint: str,
                                                                            tmp_path: Path) -> None:
    where = tmp_path / "t"
    before = tree(tmp_path)
    started = time.monotonic()
    with pytest.raises(UnavailableError) as err:
        write_table(pa.table({"id": [1, 2]}), where.as_uri(), endpoint=closed_endpoint)
    waited = time.monotonic() - started
    assert waited < FAST, f"write_table waited {waited:.1f} s on a closed port"
    _says_where_and_what(err.value.message, closed_endpoint)
    assert tree(tmp_path) == before  # no data file, no log


def test_reading_an_owned_table_whose_owner_stopped_fails_within_seconds(closed_endpoint: str, tmp_path: Path,
                                                                        owner_service: Service) -> None:
    """getCommits through the client: the table names a live owner, the reader is pointed at a dead one."""
    loc = (tmp_path / "owned").as_uri()
    write_table(pa.table({"id": [1]}), loc, client=owner_service.client())
    before = tree(tmp_path)
    started = time.monotonic()
    with pytest.raises(UnavailableError) as err:
        load_snapshot(loc, owner_endpoint=closed_endpoint)
    assert time.monotonic() - started < FAST
    _says_where_and_what(err.value.message, closed_endpoint)
    assert "owner_endpoint=" in err.value.message  # where the endpoint came from
    assert tree(tmp_path) == before


def _cli(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMIT_OWNER_")}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "coordinator", *args], cwd=str(ROOT), capture_output=True, text=True,
                         timeout=150, env=env)
    return out, time.monotonic() - started


@pytest.mark.parametrize("command", ["tables create", "tables release", "backfill"])
def test_cli_commands_fail_within_seconds_naming_the_url(command: str, closed_endpoint: str, tmp_path: Path) -> None:
    where = tmp_path / "t"
    args = {
        "tables create": ["tables", "create", "--location", str(where), "--schema", SCHEMA],
        "tables release": ["tables", "release", str(uuid.uuid4())],
        "backfill": ["backfill", "--table", str(uuid.uuid4())],
    }[command]
    before = tree(tmp_path)
    out, waited = _cli(*args, "--endpoint", closed_endpoint)
    # the interpreter's start and imports are part of it; the owner's part is about a second
    assert waited < FAST + 5, f"`commit-owner {command}` took {waited:.1f} s on a closed port"
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), out.stderr
    _says_where_and_what(last, closed_endpoint)
    assert "retry 2/2" in out.stderr  # the quick tries are visible
    assert tree(tmp_path) == before


def test_a_lost_reply_after_the_owner_answered_is_still_retried_visibly(owner_service: Service,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    table_id, loc = create_owned_table(owner_service)
    # the proxy passes the first exchange (the owner is reached), then cuts off the commit's reply once
    proxy = ReplyDroppingProxy(owner_service.port, drop=1, match=lambda req: b"/commits?version=" in req)
    try:
        c = CommitOwnerClient(proxy.endpoint, deadline=30)
        assert c.get_table(table_id).latest_table_version == -1  # registered; version 0 is in the log
        with caplog.at_level(logging.WARNING, logger="client.http"):
            r = c.commit(table_id, 1, actions())
        c.close()
    finally:
        proxy.close()
    assert proxy.dropped == 1 and r.version == 1
    retries = [m.getMessage() for m in caplog.records if "retry" in m.getMessage()]
    assert retries and "retry 1 " in retries[0] and "left of 30 s" in retries[0], retries
    assert owner_service.client().get_commits(table_id).latest_table_version == 1  # one version, not two
