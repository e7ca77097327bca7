"""A deadline on every log-storage call, so one stuck location cannot stall the others.

Each call of the wrapped backend gets ``request_timeout_seconds``; past it the call is abandoned and
``TimeoutError`` (an OSError, errno ETIMEDOUT) is raised, which the service answers as 503
UNAVAILABLE (outcome unknown for a commit: the client retries with the same idempotency key).

An abandoned local-disk call keeps its worker thread until the OS call returns (a thread cannot be
cancelled); its file, if it appears later, is never ratified and the janitor removes it.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Awaitable
from typing import TypeVar

from .base import FileInfo, Prepared, StorageBackend

T = TypeVar("T")
_timeout = getattr(asyncio, "timeout", None)


class DeadlineStorage(StorageBackend):
    def __init__(self, inner: StorageBackend, timeout: float) -> None:
        self.inner = inner
        self.timeout = timeout
        self.scheme = inner.scheme

    async def _bounded(self, what: str, uri: str, aw: Awaitable[T]) -> T:
        try:
            if _timeout is None:  # Python 3.10
                return await asyncio.wait_for(aw, self.timeout)
            async with _timeout(self.timeout):  # a timer on this task; wait_for wraps each call in a task of its own
                return await aw
        except asyncio.TimeoutError:  # counted by the metrics wrapper (commit_owner_storage_timeouts_total)
            raise TimeoutError(errno.ETIMEDOUT, f"log storage {what} took longer than {self.timeout}s", uri) from None

    async def put_if_absent(self, uri: str, data: bytes) -> FileInfo:
        return await self._bounded("write", uri, self.inner.put_if_absent(uri, data))

    async def prepare(self, uri: str, data: bytes) -> Prepared:
        return await self._bounded("write", uri, self.inner.prepare(uri, data))

    async def put_prepared(self, prepared: Prepared) -> FileInfo:
        return await self._bounded("write", prepared.uri, self.inner.put_prepared(prepared))

    async def drop_prepared(self, prepared: Prepared) -> None:
        await self._bounded("delete", prepared.uri, self.inner.drop_prepared(prepared))

    async def read(self, uri: str) -> bytes:
        return await self._bounded("read", uri, self.inner.read(uri))

    async def exists(self, uri: str) -> bool:
        return await self._bounded("exists", uri, self.inner.exists(uri))

    async def delete(self, uri: str) -> None:
        await self._bounded("delete", uri, self.inner.delete(uri))

    async def list_names(self, dir_uri: str) -> list[str]:
        return await self._bounded("list", dir_uri, self.inner.list_names(dir_uri))

    async def info(self, uri: str) -> FileInfo:
        return await self._bounded("info", uri, self.inner.info(uri))

    async def replace(self, uri: str, data: bytes) -> None:
        await self._bounded("write", uri, self.inner.replace(uri, data))

    async def walk(self, dir_uri: str) -> list[FileInfo]:
        return await self._bounded("list", dir_uri, self.inner.walk(dir_uri))

    async def ping(self) -> None:
        await self._bounded("ping", "", self.inner.ping())

    async def close(self) -> None:
        await self.inner.close()
