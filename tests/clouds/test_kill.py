"""SIGKILL on the service while writers commit to tables on Azure (azurite) and Google Cloud Storage
(fake-gcs-server), PostgreSQL store: every acknowledged commit is in the log after the restart, none twice, the
versions contiguous (the local-disk test's own run, tests/reliability/test_service_kill.py)."""

from __future__ import annotations

import pytest

from tests.conftest import make_backend
from tests.reliability.test_service_kill import kill_restart_and_check

pytestmark = pytest.mark.slow  # process kills


@pytest.mark.parametrize("storage", ["azure", "gcs"])
def test_no_acknowledged_commit_is_lost_when_the_service_is_killed_on_a_cloud(request: pytest.FixtureRequest,
                                                                             storage: str) -> None:
    backend = make_backend(request, "postgres", storage, f"cloud-kill-{storage}")
    kill_restart_and_check(backend, f"cloud-kill-{storage}", tables=2, writers=3, kills=2, seed=7, min_acks=20)
