"""The cloud suites' backends: SQLite and PostgreSQL over Azure (azurite) and Google Cloud Storage (fake-gcs-server).

The fixtures below take the names of the root conftest's (``service``, ``inproc``), so the behaviour suites
imported into this folder's modules run unchanged on the two clouds: one suite over every backend. Backfill batch
size 1, two worker processes (the S3 and local runs cover the other batch sizes; the storage seam does not see
them). The emulators skip loudly, naming the install step, when they are not installed (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from tests.conftest import make_backend
from tests.inprocess import InProcess
from tests.lifecycle.conftest import module_app
from tests.lifecycle.matrix import Place
from tests.support import Backend, Service

CLOUD_BACKENDS = [f"{db}-{cloud}" for cloud in ("azure", "gcs") for db in ("sqlite", "postgres")]


@pytest.fixture(scope="session", params=CLOUD_BACKENDS)
def cloud_backend(request: pytest.FixtureRequest) -> Backend:
    db, storage = request.param.split("-")
    return make_backend(request, db, storage, f"cloud-{request.param}")


@pytest.fixture(scope="session")
def service(request: pytest.FixtureRequest, cloud_backend: Backend) -> Iterator[Service]:
    """The service on each cloud backend, with a database and container or bucket of its own."""
    db, storage = cloud_backend.name.removeprefix("cloud-").split("-")
    own = make_backend(request, db, storage, f"{cloud_backend.name}-svc")
    svc = Service(own, extra_env={"COMMIT_OWNER_BACKFILL_BATCH_SIZE": "1"}, workers=2).start()
    svc.batch_size = 1  # type: ignore[attr-defined]
    yield svc
    svc.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def inproc(cloud_backend: Backend) -> AsyncIterator[InProcess]:
    """The real app in this process on each cloud backend (backfill after every commit)."""
    app = await InProcess.start(cloud_backend)
    yield app
    await app.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=CLOUD_BACKENDS)
async def lifecycle_app(request: pytest.FixtureRequest) -> AsyncIterator[InProcess]:
    """The lifecycle matrix's app (tests/lifecycle/matrix.py) on each cloud backend, a database and container or
    bucket of this module's own."""
    async for app in module_app(request):
        yield app


@pytest.fixture
def place(lifecycle_app: InProcess) -> Place:
    return Place(lifecycle_app, lifecycle_app.backend.new_location())
