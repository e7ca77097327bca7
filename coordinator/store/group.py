"""Group commit: writes of different tables that arrive together share one database round trip.

Leader/follower: the first write to find the group idle runs its round trip at once, in its own task (it
never waits for company, so a lone writer pays nothing); writes arriving while a round trip is in flight
queue up and leave together in the next one, run by a task of the group. A batch holds at most
``max_rows`` writes and at most one per key (the table): two writes of one table never share a statement,
so the database judges them one after the other, as it would without the group. The batch's runner
answers each write on its own (one result per item), and a failure of the whole round trip (the database
unreachable) is every member's answer.

One round trip is in flight at a time per group: the batching comes from waiting for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Group(Generic[T, R]):
    def __init__(self, run: Callable[[list[T]], Awaitable[list[R]]], key: Callable[[T], Hashable],
                 max_rows: int) -> None:
        if max_rows < 1:
            raise ValueError(f"a group holds at least one write, not {max_rows}")
        self._run = run
        self._key = key
        self.max_rows = max_rows
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._task: asyncio.Task[None] | None = None
        self._leading = False  # a lone write's round trip is in flight in its caller's task
        self.round_trips = 0  # batches run, and the largest one: read by tests and operators
        self.largest = 0

    @property
    def pending(self) -> int:
        """Writes waiting for the next round trip (not the one in flight)."""
        return sum(1 for _, f in self._queue if not f.done())

    async def submit(self, item: T) -> R:
        """``item``'s own result; raises what the runner raised for the whole batch."""
        if self._task is None and not self._leading:
            # The group is idle: this write leads, alone and at once, in its own task (no hop, no wait).
            self._leading = True
            self.round_trips += 1
            self.largest = max(self.largest, 1)
            try:
                return (await self._run([item]))[0]
            finally:
                self._leading = False
                if self._queue:
                    # Writes that queued behind the leader leave together, in a task of their own: a caller
                    # cancelled mid-flight must not cancel the others' round trip.
                    self._task = asyncio.get_running_loop().create_task(self._drain(),
                                                                        name="commit-owner-group-commit")
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, fut))
        return await fut

    def _take(self) -> list[tuple[T, asyncio.Future[R]]]:
        batch: list[tuple[T, asyncio.Future[R]]] = []
        rest: list[tuple[T, asyncio.Future[R]]] = []
        keys: set[Hashable] = set()
        for entry in self._queue:
            if entry[1].done():
                continue  # its caller gave up before it left: nothing was sent
            k = self._key(entry[0])
            if len(batch) < self.max_rows and k not in keys:
                keys.add(k)
                batch.append(entry)
            else:
                rest.append(entry)  # next round trip, in arrival order
        self._queue = rest
        return batch

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch = self._take()
                if not batch:
                    continue
                self.round_trips += 1
                self.largest = max(self.largest, len(batch))
                try:
                    results = await self._run([item for item, _ in batch])
                except asyncio.CancelledError:
                    for _, fut in [*batch, *self._queue]:
                        fut.cancel()
                    self._queue = []
                    raise
                except Exception as e:  # noqa: BLE001 - the whole round trip failed: every member's answer
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(e)
                    continue
                for (_, fut), result in zip(batch, results, strict=True):
                    if not fut.done():
                        fut.set_result(result)
        finally:
            self._task = None
