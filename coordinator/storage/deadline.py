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
from typing import Any, TypeVar

from coordinator.storage.base import FileInfo, Prepared, StorageBackend

T = TypeVar("T")
_uncancels = hasattr(asyncio.Task, "uncancel")  # Python 3.11+


def _expire(task: asyncio.Task[Any], expired: list[bool]) -> None:
    expired.append(True)
    task.cancel()


class DeadlineStorage(StorageBackend):
    def __init__(self, inner: StorageBackend, timeout: float) -> None:
        self.inner = inner
        self.timeout = timeout
        self.scheme = inner.scheme

    async def _bounded(self, what: str, uri: str, aw: Awaitable[T]) -> T:
        """``await aw``, cancelled at the deadline. What ``asyncio.timeout`` does, by hand: a timer that cancels
        this task (``wait_for`` would wrap each call in a task of its own), without the context manager's two
        coroutines and its bookkeeping per call (3% of a busy worker's samples at two calls a commit, decision 63).
        A cancellation from elsewhere passes through as it is."""
        task = asyncio.current_task()
        if task is None or not _uncancels:  # Python 3.10
            try:
                return await asyncio.wait_for(aw, self.timeout)
            except asyncio.TimeoutError:
                raise self._late(what, uri) from None
        cancelling = task.cancelling()
        expired: list[bool] = []
        handle = asyncio.get_running_loop().call_later(self.timeout, _expire, task, expired)
        try:
            result = await aw
        except asyncio.CancelledError:
            if expired and task.uncancel() <= cancelling:
                raise self._late(what, uri) from None  # counted by the metrics wrapper (storage_timeouts_total)
            raise
        finally:
            handle.cancel()
        if expired:  # the timer fired as the call ended: its cancel is taken back, as asyncio.timeout does
            task.uncancel()
        return result

    def _late(self, what: str, uri: str) -> TimeoutError:
        return TimeoutError(errno.ETIMEDOUT, f"log storage {what} took longer than {self.timeout}s", uri)

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

    async def check_container(self, location: str) -> None:
        await self._bounded("check", location, self.inner.check_container(location))

    async def ping(self) -> None:
        await self._bounded("ping", "", self.inner.ping())

    async def close(self) -> None:
        await self.inner.close()
