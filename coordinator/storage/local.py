"""Local-disk log storage (``file://``): POSIX calls in a bounded thread pool.

put-if-absent is the client's :func:`client.storage.put_if_absent_local` (temporary file, fsync,
``link()`` to the final name, fsync of the folder), run in the pool.

The pool is this module's own (:class:`DiskThreads`), not ``ThreadPoolExecutor`` + ``run_in_executor``:
a call is one queue put and, when it is done, one ``call_soon_threadsafe``; the executor path also built a
``concurrent.futures.Future`` (a ``Condition``) chained to the asyncio one, took two locks and probed an idle
semaphore per call, about a tenth of the service's time under 64 writers (decision 42).
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from client.contract.layout import local_path
from client.storage import TMP_PREFIX, name_local, prepare_local, put_if_absent_local
from coordinator.storage.base import FileInfo, Prepared, StorageBackend


def _file_info(path: str, st: os.stat_result) -> FileInfo:
    return FileInfo(path="file://" + path, size=st.st_size, modification_time=int(st.st_mtime * 1000))


def _put_if_absent(path: str, data: bytes, durable: bool) -> FileInfo:
    return _file_info(path, put_if_absent_local(path, data, durable=durable))


def _prepare(path: str, data: bytes, durable: bool) -> tuple[str, FileInfo, bool]:
    tmp, st, made_folder = prepare_local(path, data, durable=durable)
    return tmp, _file_info(path, st), made_folder


def _put_prepared(token: tuple[str, FileInfo, bool], path: str, durable: bool) -> FileInfo:
    tmp, info, made_folder = token
    name_local(tmp, path, made_folder, durable=durable)
    return info


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


def _deliver(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.cancelled():  # the caller gave up (its deadline): the call's result is dropped
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


class DiskThreads:
    """``threads`` worker threads running blocking calls for the event loop, started at the first call.

    ``run`` puts a call on the queue the threads take from (one ``SimpleQueue.put``) and awaits an asyncio future that the
    thread completes with one ``call_soon_threadsafe``. A caller that stops waiting (cancellation, the
    deadline wrapper) does not stop the call: its thread finishes it and drops the result.
    """

    def __init__(self, threads: int, name: str) -> None:
        if threads < 1:
            raise ValueError("threads must be >= 1")
        self._max = threads
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        if self._closed:
            raise RuntimeError("cannot run a disk call after close")
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if not self._threads:
            self._start()
        self._jobs.put((loop, fut, fn, args))
        return fut

    def _start(self) -> None:
        """All the threads at the first call: an idle one costs nothing but waiting on the queue, and no call
        then pays for counting idle threads (as ThreadPoolExecutor does, with a semaphore, per call)."""
        with self._lock:
            if self._threads or self._closed:
                return
            for i in range(self._max):
                t = threading.Thread(target=self._work, name=f"{self._name}_{i}", daemon=True)
                t.start()
                self._threads.append(t)

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                return
            loop, fut, fn, args = job
            result, error = None, None
            try:
                result = fn(*args)
            except BaseException as e:  # handed to the awaiting task, as run_in_executor does
                error = e
            del job, fn, args
            try:
                loop.call_soon_threadsafe(_deliver, fut, result, error)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass
            del fut, result, error

    def close(self) -> None:
        """Let the queued calls finish, then stop the threads (waits for them)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)
        for t in threads:
            t.join()


class LocalStorage(StorageBackend):
    scheme = "file"

    def __init__(self, *, threads: int = 16, durable: bool = True) -> None:
        self._pool = DiskThreads(threads, "commit-owner-disk")
        self._durable = durable

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._pool.run(fn, *args)

    async def put_if_absent(self, uri: str, data: bytes) -> FileInfo:
        return await self._run(_put_if_absent, local_path(uri), data, self._durable)

    async def prepare(self, uri: str, data: bytes) -> Prepared:
        return Prepared(uri, data, await self._run(_prepare, local_path(uri), data, self._durable))

    async def put_prepared(self, prepared: Prepared) -> FileInfo:
        return await self._run(_put_prepared, prepared.token, local_path(prepared.uri), self._durable)

    async def drop_prepared(self, prepared: Prepared) -> None:
        await self._run(_delete, prepared.token[0])

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
        self._pool.close()
