"""Local-disk log storage (``file://``): POSIX calls in a bounded thread pool.

put-if-absent writes a temporary file in the target folder, fsyncs it, then ``link()``s it to the
final name: ``link`` fails with EEXIST when the name is taken and otherwise makes the complete file
appear at once, so no reader sees a partial file. The folder is fsynced so the new name survives a
crash.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Callable

from ..locations import local_path
from .base import FileInfo, LogStorage


def _fsync_dir(d: str) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _put_if_absent(path: str, data: bytes, durable: bool) -> FileInfo:
    d = os.path.dirname(path)
    made_dir = False
    if not os.path.isdir(d):
        os.makedirs(d, exist_ok=True)
        made_dir = True
    tmp = os.path.join(d, f".tmp-{uuid.uuid4().hex}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if durable:
            os.fsync(fd)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    finally:
        os.unlink(tmp)
    if durable:
        _fsync_dir(d)
        if made_dir:
            _fsync_dir(os.path.dirname(d))
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
        return [e.name for e in os.scandir(path) if e.is_file() and not e.name.startswith(".tmp-")]
    except FileNotFoundError:
        return []


def _info(path: str) -> FileInfo:
    st = os.stat(path)
    return FileInfo(path="file://" + path, size=st.st_size, modification_time=int(st.st_mtime * 1000))


class LocalStorage(LogStorage):
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

    async def ping(self) -> None:
        await self._run(os.getcwd)

    async def close(self) -> None:
        self._pool.shutdown(wait=True)
