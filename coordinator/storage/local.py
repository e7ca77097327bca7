"""Local-disk log storage (``file://``): POSIX calls in a bounded thread pool.

put-if-absent is the client's :func:`client.storage.put_if_absent_local` (temporary file, fsync,
``link()`` to the final name, fsync of the folder), run in the pool.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from client.contract.layout import local_path
from client.storage import TMP_PREFIX, put_if_absent_local

from .base import FileInfo, StorageBackend


def _put_if_absent(path: str, data: bytes, durable: bool) -> FileInfo:
    st = put_if_absent_local(path, data, durable=durable)
    return FileInfo(path="file://" + path, size=st.st_size, modification_time=int(st.st_mtime * 1000))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _delete(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _list(path: str) -> list[str]:
    try:
        return [e.name for e in os.scandir(path) if e.is_file() and not e.name.startswith(TMP_PREFIX)]
    except FileNotFoundError:
        return []


def _replace(path: str, data: bytes) -> None:
    tmp = os.path.join(os.path.dirname(path), f"{TMP_PREFIX}{os.path.basename(path)}.{os.getpid()}.{id(data)}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _walk(path: str) -> list[FileInfo]:
    out = []
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except FileNotFoundError:
                continue
            out.append(FileInfo(path="file://" + full, size=st.st_size, modification_time=int(st.st_mtime * 1000)))
    return out


def _info(path: str) -> FileInfo:
    st = os.stat(path)
    return FileInfo(path="file://" + path, size=st.st_size, modification_time=int(st.st_mtime * 1000))


class LocalStorage(StorageBackend):
    scheme = "file"

    def __init__(self, *, threads: int = 16, durable: bool = True) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="commit-owner-disk")
        self._durable = durable

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, partial(fn, *args))

    async def put_if_absent(self, uri: str, data: bytes) -> FileInfo:
        return await self._run(_put_if_absent, local_path(uri), data, self._durable)

    async def read(self, uri: str) -> bytes:
        return await self._run(_read, local_path(uri))

    async def exists(self, uri: str) -> bool:
        return await self._run(os.path.exists, local_path(uri))

    async def delete(self, uri: str) -> None:
        await self._run(_delete, local_path(uri))

    async def list_names(self, dir_uri: str) -> list[str]:
        return await self._run(_list, local_path(dir_uri))

    async def info(self, uri: str) -> FileInfo:
        return await self._run(_info, local_path(uri))

    async def replace(self, uri: str, data: bytes) -> None:
        await self._run(_replace, local_path(uri), data)

    async def walk(self, dir_uri: str) -> list[FileInfo]:
        return await self._run(_walk, local_path(dir_uri))

    async def ping(self) -> None:
        await self._run(os.getcwd)

    async def close(self) -> None:
        self._pool.shutdown(wait=True)
