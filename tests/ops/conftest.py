"""Fixtures of the operations tests: a service on a backend of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import make_backend
from tests.support import Backend, Service, free_port


@pytest.fixture(scope="session")
def ops_backend(request: pytest.FixtureRequest) -> Backend:
    """PostgreSQL + local disk, used only by the operations tests."""
    return make_backend(request, "postgres", "local", "ops")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def svc(request: pytest.FixtureRequest) -> Iterator[Service]:
    """A running owner (backfill after every commit) on its own database of each kind, local disk, one per test
    module (the maintenance tests': optimize, the maintain policy)."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    backend = make_backend(request, request.param, "local", f"{module}-{request.param}")
    s = Service(backend).start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def manual_service(ops_backend: Backend) -> Iterator[Service]:
    """A service whose backfiller does not run by itself (it backfills only when asked), so backlogs stay
    put; its S3 endpoint is a port where nothing listens (a storage that is down)."""
    svc = Service(ops_backend, extra_env={
        "COMMIT_OWNER_BACKFILL": "false",
        "COMMIT_OWNER_ALLOW_LOCATION": ops_backend.allowed_roots() + ",s3://nowhere/",
        "COMMIT_OWNER_S3_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "COMMIT_OWNER_S3_ACCESS_KEY_ID": "nobody", "COMMIT_OWNER_S3_SECRET_ACCESS_KEY": "nothing",
    }).start()
    yield svc
    svc.stop()
