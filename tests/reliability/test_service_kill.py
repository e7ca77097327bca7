"""Faults on the service processes: SIGKILL + restart, and several processes on one database."""

from __future__ import annotations

import os
import signal
import time

import pytest

from harness.checker import check, lister
from harness.faults import FaultLog, make_tables, report, start_services
from harness.workload import Workload
from tests.conftest import make_backend
from tests.support import Backend, wait_until

pytestmark = pytest.mark.slow  # process kills


def kill_restart_and_check(backend: Backend, label: str, *, workers: int = 1, tables: int = 3, writers: int = 4,
                           kills: int = 3, seed: int = 1, min_acks: int = 25) -> None:
    """Writers commit to ``tables`` tables while the service is SIGKILLed and restarted ``kills`` times; then every
    acknowledged commit is in the log once, the versions contiguous (harness/checker.py)."""
    (svc,) = start_services(backend, 1, workers=workers)
    faults = FaultLog()
    try:
        made = make_tables(svc, tables)
        wl = Workload([svc.endpoint], made, lister(backend), writers=writers, timeout=2.0, deadline=8.0,
                      seed=seed).start()
        wl.wait_for_acks(10)
        for _ in range(kills):
            time.sleep(0.7)  # let commits be in flight at the moment of the kill
            ev = faults.inject("service SIGKILL + restart")
            svc.kill()
            svc.start()  # same port: the writers' retries find it again
            faults.heal(ev)
            wl.wait_for_acks(5, since=ev.healed)
        history = wl.stop()
        faults.fill_recovery(history.ack_times())
        result = check(backend, made, history, endpoints=[svc.endpoint])
        report(label, result, faults)
        result.assert_ok()
        assert result.acknowledged >= min_acks
        assert result.lost == 0 and result.duplicates == 0
    finally:
        svc.stop()


@pytest.mark.parametrize("workers", [1, 2])
def test_no_acknowledged_commit_is_lost_when_the_service_is_killed_and_restarted(request: pytest.FixtureRequest,
                                                                                  workers: int) -> None:
    # With 2 workers the SIGKILL hits the supervisor; its workers die with it (PR_SET_PDEATHSIG).
    backend = make_backend(request, "postgres", "local", f"rel-kill-w{workers}")
    kill_restart_and_check(backend, f"service-kill-w{workers}", workers=workers)


def test_no_acknowledged_commit_is_lost_when_workers_are_killed_and_the_supervisor_restarts_them(
        request: pytest.FixtureRequest) -> None:
    backend = make_backend(request, "postgres", "local", "rel-worker-kill")
    (svc,) = start_services(backend, 1, workers=2)
    faults = FaultLog()
    try:
        tables = make_tables(svc, 3)
        wl = Workload([svc.endpoint], tables, lister(backend), writers=4, timeout=2.0, deadline=8.0, seed=2).start()
        wl.wait_for_acks(10)
        for i in range(3):
            time.sleep(0.7)
            victim = svc.worker_pids()[i % 2]
            ev = faults.inject(f"worker SIGKILL (pid {victim}), the supervisor restarts it")
            os.kill(victim, signal.SIGKILL)
            wait_until(lambda: len(svc.worker_pids()) == 2 and victim not in svc.worker_pids(),  # noqa: B023
                       timeout=30, what="the supervisor to replace the killed worker")
            faults.heal(ev)
            wl.wait_for_acks(5, since=ev.injected)
        history = wl.stop()
        faults.fill_recovery(history.ack_times())
        result = check(backend, tables, history, endpoints=[svc.endpoint])
        report("worker-kill", result, faults)
        result.assert_ok()
        assert result.acknowledged >= 25
        assert result.lost == 0 and result.duplicates == 0
        assert svc.proc is not None and svc.proc.poll() is None  # the supervisor itself never went down
    finally:
        svc.stop()


@pytest.mark.parametrize("n", [2, 3])
def test_services_sharing_one_database_lose_nothing_when_one_is_killed(request: pytest.FixtureRequest, n: int) -> None:
    backend = make_backend(request, "postgres", "local", f"rel-ha{n}")
    svcs = start_services(backend, n)
    faults = FaultLog()
    try:
        tables = make_tables(svcs[0], 3)
        # Writers spread over the services; each fails over to the next one when its own is gone.
        wl = Workload([s.endpoint for s in svcs], tables, lister(backend), writers=2 * n, timeout=2.0,
                      deadline=3.0, seed=n).start()
        wl.wait_for_acks(10)
        time.sleep(0.7)
        ev = faults.inject(f"1 of {n} services SIGKILL (not restarted)")
        svcs[0].kill()
        faults.heal(ev)  # the survivors take over at once: recovery = time to the next ack
        wl.wait_for_acks(15, since=ev.injected)
        time.sleep(1.0)
        history = wl.stop()
        faults.fill_recovery(history.ack_times())
        survivors = [s.endpoint for s in svcs[1:]]
        result = check(backend, tables, history, endpoints=survivors)
        report(f"ha-{n}", result, faults)
        result.assert_ok()
        assert result.lost == 0 and result.duplicates == 0
        # Every survivor kept committing after the kill (writers homed on them never stopped).
        assert wl.acks_since(ev.injected) >= 15
    finally:
        for s in svcs:
            s.stop()


