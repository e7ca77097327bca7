"""The local storage's own worker threads (coordinator/storage/local.py ``DiskThreads``): results, errors, a caller
that stops waiting, the bound on threads, and close."""

from __future__ import annotations

import asyncio
import threading

import pytest

from coordinator.storage.local import DiskThreads


async def test_results_and_errors_reach_the_caller() -> None:
    pool = DiskThreads(2, "test-disk")
    try:
        assert await pool.run(lambda a, b: a + b, 2, 3) == 5
        with pytest.raises(FileExistsError):
            await pool.run(lambda: (_ for _ in ()).throw(FileExistsError("taken")))
        assert sorted(await asyncio.gather(*(pool.run(lambda i=i: i) for i in range(50)))) == list(range(50))
    finally:
        pool.close()


async def test_at_most_the_bound_of_threads_run_and_a_caller_that_gives_up_does_not_stop_the_call() -> None:
    pool = DiskThreads(3, "test-disk")
    gate = threading.Event()
    running: set[str] = set()
    done: list[int] = []

    def slow(i: int) -> int:
        running.add(threading.current_thread().name)
        gate.wait(5)
        done.append(i)
        return i

    try:
        calls = [pool.run(slow, i) for i in range(10)]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(calls[0]), 0.05)
        calls[0].cancel()  # the caller stops waiting; the call itself goes on
        gate.set()
        assert await asyncio.gather(*calls[1:]) == list(range(1, 10))
        await asyncio.sleep(0.05)
        assert sorted(done) == list(range(10)) and len(running) <= 3
    finally:
        gate.set()
        pool.close()
    with pytest.raises(RuntimeError):
        pool.run(lambda: None)
