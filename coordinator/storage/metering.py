"""Log-storage calls counted: every call, and the failed ones (timeouts apart), by operation. The counters are
the runtime's metrics (``coordinator.runtime.metrics.Metrics``), seen here only as ``StorageCounters``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from coordinator.storage.base import StorageBackend

_ANSWERS = (FileExistsError, FileNotFoundError)


class StorageCounters(Protocol):
    def storage_called(self, op: str) -> None: ...

    def storage_failed(self, op: str, *, timed_out: bool) -> None: ...


def metered(counters: StorageCounters) -> Callable[[StorageBackend], StorageBackend]:
    """The ``wrap=`` of a ``StorageRouter`` whose calls ``counters`` count (outside the deadline, so that
    timeouts are counted)."""
    return lambda backend: MeteredStorage(backend, counters)


class MeteredStorage(StorageBackend):
    """A storage backend whose operations are counted; behaviour is the wrapped backend's."""

    def __init__(self, inner: StorageBackend, counters: StorageCounters) -> None:
        self.inner = inner
        self.counters = counters
        self.scheme = getattr(inner, "scheme", "")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def _call(self, op: str, *args: Any, counted_as: str | None = None) -> Any:
        """The inner backend's ``op``, counted (as ``counted_as``, when the operation is another's half)."""
        label = counted_as or op
        self.counters.storage_called(label)
        try:
            return await getattr(self.inner, op)(*args)
        except _ANSWERS:
            raise
        except OSError as e:
            self.counters.storage_failed(label, timed_out=isinstance(e, TimeoutError))
            raise

    async def put_if_absent(self, uri: str, data: bytes) -> Any:
        return await self._call("put_if_absent", uri, data)

    async def prepare(self, uri: str, data: bytes) -> Any:
        """Counted once the write goes ahead (``put_prepared``), as the ``put_if_absent`` it is."""
        return await self.inner.prepare(uri, data)

    async def put_prepared(self, prepared: Any) -> Any:
        return await self._call("put_prepared", prepared, counted_as="put_if_absent")

    async def drop_prepared(self, prepared: Any) -> None:
        await self.inner.drop_prepared(prepared)

    async def read(self, uri: str) -> bytes:
        return await self._call("read", uri)  # type: ignore[no-any-return]

    async def exists(self, uri: str) -> bool:
        return await self._call("exists", uri)  # type: ignore[no-any-return]

    async def delete(self, uri: str) -> None:
        await self._call("delete", uri)

    async def list_names(self, dir_uri: str) -> list[str]:
        return await self._call("list_names", dir_uri)  # type: ignore[no-any-return]

    async def info(self, uri: str) -> Any:
        return await self._call("info", uri)

    async def replace(self, uri: str, data: bytes) -> None:
        await self._call("replace", uri, data)

    async def walk(self, dir_uri: str) -> list[Any]:
        return await self._call("walk", dir_uri)  # type: ignore[no-any-return]

    async def check_container(self, location: str) -> None:
        await self._call("check_container", location)

    async def ping(self) -> None:
        await self._call("ping")

    async def close(self) -> None:
        await self.inner.close()


__all__ = ["MeteredStorage", "StorageCounters", "metered"]
