"""The log-storage seam's write in two halves (``prepare``, then ``put_prepared`` or ``drop_prepared``;
decision 62), on local disk and on S3 (moto), through the router and wrappers the service uses.

What a reader can see at each step is read by the test's own client of the store (plain files, s3fs), and
on local disk the folder is listed whole, hidden files too: a prepared write leaves nothing behind.
"""

from __future__ import annotations

import os

import pytest

from client.contract.layout import delta_file
from coordinator.metrics import Metrics
from coordinator.storage import StorageRouter
from tests.conftest import make_backend
from tests.inprocess import backend_settings
from tests.support import Backend


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return make_backend(request, "sqlite", request.param, f"prepared-{request.param}")


def _router(backend: Backend) -> StorageRouter:
    metrics = Metrics()
    return StorageRouter(backend_settings(backend), wrap=metrics.wrap_storage)


def _fresh(backend: Backend):  # type: ignore[no-untyped-def]
    fs = backend.fs()
    fs.invalidate_cache()
    return fs


def _everything_in(backend: Backend, folder: str) -> list[str]:
    """Every name in the folder, hidden files too (local disk), or every object under it (S3)."""
    if backend.storage == "local":
        path = folder.removeprefix("file://")
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    return sorted(p.rsplit("/", 1)[-1] for p in _fresh(backend).find(folder.removeprefix("s3://")))



async def test_a_prepared_write_appears_only_when_put_and_leaves_nothing_else(backend: Backend) -> None:
    storage = _router(backend)
    loc = backend.new_location()
    target = delta_file(loc, 1)
    folder = target.rsplit("/", 1)[0]
    try:
        backend_ = storage.for_uri(target)
        prepared = await backend_.prepare(target, b'{"commitInfo":{}}\n')
        assert not backend.exists(target), "nothing is visible once prepared"
        assert await backend_.list_names(folder) == []
        info = await backend_.put_prepared(prepared)
        assert backend.read(target) == b'{"commitInfo":{}}\n'
        assert info.size == len(b'{"commitInfo":{}}\n')
        assert _everything_in(backend, folder) == [target.rsplit("/", 1)[-1]]
        await backend_.drop_prepared(prepared)  # a used write: dropping it changes nothing
        assert backend.read(target) == b'{"commitInfo":{}}\n'
    finally:
        await storage.close()



async def test_a_prepared_write_to_a_taken_name_leaves_the_file_there_untouched(backend: Backend) -> None:
    storage = _router(backend)
    loc = backend.new_location()
    target = delta_file(loc, 2)
    folder = target.rsplit("/", 1)[0]
    try:
        backend_ = storage.for_uri(target)
        prepared = await backend_.prepare(target, b"mine\n")
        await backend_.put_if_absent(target, b"theirs\n")  # somebody else got there first
        with pytest.raises(FileExistsError):
            await backend_.put_prepared(prepared)
        assert backend.read(target) == b"theirs\n"
        assert _everything_in(backend, folder) == [target.rsplit("/", 1)[-1]]
    finally:
        await storage.close()



async def test_a_dropped_write_leaves_nothing(backend: Backend) -> None:
    storage = _router(backend)
    loc = backend.new_location()
    target = delta_file(loc, 3)
    folder = target.rsplit("/", 1)[0]
    try:
        await storage.for_uri(target).put_if_absent(delta_file(loc, 2), b"two\n")
        prepared = await storage.for_uri(target).prepare(target, b"three\n")
        await storage.drop_prepared(prepared)
        await storage.drop_prepared(prepared)  # twice: still nothing, no error
        assert not backend.exists(target)
        assert _everything_in(backend, folder) == [delta_file(loc, 2).rsplit("/", 1)[-1]]
    finally:
        await storage.close()
