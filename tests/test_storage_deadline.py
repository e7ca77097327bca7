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
