"""Fixtures of the lifecycle tests.

``lifecycle_app`` and ``place``: the owner in this process on every backend and a fresh table location on it
(tests/lifecycle/matrix.py).

``lifecycle_s3``: a real moto S3 server on 127.0.0.1 (one per session) and a fresh prefix of one bucket per
test, as ``(bucket/prefix, storage_options)``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from tests.conftest import BACKENDS, make_backend
from tests.inprocess import InProcess
from tests.lifecycle.matrix import QUIET, Place


@pytest.fixture(scope="session")
def _lifecycle_moto() -> Iterator[str]:
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{server._server.server_port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def _lifecycle_bucket(_lifecycle_moto: str) -> str:
    import boto3

    bucket = f"lc-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=_lifecycle_moto, aws_access_key_id="test", aws_secret_access_key="test",
                 region_name="us-east-1").create_bucket(Bucket=bucket)
    return bucket


@pytest.fixture
def lifecycle_s3(_lifecycle_moto: str, _lifecycle_bucket: str) -> tuple[str, dict[str, Any]]:
    # A fresh prefix of the session's bucket per test: the service's --allow-location names that bucket.
    bucket = f"{_lifecycle_bucket}/t-{uuid.uuid4().hex[:12]}"
    options = {"key": "test", "secret": "test",
               "client_kwargs": {"endpoint_url": _lifecycle_moto, "region_name": "us-east-1"}}
    return bucket, options


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def lifecycle_service(tmp_path_factory, _lifecycle_moto: str, _lifecycle_bucket: str) -> Iterator[str]:
    """A real ``commit-owner serve`` (SQLite + local disk, S3 through the moto server) for these tests.

    Backfill batch size 100: nothing is published behind the tests' backs, except what the protocol
    publishes at once (a release commit) and what a test asks for with backfill_to_version.
    """
    import os
    import subprocess
    import sys
    import time
    import urllib.request

    from client import CommitOwnerClient

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    db = tmp_path_factory.mktemp("owner-db") / "owner.db"
    url = f"sqlite+aiosqlite:///{db}"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "PYTHONPATH": root}
    subprocess.run([sys.executable, "-m", "coordinator", "migrate", "--create", "--database-url", url], check=True, cwd=root,
                   env=env, capture_output=True)
    port = _free_port()
    log = open(tmp_path_factory.mktemp("owner-log") / "serve.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "serve", "--database-url", url, "--host", "127.0.0.1",
         "--port", str(port), "--backfill-batch-size", "100", "--max-unbackfilled-commits", "1000",
         "--s3-endpoint-url", _lifecycle_moto, "--s3-region", "us-east-1",
         "--allow-location", f"file://{tmp_path_factory.getbasetemp()}", "--allow-location", f"s3://{_lifecycle_bucket}/"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # wait for readiness, not for a time
            if proc.poll() is not None:
                raise RuntimeError(f"commit-owner serve exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(endpoint + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("commit-owner serve did not become ready")
        with CommitOwnerClient(endpoint):
            pass
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def owner(lifecycle_service: str) -> Iterator[Any]:
    """A client of the lifecycle tests' service."""
    from client import CommitOwnerClient

    with CommitOwnerClient(lifecycle_service, deadline=30) as c:
        yield c


async def module_app(request: pytest.FixtureRequest) -> AsyncIterator[InProcess]:
    """The owner in this process on the backend ``request.param`` names (``<db>-<storage>``), with a database and
    bucket of the requesting module's own."""
    db, storage = request.param.split("-")
    module = request.module.__name__.rsplit(".", 1)[-1]
    app = await InProcess.start(make_backend(request, db, storage, f"{module}-{request.param}"), QUIET)
    yield app
    await app.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=[f"{d}-{s}" for d, s in BACKENDS])
async def lifecycle_app(request: pytest.FixtureRequest) -> AsyncIterator[InProcess]:
    """The owner in this process on every backend, with a database and bucket of this module's own."""
    async for app in module_app(request):
        yield app


@pytest.fixture
def place(lifecycle_app: InProcess) -> Place:
    return Place(lifecycle_app, lifecycle_app.backend.new_location())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A test marked slow_on_s3 is slow (pytest -m "not slow" leaves it out) on the two S3 backends only.
    for item in items:
        callspec = getattr(item, "callspec", None)
        if item.get_closest_marker("slow_on_s3") and callspec is not None \
                and str(callspec.params.get("lifecycle_app", "")).endswith("-s3"):
            item.add_marker(pytest.mark.slow)
