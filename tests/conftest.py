"""Shared fixtures: a fresh PostgreSQL database per run, a moto S3 server, backends and services.

Backends: SQLite (a file) and PostgreSQL, each over local disk and S3 (moto server on 127.0.0.1); the cloud
suites (tests/clouds/) add Azure (azurite) and Google Cloud Storage (fake-gcs-server), emulators started here
(harness/emulators.py) that skip loudly, naming the install step, when they are not installed.
Set COMMIT_OWNER_TEST_DATABASE_URL to use another PostgreSQL server; when none is reachable the
PostgreSQL backends skip with a loud reason.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.inprocess import InProcess
from tests.support import Backend, MotoServer, Service, migrate

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@pytest.fixture(scope="session")
def pg_admin_url() -> str | None:
    url = os.environ.get("COMMIT_OWNER_TEST_DATABASE_URL", PG_DEFAULT)
    try:
        import psycopg
        from sqlalchemy.engine import make_url

        u = make_url(url)
        with psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, password=u.password,
                             dbname=u.database or "postgres", connect_timeout=3):
            pass
    except Exception as e:  # noqa: BLE001
        print(f"\n!!! PostgreSQL not reachable at {url} ({e}); PostgreSQL tests will be SKIPPED !!!\n",
              file=sys.stderr)
        return None
    return url


@pytest.fixture(scope="session")
def pg_database_factory(pg_admin_url: str | None) -> Iterator:
    """Creates fresh PostgreSQL databases (dropped at the end of the run)."""
    import psycopg
    from sqlalchemy.engine import make_url

    created: list[str] = []

    def make(options: str = "") -> str:
        """A fresh database; ``options`` are CREATE DATABASE's own (a collation, say)."""
        if pg_admin_url is None:
            pytest.skip("PostgreSQL not reachable (set COMMIT_OWNER_TEST_DATABASE_URL)")
        u = make_url(pg_admin_url)
        name = f"commit_owner_test_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, password=u.password,
                             dbname=u.database or "postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" {options}')
        created.append(name)
        return u.set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)

    yield make
    if pg_admin_url is not None and created:
        u = make_url(pg_admin_url)
        with psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, password=u.password,
                             dbname=u.database or "postgres", autocommit=True) as conn:
            for name in created:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    server.start()
    yield server
    server.stop()


def _emulator(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from harness.emulators import AzuriteServer, FakeGcsServer, missing

    why = missing(kind)
    if why is not None:
        print(f"\n!!! SKIPPING the {kind} suites: {why} !!!", file=sys.stderr)
        pytest.skip(why)
    server = (AzuriteServer if kind == "azure" else FakeGcsServer)(tmp_path_factory.mktemp(kind))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """azurite's Blob service on 127.0.0.1 (harness/emulators.py)."""
    yield from _emulator("azure", tmp_path_factory)


@pytest.fixture(scope="session")
def fake_gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """fake-gcs-server on 127.0.0.1 (harness/emulators.py)."""
    yield from _emulator("gcs", tmp_path_factory)


def make_backend(request: pytest.FixtureRequest, db: str, storage: str, name: str) -> Backend:
    tmp = request.getfixturevalue("tmp_path_factory").mktemp(name)
    if db == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/owner.db"
    else:
        url = request.getfixturevalue("pg_database_factory")()
    b = Backend(name=name, database_url=url, storage=storage, tmp=tmp)
    if storage == "s3":
        m = request.getfixturevalue("moto")
        b.s3_endpoint, b.bucket = m.endpoint, m.make_bucket()
    elif storage == "azure":
        az = request.getfixturevalue("azurite")
        b.azure_endpoint, b.azure_account, b.azure_key = az.endpoint, az.account, az.key
        b.bucket = az.make_container()
    elif storage == "gcs":
        g = request.getfixturevalue("fake_gcs")
        b.gcs_endpoint, b.bucket = g.endpoint, g.make_bucket()
    migrate(url)
    return b


BACKENDS = [("sqlite", "local"), ("sqlite", "s3"), ("postgres", "local"), ("postgres", "s3")]


@pytest.fixture(scope="session", params=[f"{d}-{s}" for d, s in BACKENDS])
def backend(request: pytest.FixtureRequest) -> Backend:
    db, storage = request.param.split("-")
    return make_backend(request, db, storage, request.param)


@pytest.fixture(scope="session", params=[f"{d}-{s}" for d, s in BACKENDS])
def inproc_backend(request: pytest.FixtureRequest) -> Backend:
    """Every backend again, with its own database and bucket: an in-process app's background backfiller
    sweeps every table of its database, and must not publish the subprocess suites' tables."""
    db, storage = request.param.split("-")
    return make_backend(request, db, storage, request.param + "-inproc")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def inproc(inproc_backend: Backend) -> AsyncIterator[InProcess]:
    """The real app in this process on every backend (backfill after every commit), served on 127.0.0.1."""
    app = await InProcess.start(inproc_backend)
    yield app
    await app.stop()


@pytest.fixture(scope="session")
def local_backend(request: pytest.FixtureRequest) -> Backend:
    """SQLite + local disk: the embedded default."""
    return make_backend(request, "sqlite", "local", "embedded")


@pytest.fixture(scope="session")
def owner_service(local_backend: Backend) -> Iterator[Service]:
    """A running service on the embedded default (SQLite + local disk, backfill after every commit)."""
    svc = Service(local_backend).start()
    yield svc
    svc.stop()


@pytest.fixture(scope="session", params=[1, 2, 100], ids=lambda b: f"batch{b}")
def batch_size(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.fixture(scope="session")
def service(request: pytest.FixtureRequest, backend: Backend, batch_size: int) -> Iterator[Service]:
    """The service on every backend and backfill batch size (the behaviour-suite matrix). A database and
    bucket of its own, of the backend's kind: its background backfiller sweeps every table of its database
    and must not publish another suite's tables while that suite pictures a refusal."""
    db, storage = backend.name.split("-")
    own = make_backend(request, db, storage, f"{backend.name}-batch{batch_size}")
    # Two workers: the contract holds whichever process answers (issue 19).
    svc = Service(own, extra_env={"COMMIT_OWNER_BACKFILL_BATCH_SIZE": str(batch_size)}, workers=2).start()
    svc.batch_size = batch_size  # type: ignore[attr-defined]
    yield svc
    svc.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # run the fast suites first; Spark and fault-injection suites last
    def rank(item: pytest.Item) -> int:
        p = str(item.fspath)
        return 2 if ("/spark/" in p or "/reliability/" in p) else 0

    items.sort(key=rank)


@pytest.fixture
def tmp_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)
