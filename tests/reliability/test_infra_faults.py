"""Faults in the infrastructure: the S3 endpoint down or hung, PostgreSQL restarted or crashed."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.checker import check, lister
from harness.faults import FaultLog, make_tables, report, start_services
from harness.netproxy import TcpProxy
from harness.pgcluster import PgCluster, missing_tools
from harness.workload import Workload
from tests.conftest import MotoServer
from tests.support import Backend, migrate

pytestmark = pytest.mark.slow  # database and network faults, process kills


@pytest.fixture
def private_moto(tmp_path: Path) -> Iterator[MotoServer]:
    """A moto server of this test alone (it is frozen on purpose; other tests must not share it)."""
    m = MotoServer(tmp_path)
    m.start()
    yield m
    if m.proc and m.proc.poll() is None:
        m.proc.send_signal(signal.SIGCONT)
    m.stop()


def test_no_acknowledged_commit_is_lost_when_the_s3_endpoint_goes_down_and_hangs(
    request: pytest.FixtureRequest, private_moto: MotoServer, tmp_path: Path,
) -> None:
    url = request.getfixturevalue("pg_database_factory")()
    migrate(url)
    backend = Backend(name="rel-s3", database_url=url, storage="s3", tmp=tmp_path,
                      s3_endpoint=private_moto.endpoint, bucket=private_moto.make_bucket())
    proxy = TcpProxy(private_moto.port).start()
    # The service reaches S3 through the proxy; the checker looks at moto directly.
    (svc,) = start_services(backend, 1, {"COMMIT_OWNER_S3_ENDPOINT_URL": proxy.endpoint,
                                         "COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS": "2"})
    faults = FaultLog()
    try:
        tables = make_tables(svc, 3)
        wl = Workload([svc.endpoint], tables, lister(backend), writers=4, timeout=3.0, deadline=8.0, seed=5).start()
        wl.wait_for_acks(10)
        for _ in range(2):
            ev = faults.inject("S3 endpoint down 2 s (connections refused and reset)")
            proxy.stop()
            time.sleep(2.0)
            proxy.start()
            faults.heal(ev)
            wl.wait_for_acks(5, since=ev.healed, timeout=40)
        assert private_moto.proc is not None
        ev = faults.inject("S3 endpoint hung 2 s (moto SIGSTOP)")
        os.kill(private_moto.proc.pid, signal.SIGSTOP)
        time.sleep(2.0)
        os.kill(private_moto.proc.pid, signal.SIGCONT)
        faults.heal(ev)
        wl.wait_for_acks(5, since=ev.healed, timeout=40)
        history = wl.stop()
        faults.fill_recovery(history.ack_times())
        result = check(backend, tables, history, endpoints=[svc.endpoint])
        report("s3-endpoint", result, faults)
        result.assert_ok()
        assert result.lost == 0 and result.duplicates == 0
    finally:
        svc.stop()
        proxy.stop()


def test_no_acknowledged_commit_is_lost_when_postgresql_restarts_or_crashes(tmp_path: Path) -> None:
    why = missing_tools()
    if why:
        pytest.skip(f"!!! cannot start a throwaway PostgreSQL cluster: {why} !!!")
    pg = PgCluster().init()
    pg.start()
    svc = None
    try:
        url = pg.create_database("reliability")
        migrate(url)
        backend = Backend(name="rel-pg", database_url=url, storage="local", tmp=tmp_path)
        (svc,) = start_services(backend, 1, {"COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS": "2"})
        faults = FaultLog()
        tables = make_tables(svc, 3)
        wl = Workload([svc.endpoint], tables, lister(backend), writers=4, timeout=3.0, deadline=10.0, seed=9).start()
        wl.wait_for_acks(10)
        ev = faults.inject("PostgreSQL restart (pg_ctl restart -m fast)")
        pg.restart()
        faults.heal(ev)
        wl.wait_for_acks(5, since=ev.healed, timeout=40)
        ev = faults.inject("PostgreSQL crash (stop -m immediate), unreachable 2 s")
        pg.stop("immediate")
        time.sleep(2.0)
        pg.start()
        faults.heal(ev)
        wl.wait_for_acks(5, since=ev.healed, timeout=40)
        history = wl.stop()
        faults.fill_recovery(history.ack_times())
        result = check(backend, tables, history, endpoints=[svc.endpoint])
        report("postgresql", result, faults)
        result.assert_ok()
        assert result.lost == 0 and result.duplicates == 0
    finally:
        if svc is not None:
            svc.stop()
        pg.destroy()
