"""The log-storage seam's write in two halves (``prepare``, then ``put_prepared`` or ``drop_prepared``;
decision 62), on local disk, S3 (moto), Azure (azurite) and GCS (fake-gcs-server), through the router and
wrappers the service uses.

What a reader can see at each step is read by the test's own client of the store (plain files, s3fs, adlfs,
gcsfs), and
on local disk the folder is listed whole, hidden files too: a prepared write leaves nothing behind. The clouds
prepare nothing (the whole write is the conditional upload of ``put_prepared``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from client.contract.layout import delta_file, object_key
from coordinator.runtime.metrics import Metrics
from coordinator.storage import StorageRouter, metered
from tests.conftest import make_backend
from tests.inprocess import backend_settings
from tests.support import Backend


@pytest.fixture(params=["local", "s3", "azure", "gcs"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return make_backend(request, "sqlite", request.param, f"prepared-{request.param}")


@dataclass
class Place:
    """The router the service would build for ``backend``, a fresh table's ``<v>.json`` and its folder."""

    storage: StorageRouter
    loc: str
    target: str

    @property
    def folder(self) -> str:
        return self.target.rsplit("/", 1)[0]

    @property
    def name(self) -> str:
        return self.target.rsplit("/", 1)[-1]


@pytest_asyncio.fixture
async def place(backend: Backend) -> AsyncIterator[Place]:
    storage = StorageRouter(backend_settings(backend), wrap=metered(Metrics()))
    loc = backend.new_location()
    yield Place(storage, loc, delta_file(loc, 3))
    await storage.close()


def _fresh(backend: Backend):  # type: ignore[no-untyped-def]
    fs = backend.fs()
    fs.invalidate_cache()
    return fs


def _everything_in(backend: Backend, folder: str) -> list[str]:
    """Every name in the folder, hidden files too (local disk), or every object under it (S3, Azure, GCS)."""
    if backend.storage == "local":
        path = folder.removeprefix("file://")
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    return sorted(p.rsplit("/", 1)[-1] for p in _fresh(backend).find(object_key(folder)))


async def test_a_prepared_write_appears_only_when_put_and_leaves_nothing_else(backend: Backend, place: Place) -> None:
    store = place.storage.for_uri(place.target)
    prepared = await store.prepare(place.target, b'{"commitInfo":{}}\n')
    assert not backend.exists(place.target), "nothing is visible once prepared"
    assert await store.list_names(place.folder) == []
    info = await store.put_prepared(prepared)
    assert backend.read(place.target) == b'{"commitInfo":{}}\n'
    assert info.size == len(b'{"commitInfo":{}}\n')
    assert _everything_in(backend, place.folder) == [place.name]
    await store.drop_prepared(prepared)  # a used write: dropping it changes nothing
    assert backend.read(place.target) == b'{"commitInfo":{}}\n'


async def test_a_prepared_write_to_a_taken_name_leaves_the_file_there_untouched(backend: Backend, place: Place) -> None:
    store = place.storage.for_uri(place.target)
    prepared = await store.prepare(place.target, b"mine\n")
    await store.put_if_absent(place.target, b"theirs\n")  # somebody else got there first
    with pytest.raises(FileExistsError):
        await store.put_prepared(prepared)
    assert backend.read(place.target) == b"theirs\n"
    assert _everything_in(backend, place.folder) == [place.name]


async def test_a_dropped_write_leaves_nothing(backend: Backend, place: Place) -> None:
    earlier = delta_file(place.loc, 2)
    await place.storage.for_uri(earlier).put_if_absent(earlier, b"two\n")
    prepared = await place.storage.for_uri(place.target).prepare(place.target, b"three\n")
    await place.storage.drop_prepared(prepared)
    await place.storage.drop_prepared(prepared)  # twice: still nothing, no error
    assert not backend.exists(place.target)
    assert _everything_in(backend, place.folder) == [earlier.rsplit("/", 1)[-1]]
