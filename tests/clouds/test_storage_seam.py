"""The log-storage seam's contract (coordinator/storage/base.py) on every backend: local disk, S3 (moto), Azure
(azurite) and Google Cloud Storage (fake-gcs-server), through the router and wrappers the service uses.

What is in storage is looked at with the test's own client of the store (``Backend.fs()``: plain files, s3fs,
adlfs, gcsfs), never through the backend under test. Bad locations (a bucket or container that does not exist,
another Azure account) are refused at registration with a 400 naming it, and nothing changes: no row in the
database, nothing in storage.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from client.contract.errors import InvalidArgumentError
from client.contract.layout import delta_file, log_dir, split_cloud
from coordinator.runtime.metrics import Metrics
from coordinator.storage import StorageRouter, StorageUnavailableError, metered
from coordinator.storage.gcs import GcsStorage
from harness.storage_faults import faults_from
from tests.conftest import make_backend
from tests.inprocess import InProcess, backend_settings
from tests.support import Backend

KINDS = ["local", "s3", "azure", "gcs"]
CLOUDS = ["s3", "azure", "gcs"]


@pytest.fixture(scope="module", params=KINDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    return make_backend(request, "sqlite", request.param, f"seam-{request.param}")


@dataclass
class Place:
    storage: StorageRouter
    loc: str

    def at(self, name: str) -> str:
        return f"{log_dir(self.loc)}/{name}"

    def store(self):  # type: ignore[no-untyped-def]
        return self.storage.for_uri(self.loc)


@pytest_asyncio.fixture
async def place(backend: Backend) -> AsyncIterator[Place]:
    storage = StorageRouter(backend_settings(backend), wrap=metered(Metrics()))
    yield Place(storage, backend.new_location())
    await storage.close()


def _missing_bucket(backend: Backend, loc: str) -> str:
    """``loc`` moved to a bucket (Azure: container) of the same account that does not exist."""
    root = backend.cloud_root
    other = root.replace(backend.bucket, "nobucket-" + backend.bucket[-8:], 1)
    return other + loc[len(root):]


# -- put-if-absent --

async def test_put_if_absent_twice_keeps_the_first_bytes(backend: Backend, place: Place) -> None:
    target = delta_file(place.loc, 0)
    info = await place.store().put_if_absent(target, b"first\n")
    assert info.size == 6 and info.path == target
    with pytest.raises(FileExistsError):
        await place.store().put_if_absent(target, b"second!\n")
    assert backend.read(target) == b"first\n"


async def test_of_twenty_concurrent_writers_of_one_name_exactly_one_wins(backend: Backend, place: Place) -> None:
    target = delta_file(place.loc, 1)
    payloads = [f"writer {i}\n".encode() for i in range(20)]
    results = await asyncio.gather(*(place.store().put_if_absent(target, p) for p in payloads),
                                   return_exceptions=True)
    won = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 1, results
    assert all(isinstance(r, FileExistsError) for r in lost), lost
    assert backend.read(target) == payloads[won[0]]


async def test_a_checkpoint_sized_object_is_put_once_whole(backend: Backend, place: Place) -> None:
    target = place.at("00000000000000000010.checkpoint.parquet")
    big = os.urandom(3 * 2**20)
    await place.store().put_if_absent(target, big)
    with pytest.raises(FileExistsError):
        await place.store().put_if_absent(target, os.urandom(3 * 2**20))
    assert backend.read(target) == big


# -- the other operations --

async def test_read_exists_info_list_replace_walk_delete(backend: Backend, place: Place) -> None:
    store = place.store()
    one, two = delta_file(place.loc, 0), delta_file(place.loc, 1)
    staged = place.at("_staged_commits/00000000000000000002.0b2e6d1c-53a6-4d4e-9f2b-1d8c7b6a5f40.json")
    for uri, data in ((one, b"zero\n"), (two, b"one one\n"), (staged, b"two\n")):
        await store.put_if_absent(uri, data)
    assert await store.read(two) == b"one one\n"
    assert await store.exists(one) and not await store.exists(delta_file(place.loc, 7))
    info = await store.info(two)
    assert info.size == 8 and info.modification_time > 1_600_000_000_000
    # directly in the folder: files only, not the sub-folder
    assert sorted(await store.list_names(log_dir(place.loc))) == [one.rsplit("/", 1)[-1], two.rsplit("/", 1)[-1]]
    assert sorted(f.path for f in await store.walk(place.loc)) == sorted([one, two, staged])
    assert {f.path: f.size for f in await store.walk(place.loc)}[staged] == 4

    hint = place.at("_last_checkpoint")
    await store.replace(hint, b'{"version":1}')
    await store.replace(hint, b'{"version":2}')
    assert backend.read(hint) == b'{"version":2}'

    await store.delete(one)
    await store.delete(one)  # a missing file is not an error
    assert not backend.exists(one)
    assert not await store.exists(one)
    assert "_last_checkpoint" in await store.list_names(log_dir(place.loc))


async def test_a_missing_file_or_folder(place: Place) -> None:
    store = place.store()
    gone = delta_file(place.loc, 5)
    with pytest.raises(FileNotFoundError):
        await store.read(gone)
    with pytest.raises(FileNotFoundError):
        await store.info(gone)
    assert not await store.exists(gone)
    await store.delete(gone)
    assert await store.list_names(log_dir(place.loc)) == []
    assert await store.walk(place.loc) == []


async def test_ping_and_the_bucket_of_a_table(backend: Backend, place: Place) -> None:
    await place.storage.for_uri(place.loc).ping()
    await place.store().check_container(place.loc)  # it exists (local disk: nothing to check)


# -- bad locations --

async def test_an_unknown_bucket_or_container_is_refused_by_the_seam(backend: Backend, place: Place) -> None:
    if backend.storage == "local":
        pytest.skip("local disk makes folders as needed")
    wrong = _missing_bucket(backend, place.loc)
    with pytest.raises(InvalidArgumentError, match="does not exist") as e:
        await place.storage.for_uri(wrong).check_container(wrong)
    assert split_cloud(wrong).bucket in e.value.message
    with pytest.raises(FileNotFoundError):
        await place.storage.for_uri(wrong).read(delta_file(wrong, 0))
    assert await place.storage.for_uri(wrong).list_names(log_dir(wrong)) == []


@pytest.mark.parametrize("kind", CLOUDS)
async def test_registering_at_an_unknown_bucket_is_a_400_and_changes_nothing(
        request: pytest.FixtureRequest, kind: str) -> None:
    backend = make_backend(request, "sqlite", kind, f"nobucket-{kind}")
    wrong_root = _missing_bucket(backend, backend.cloud_root + "/x").removesuffix("/x")
    app = await InProcess.start(backend, {"COMMIT_OWNER_ALLOW_LOCATION": f"{backend.allowed_roots()},{wrong_root}/"})
    try:
        wrong = wrong_root + f"/{backend.name}/t1"
        status, reply = await app.register(wrong, -1)
        assert status == 400, reply
        assert reply["error"]["code"] == "INVALID_ARGUMENT"
        assert split_cloud(wrong).bucket in reply["error"]["message"] and "does not exist" in reply["error"]["message"]
        assert await app.store.list_tables() == []
        bucket = split_cloud(wrong).bucket
        assert not backend.fs().exists(bucket), "no bucket or container was made"
        # the same table in the bucket that exists registers
        status, reply = await app.register(backend.new_location(), -1)
        assert status == 201, reply
    finally:
        await app.stop()


async def test_another_azure_account_is_refused_at_registration_and_by_the_seam(
        request: pytest.FixtureRequest) -> None:
    backend = make_backend(request, "sqlite", "azure", "otheraccount")
    foreign_root = f"abfss://{backend.bucket}@someoneelse.dfs.core.windows.net"
    app = await InProcess.start(backend, {"COMMIT_OWNER_ALLOW_LOCATION": f"{backend.allowed_roots()},{foreign_root}/"})
    try:
        wrong = f"{foreign_root}/{backend.name}/t1"
        status, reply = await app.register(wrong, -1)
        assert status == 400, reply
        assert reply["error"]["code"] == "INVALID_ARGUMENT"
        assert "someoneelse" in reply["error"]["message"] and backend.azure_account in reply["error"]["message"]
        assert await app.store.list_tables() == []
        with pytest.raises(StorageUnavailableError):  # any other call on it fails (503), it never reaches storage
            await app.storage.for_uri(wrong).put_if_absent(delta_file(wrong, 0), b"x\n")
        assert backend.snapshot(backend.cloud_root + f"/{backend.name}") == {}
    finally:
        await app.stop()


# -- fault injection and the upload paths --

async def test_an_injected_fault_fails_an_azure_write_and_nothing_is_written(request: pytest.FixtureRequest) -> None:
    backend = make_backend(request, "sqlite", "azure", "faults-azure")
    storage = StorageRouter(backend_settings(backend), inner=faults_from({"HARNESS_STORAGE_FAULTS": "put_error=1"}))
    try:
        target = delta_file(backend.new_location(), 0)
        with pytest.raises(StorageUnavailableError, match="writing"):
            await storage.for_uri(target).put_if_absent(target, b"x\n")
        assert not backend.exists(target)
        with pytest.raises(FileNotFoundError):
            await storage.for_uri(target).read(target)
    finally:
        await storage.close()


async def test_a_gcs_create_above_gcsfs_resumable_threshold_is_still_one_conditional_request(
        request: pytest.FixtureRequest) -> None:
    """gcsfs uploads 50 MiB and more in a resumable session, whose ``ifGenerationMatch=0`` fake-gcs-server ignores
    (a second create would overwrite); ``GcsStorage.put_if_absent`` keeps every size to the one-request upload,
    whose precondition the emulator honours: a 51 MiB object is created once and a second create refused."""
    backend = make_backend(request, "sqlite", "gcs", "bigcreate")
    store = GcsStorage(backend_settings(backend))
    try:
        target = delta_file(backend.new_location(), 0)
        first = os.urandom(51 * 2**20)
        await store.put_if_absent(target, first)
        with pytest.raises(FileExistsError):
            await store.put_if_absent(target, b"small and different")
        assert backend.read(target) == first
        await store.replace(target, b"replaced")  # the emulator refused by the precondition: a plain upload replaces
        assert backend.read(target) == b"replaced"
    finally:
        await store.close()


@pytest.mark.parametrize("style", ["connection_string", "sas"])
async def test_azure_signs_with_a_connection_string_or_a_sas_token(request: pytest.FixtureRequest, style: str) -> None:
    """Besides the account key (every test above): a connection string alone, or a SAS token (here an account SAS
    that may read, write, list and delete but not overwrite-proof anything: the If-None-Match still refuses)."""
    from datetime import datetime, timedelta, timezone

    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

    backend = make_backend(request, "sqlite", "azure", f"azure-{style}")
    if style == "sas":
        sas = generate_account_sas(backend.azure_account, backend.azure_key,
                                   ResourceTypes(service=True, container=True, object=True),
                                   AccountSasPermissions(read=True, write=True, delete=True, list=True, create=True),
                                   expiry=datetime.now(timezone.utc) + timedelta(hours=1))
        env = {"COMMIT_OWNER_AZURE_ACCOUNT_KEY": "", "COMMIT_OWNER_AZURE_SAS_TOKEN": sas}
    else:
        # the connection string names its endpoint: an azure_endpoint beside it (here a dead one) is not used
        env = {"COMMIT_OWNER_AZURE_ACCOUNT_NAME": "", "COMMIT_OWNER_AZURE_ACCOUNT_KEY": "",
               "COMMIT_OWNER_AZURE_ENDPOINT": "http://127.0.0.1:9/nobody",
               "COMMIT_OWNER_AZURE_CONNECTION_STRING": backend.azure_connection_string}
    settings = backend_settings(backend, env)
    assert not settings.azure_account_key
    storage = StorageRouter(settings)
    try:
        loc = backend.new_location()
        target = delta_file(loc, 0)
        store = storage.for_uri(target)
        await store.check_container(loc)
        await store.put_if_absent(target, b"first\n")
        with pytest.raises(FileExistsError):
            await store.put_if_absent(target, b"second\n")
        assert backend.read(target) == b"first\n"
        assert await store.list_names(log_dir(loc)) == [target.rsplit("/", 1)[-1]]
        await store.delete(target)
        assert not backend.exists(target)
    finally:
        await storage.close()


async def test_an_azure_sas_that_may_not_write_fails_a_write_as_unavailable(request: pytest.FixtureRequest) -> None:
    """Refused by the service for want of a permission: a storage failure (503), never "the name is taken"."""
    from datetime import datetime, timedelta, timezone

    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

    backend = make_backend(request, "sqlite", "azure", "azure-readonly")
    sas = generate_account_sas(backend.azure_account, backend.azure_key,
                               ResourceTypes(service=True, container=True, object=True),
                               AccountSasPermissions(read=True, list=True),
                               expiry=datetime.now(timezone.utc) + timedelta(hours=1))
    storage = StorageRouter(backend_settings(backend, {"COMMIT_OWNER_AZURE_ACCOUNT_KEY": "",
                                                       "COMMIT_OWNER_AZURE_SAS_TOKEN": sas}))
    try:
        target = delta_file(backend.new_location(), 0)
        with pytest.raises(StorageUnavailableError, match="writing"):
            await storage.for_uri(target).put_if_absent(target, b"x\n")
        assert not backend.exists(target)
    finally:
        await storage.close()


async def test_an_azure_create_above_the_single_put_size_is_still_refused_the_second_time(
        request: pytest.FixtureRequest) -> None:
    """Above 64 MiB the SDK stages blocks and makes them the blob with one Put Block List, which carries the
    ``If-None-Match: *`` too: the second create of a 65 MiB object is refused and the first kept whole."""
    backend = make_backend(request, "sqlite", "azure", "bigcreate-azure")
    storage = StorageRouter(backend_settings(backend))
    try:
        target = delta_file(backend.new_location(), 0)
        first = os.urandom(65 * 2**20)
        await storage.for_uri(target).put_if_absent(target, first)
        with pytest.raises(FileExistsError):
            await storage.for_uri(target).put_if_absent(target, os.urandom(65 * 2**20))
        assert backend.read(target) == first
        assert (await storage.for_uri(target).info(target)).size == len(first)
    finally:
        await storage.close()
