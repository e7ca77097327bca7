"""Storage errors translated once, as the store translates the database's (``coordinator/store/db.py``).

Every backend the ``StorageRouter`` hands out goes through ``UnavailableStorage``, outermost: a failed call
(an OSError: a disk error, an S3 error s3fs or the backend turned into one, the deadline's TimeoutError)
leaves it as ``StorageUnavailableError``, the error family's ``UnavailableError`` (503, retryable; for a
commit, outcome unknown) with one message shape: ``log storage unavailable while <doing> <name>: <error>``.
What a call answers stays what it is: ``FileExistsError`` (put-if-absent lost: the object was there) and
``FileNotFoundError`` (no such object) are answers, not unavailability.

``StorageUnavailableError`` is an OSError as well, so that code written against the backend contract
("raises OSError") keeps working unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from client.contract.errors import UnavailableError
from coordinator.storage.base import FileInfo, Prepared, StorageBackend

T = TypeVar("T")
ANSWERS = (FileExistsError, FileNotFoundError)  # what a call answers, never translated


class StorageUnavailableError(UnavailableError, OSError):
    """Log storage failed or did not answer in time (``UnavailableError``; also an OSError, as the backend
    contract says)."""


def unavailable(doing: str, uri: str, e: OSError) -> StorageUnavailableError:
    """The one message of a failed storage call: what it was doing, on which file or folder (the last two names
    of its URI, e.g. ``_delta_log/00000000000000000002.json``: no host paths, no credentials), and the error's
    type."""
    where = "/".join(uri.split("://", 1)[-1].rstrip("/").split("/")[-2:]) or "the storage"
    return StorageUnavailableError(f"log storage unavailable while {doing} {where}: {type(e).__name__}")


class UnavailableStorage(StorageBackend):
    """Wraps a backend (with its deadline and metrics); its failures become ``StorageUnavailableError``."""

    def __init__(self, inner: StorageBackend) -> None:
        self.inner = inner
        self.scheme = inner.scheme

    async def _call(self, doing: str, uri: str, aw: Awaitable[T]) -> T:
        try:
            return await aw
        except (*ANSWERS, UnavailableError):
            raise
        except OSError as e:
            raise unavailable(doing, uri, e) from e

    async def put_if_absent(self, uri: str, data: bytes) -> FileInfo:
        return await self._call("writing", uri, self.inner.put_if_absent(uri, data))

    async def prepare(self, uri: str, data: bytes) -> Prepared:
        return await self._call("writing", uri, self.inner.prepare(uri, data))

    async def put_prepared(self, prepared: Prepared) -> FileInfo:
        return await self._call("writing", prepared.uri, self.inner.put_prepared(prepared))

    async def drop_prepared(self, prepared: Prepared) -> None:
        await self._call("deleting", prepared.uri, self.inner.drop_prepared(prepared))

    async def read(self, uri: str) -> bytes:
        return await self._call("reading", uri, self.inner.read(uri))

    async def exists(self, uri: str) -> bool:
        return await self._call("checking", uri, self.inner.exists(uri))

    async def delete(self, uri: str) -> None:
        await self._call("deleting", uri, self.inner.delete(uri))

    async def list_names(self, dir_uri: str) -> list[str]:
        return await self._call("listing", dir_uri, self.inner.list_names(dir_uri))

    async def info(self, uri: str) -> FileInfo:
        return await self._call("checking", uri, self.inner.info(uri))

    async def replace(self, uri: str, data: bytes) -> None:
        await self._call("writing", uri, self.inner.replace(uri, data))

    async def walk(self, dir_uri: str) -> list[FileInfo]:
        return await self._call("listing", dir_uri, self.inner.walk(dir_uri))

    async def check_container(self, location: str) -> None:
        await self._call("checking", location, self.inner.check_container(location))

    async def ping(self) -> None:
        await self._call("reaching", "", self.inner.ping())

    async def close(self) -> None:
        await self.inner.close()


__all__ = ["StorageUnavailableError", "UnavailableStorage", "unavailable"]
