"""A hung PostgreSQL (every process of its cluster stopped with SIGSTOP, as a frozen host or a network
partition looks): the owner answers 503 retryable within its deadline, never 500, never hangs; a restarted
owner is refused quickly (not after minutes of connect timeouts); after SIGCONT everything works again, with
no acknowledged commit lost or duplicated."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from coordinator.api.v1 import V1
from harness.checker import check, lister
from harness.faults import FaultLog, make_tables, report, start_services
from harness.pgcluster import PgCluster, missing_tools
from harness.workload import Workload
from harness.world import ROOT
from tests.support import Backend, migrate

pytestmark = pytest.mark.slow  # a server of its own, frozen on purpose

DEADLINE = 2.0  # the owner's request_timeout_seconds here
OWNER_ENV = {"COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS": str(DEADLINE), "COMMIT_OWNER_DB_CONNECT_TIMEOUT_SECONDS": "2"}


def timed_get(url: str) -> tuple[float, int, dict[str, Any]]:
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            status, body = r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        status, body = e.code, json.loads(e.read())
    return time.monotonic() - t0, status, body


def test_a_hung_database_gets_503_retryable_within_the_deadline_and_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    why = missing_tools()
    if why:
        pytest.skip(f"!!! cannot start a throwaway PostgreSQL cluster: {why} !!!")
    pg = PgCluster().init()
    pg.start()
    svc = None
    frozen = False
    try:
        url = pg.create_database("hung")
        migrate(url)
        backend = Backend(name="rel-hung", database_url=url, storage="local", tmp=tmp_path)
        (svc,) = start_services(backend, 1, OWNER_ENV)
        faults = FaultLog()
        tables = make_tables(svc, 3)
        wl = Workload([svc.endpoint], tables, lister(backend), writers=4, timeout=5.0, deadline=20.0, seed=27).start()
        wl.wait_for_acks(10)

        caplog.set_level(logging.WARNING, logger="client.http")
        ev = faults.inject("PostgreSQL hung 8 s (SIGSTOP of every process of its cluster)")
        pg.freeze()
        frozen = True
        hung_at = time.monotonic()
        # A read of the store and the readiness probe: each answered within the deadline, 503 retryable
        took, status, body = timed_get(f"{svc.endpoint}{V1}/tables/{tables[0].table_id}/commits")
        assert status == 503 and body["error"]["code"] == "UNAVAILABLE" and body["error"]["retryable"] is True, body
        assert took < DEADLINE + 1.5, took
        took, status, body = timed_get(f"{svc.endpoint}/readyz")
        assert status == 503 and body["checks"]["database"] != "ok", body
        assert took < DEADLINE + 1.5, took

        # An owner started now is refused at once (the connect timeout, not minutes), naming the database
        t0 = time.monotonic()
        env = {**backend.env(), **OWNER_ENV, "COMMIT_OWNER_PORT": "0", "COMMIT_OWNER_LOG_FORMAT": "text"}
        started = subprocess.run([sys.executable, "-m", "coordinator", "serve"], env={**os.environ, **env},
                                 cwd=str(ROOT), capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
        assert started.returncode != 0 and took < 15, (took, started.returncode)
        assert "cannot use the database: connection timeout expired" in started.stderr, started.stderr[-2000:]

        time.sleep(max(0.0, 8.0 - (time.monotonic() - hung_at)))
        pg.thaw()
        frozen = False
        faults.heal(ev)
        wl.wait_for_acks(5, since=ev.healed, timeout=40)
        took, status, body = timed_get(f"{svc.endpoint}/readyz")
        assert status == 200, body

        history = wl.stop()
        faults.fill_recovery(history.ack_times())
        # The writers' clients saw 503s while it hung (and retried them), never a 500
        seen = [r.getMessage() for r in caplog.records if r.name == "client.http"]
        assert any("(503 UNAVAILABLE)" in m for m in seen), "the freeze was never seen"
        assert not [m for m in seen if "(500" in m], seen
        assert not [o.error for o in history.ops if o.error.startswith("INTERNAL")], history.ops
        result = check(backend, tables, history, endpoints=[svc.endpoint])
        report("postgresql-hung", result, faults)
        result.assert_ok()
        assert result.lost == 0 and result.duplicates == 0
        # The log names the driver's error behind each 503, not only its class
        assert "cause: psycopg.OperationalError" in svc.log_text()
    finally:
        if frozen:
            pg.thaw()
        if svc is not None:
            svc.stop()
        pg.destroy()
