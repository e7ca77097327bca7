"""SIGKILL on the service while writers commit to tables on Azure (azurite) and Google Cloud Storage
(fake-gcs-server), PostgreSQL store: every acknowledged commit is in the log after the restart, none twice, the
versions contiguous (harness/checker.py, the checks the chaos run makes)."""

from __future__ import annotations

import time

import pytest

from harness.checker import check, lister
from harness.faults import FaultLog, make_tables, report, start_services
from harness.workload import Workload
from tests.conftest import make_backend

pytestmark = pytest.mark.slow  # process kills


@pytest.mark.parametrize("storage", ["azure", "gcs"])
def test_no_acknowledged_commit_is_lost_when_the_service_is_killed_on_a_cloud(request: pytest.FixtureRequest,
                                                                             storage: str) -> None:
    backend = make_backend(request, "postgres", storage, f"cloud-kill-{storage}")
    (svc,) = start_services(backend, 1, workers=1)
    faults = FaultLog()
    try:
        tables = make_tables(svc, 2)
        wl = Workload([svc.endpoint], tables, lister(backend), writers=3, timeout=2.0, deadline=8.0, seed=7).start()
        wl.wait_for_acks(10)
        for _ in range(2):
            time.sleep(0.7)  # commits in flight at the moment of the kill
            ev = faults.inject("service SIGKILL + restart")
            svc.kill()
            svc.start()  # same port: the writers' retries find it again
            faults.heal(ev)
            wl.wait_for_acks(5, since=ev.healed)
        history = wl.stop()
        faults.fill_recovery(history.ack_times())
        result = check(backend, tables, history, endpoints=[svc.endpoint])
        report(f"cloud-kill-{storage}", result, faults)
        result.assert_ok()
        assert result.acknowledged >= 20
        assert result.lost == 0 and result.duplicates == 0
    finally:
        svc.stop()
