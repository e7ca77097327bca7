"""Fixtures of the operations tests: services on backends of their own."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.conftest import make_backend
from tests.support import Backend, Service, free_port


@pytest.fixture(scope="module")
def pg_local(request: pytest.FixtureRequest) -> Backend:
    """PostgreSQL + local disk, private to one test module."""
    return make_backend(request, "postgres", "local", f"ops-{request.module.__name__.rsplit('.', 1)[-1]}")


@pytest.fixture(scope="module")
def manual_service(pg_local: Backend) -> Iterator[Service]:
    """A service whose backfiller does not run by itself (backfills only when asked), so backlogs stay
    put; S3 points at a port where nothing listens (a storage that is down)."""
    svc = Service(pg_local, extra_env={
        "COMMIT_OWNER_BACKFILL": "false",
        "COMMIT_OWNER_S3_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "COMMIT_OWNER_S3_ACCESS_KEY_ID": "nobody", "COMMIT_OWNER_S3_SECRET_ACCESS_KEY": "nothing",
    }).start()
    yield svc
    svc.stop()
