"""The deadline on every log-storage call (``DeadlineStorage``; its timer by hand: decision 63), on a call that
really hangs: a read of a named pipe on local disk blocks in the kernel until a writer opens the pipe."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from coordinator.storage.deadline import DeadlineStorage
from coordinator.storage.local import LocalStorage


def _release(fifo: Path) -> None:
    """Open the pipe for writing and close it: the blocked read (its thread) returns."""
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    os.close(fd)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_hung_call_ends_at_the_deadline_and_a_cancel_from_elsewhere_stays_a_cancel(tmp_path: Path) -> None:
    fifo = tmp_path / "hangs"
    os.mkfifo(fifo)
    uri = "file://" + str(fifo)
    (tmp_path / "answers").write_bytes(b"here")
    storage = DeadlineStorage(LocalStorage(threads=4), 0.3)
    task = asyncio.current_task()
    assert task is not None
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError) as late:
            await storage.read(uri)
        assert late.value.errno == errno.ETIMEDOUT and "took longer than 0.3s" in str(late.value)
        assert 0.3 <= loop.time() - started < 5
        assert task.cancelling() == 0, "the timer's cancel was taken back"
        await asyncio.sleep(0.01)  # and none is left pending for the next await
        _release(fifo)

        # Cancelled by someone else before the deadline: a cancellation, not a timeout.
        other = asyncio.create_task(storage.read(uri))
        await asyncio.sleep(0.05)
        other.cancel()
        with pytest.raises(asyncio.CancelledError):
            await other
        _release(fifo)

        # A call that answers in time answers, and leaves no timer behind to cancel the task later.
        assert await storage.read("file://" + str(tmp_path / "answers")) == b"here"
        await asyncio.sleep(0.5)
        assert task.cancelling() == 0
    finally:
        await storage.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_storage_failures_leave_the_router_as_unavailable_once_and_answers_stay_answers(tmp_path: Path) -> None:
    """Every backend the router hands out translates its failures in one place (storage/unavailable.py): a call
    past the deadline is UnavailableError (503, retryable; an OSError too) with the one message shape, and is
    still counted as a timeout by the metrics inside; FileNotFoundError and FileExistsError are answers."""
    from client.contract.errors import UnavailableError
    from coordinator.runtime.metrics import Metrics
    from coordinator.runtime.settings import Settings
    from coordinator.storage import StorageRouter, metered

    fifo = tmp_path / "hangs"
    os.mkfifo(fifo)
    metrics = Metrics()
    storage = StorageRouter(Settings.load({"request_timeout_seconds": 0.3}, environ={}), wrap=metered(metrics))
    base = "file://" + str(tmp_path)
    backend = storage.for_uri(base)
    try:
        with pytest.raises(UnavailableError) as late:
            await backend.read(f"{base}/hangs")
        _release(fifo)
        assert isinstance(late.value, OSError) and late.value.retryable and late.value.code == "UNAVAILABLE"
        assert late.value.message == f"log storage unavailable while reading {tmp_path.name}/hangs: TimeoutError"
        assert isinstance(late.value.__cause__, TimeoutError)
        assert metrics.storage_timeouts.labels("read")._value.get() == 1

        with pytest.raises(FileNotFoundError):
            await backend.read(f"{base}/missing")
        await backend.put_if_absent(f"{base}/once", b"1")
        with pytest.raises(FileExistsError):
            await backend.put_if_absent(f"{base}/once", b"2")
        assert (tmp_path / "once").read_bytes() == b"1"
    finally:
        await storage.close()
