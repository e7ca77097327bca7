"""HTTP load against the owner: closed-loop writers, getCommits readers, a paced writer with a lag watcher.

Writers behave like Delta writers: they commit version ``known + 1``; a 409 conflict carries the commits the
writer has not seen (``unseenCommits``), so the writer rebases on the last of them (a blind append conflicts
with none) without re-reading, after the wait client/backoff.py says, as the client's committer does. A
conflict that did not carry them all falls back to its ``latestTableVersion``. Closed-loop writers racing on
one table each send their ticket in the table's line (``Commit-Slot``, decision 48) on a connection of their
own, as a client's writer does. A commit's latency is the time from the first attempt to the acknowledgment, as the writer sees it.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from client.backoff import conflict_wait
from client.contract.errors import RetrySlot
from client.contract.layout import delta_file, local_path
from coordinator.bench.http import HttpError, RawHttp
from coordinator.bench.stats import Sample

NDJSON = b"application/x-ndjson"
_timeout = getattr(asyncio, "timeout", None)


class BenchError(RuntimeError):
    """The service answered something a correct owner never answers to this workload."""


class Clock:
    """Strictly increasing inCommitTimestamps (ms) for every writer in this process."""

    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        self.last = max(int(time.time() * 1000), self.last + 1)
        return self.last


def add_action(n: int, ts: int) -> dict[str, Any]:
    return {"path": f"part-{n:05d}-{uuid.uuid4()}-c000.snappy.parquet", "partitionValues": {}, "size": 4096,
            "modificationTime": ts, "dataChange": True,
            "stats": '{"numRecords":100,"minValues":{"id":0},"maxValues":{"id":99},"nullCount":{"id":0}}'}


def commit_body(ts: int, n: int, add: dict[str, Any] | None = None) -> bytes:
    """The NDJSON of one blind append: commitInfo first, then one add action (~600 bytes, as delta-rs writes):
    ``add``, the add action of a file the writer wrote, else one naming a file nobody wrote (the log is what is
    measured, not the data)."""
    info = {"commitInfo": {"inCommitTimestamp": ts, "timestamp": ts, "operation": "WRITE",
                           "operationParameters": {"mode": "Append"}, "isBlindAppend": True,
                           "engineInfo": "commit-owner-bench"}}
    return orjson.dumps(info) + b"\n" + orjson.dumps({"add": add or add_action(n, ts)}) + b"\n"


def rebased(version: int, err: dict[str, Any], known: int) -> int:
    """The version a blind append that lost ``version`` now knows: the last commit the conflict carried when
    it carried every one from ``version`` on, else the answer's latestTableVersion (no re-read either way)."""
    unseen = err.get("unseenCommits")
    if err.get("unseenCommitsComplete") and unseen and unseen[0].get("version") == version:
        return int(unseen[-1]["version"])
    latest = err.get("latestTableVersion")
    return latest if isinstance(latest, int) else known


class Writer:
    """One closed-loop writer's own connection and its ticket in the table's line (its own token until a 409
    hands it another). ``tickets=False``: a naive writer, as Sail, DuckDB and delta-spark are, which sends no
    ticket and waits as the client's backoff says for a writer without one."""

    def __init__(self, endpoint: str, tickets: bool = True) -> None:
        self.http = RawHttp(endpoint)
        self.header = b""
        self.tickets = tickets
        self.take(RetrySlot(uuid.uuid4().hex, 0, 0))

    def take(self, slot: RetrySlot) -> None:
        if self.tickets:
            self.header = b"Commit-Slot: " + slot.ticket.encode() + b"\r\n"


class Driver:
    """Keep-alive HTTP connections to the owner (:class:`RawHttp`: the load generator's CPU is taken from the
    machine the service runs on, so it is kept small)."""

    def __init__(self, endpoint: str, clock: Clock | None = None) -> None:
        self.endpoint = endpoint
        self.clock = clock or Clock()
        self.http: RawHttp | None = None
        self.requests = 0  # HTTP requests sent (the load generator's CPU is reported per request)

    async def __aenter__(self) -> Driver:
        self.http = RawHttp(self.endpoint)
        return self

    async def __aexit__(self, *_exc: Any) -> None:
        assert self.http is not None
        await self.http.close()

    async def _call(self, method: str, target: str, body: bytes = b"", content_type: bytes = b"",
                    headers: bytes = b"", http: RawHttp | None = None) -> tuple[int, bytes]:
        http = http or self.http
        assert http is not None
        self.requests += 1
        try:
            if _timeout is None:  # Python 3.10
                return await asyncio.wait_for(http.request(method, target, body, content_type, headers), 120)
            async with _timeout(120):  # a timer handle, not a task per request as wait_for makes
                return await http.request(method, target, body, content_type, headers)
        except HttpError as e:
            raise BenchError(str(e)) from e

    async def commit_once(self, table_id: str, version: int, n: int, writer: Writer | None = None,
                          add: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        body = commit_body(self.clock.next(), n, add)
        status, raw = await self._call("POST", f"/api/v1/tables/{table_id}/commits?version={version}", body, NDJSON,
                                       writer.header if writer else b"", writer.http if writer else None)
        return status, orjson.loads(raw)

    async def commit(self, table_id: str, known: int, sample: Sample, give_up_at: float,
                     writer: Writer | None = None, add: dict[str, Any] | None = None) -> int:
        """Commit one version after ``known``, rebasing on conflicts; returns the version ratified. ``writer``:
        the writer's own connection and ticket (else the shared connections, no ticket); ``add``: the add action
        of a data file the writer wrote (scenario 12), the same in every attempt."""
        t0 = time.perf_counter()
        n = losses = 0
        while True:
            v = known + 1
            status, reply = await self.commit_once(table_id, v, n, writer, add)
            n += 1
            if status == 200:
                sample.latencies.append(time.perf_counter() - t0)
                return v
            err = reply.get("error") or {}
            if status == 409 and err.get("conflict"):
                sample.conflicts += 1
                known = rebased(v, err, known)
                losses += 1
                slot = RetrySlot.from_json(err.get("retrySlot")) if writer and writer.tickets else None
                if slot is not None and writer is not None:
                    writer.take(slot)
                await asyncio.sleep(conflict_wait(losses, slot))
            elif err.get("retryable"):
                sample.retries += 1
                await asyncio.sleep(0.002)
            else:
                raise BenchError(f"commit of version {v} refused: HTTP {status} {err}")
            if time.perf_counter() > give_up_at:
                sample.failures += 1
                return known

    async def get_commits(self, table_id: str) -> dict[str, Any]:
        status, raw = await self._call("GET", f"/api/v1/tables/{table_id}/commits")
        body = orjson.loads(raw)
        if status != 200:
            raise BenchError(f"getCommits refused: HTTP {status} {body}")
        return body  # type: ignore[no-any-return]

    async def get(self, target: str) -> tuple[int, bytes]:
        """One GET of ``target`` (a path and query): its status and body."""
        return await self._call("GET", target)

    async def metrics_text(self) -> str:
        status, raw = await self._call("GET", "/metrics")
        if status != 200:
            raise BenchError(f"/metrics answered HTTP {status}")
        return raw.decode()

    async def latest(self, table_id: str) -> int:
        return int((await self.get_commits(table_id))["latestTableVersion"])

    async def drain_backfill(self, table_ids: list[str], timeout: float = 120.0) -> None:
        """Wait until no table has unbackfilled commits (so one scenario's backfill does not load the next)."""
        deadline = time.monotonic() + timeout
        pending = list(table_ids)
        while pending and time.monotonic() < deadline:
            pending = [t for t in pending if (await self.get_commits(t))["commits"]]
            if pending:
                await asyncio.sleep(0.05)
        if pending:
            raise BenchError(f"{len(pending)} tables still had unbackfilled commits after {timeout:.0f}s")


async def run_writers(driver: Driver, tables: list[str], writers_per_table: int, duration: float,
                      start_versions: dict[str, int], *, tickets: bool = True) -> tuple[Sample, dict[str, int]]:
    """Closed-loop writers for ``duration`` seconds; returns the sample and the acknowledged count per table.
    ``tickets=False``: racing writers send no ticket (naive clients)."""
    sample = Sample()
    acked = {t: 0 for t in tables}
    t0 = time.perf_counter()
    stop_at = t0 + duration

    async def one(table: str, writer: int) -> None:
        known = start_versions[table]
        # Writers racing on a table each keep a connection and a ticket; a table's only writer races nobody.
        own = Writer(driver.endpoint, tickets) if writers_per_table > 1 else None
        try:
            while time.perf_counter() < stop_at:
                before = sample.count
                known = await driver.commit(table, known, sample, stop_at + 30.0, own)
                if sample.count > before:
                    acked[table] += 1
                    sample.per_writer[writer] += 1
        finally:
            if own is not None:
                await own.http.close()

    writers = [t for t in tables for _ in range(writers_per_table)]
    sample.per_writer = [0] * len(writers)
    await asyncio.gather(*(one(t, i) for i, t in enumerate(writers)))
    sample.elapsed = time.perf_counter() - t0
    return sample, acked


async def run_readers(driver: Driver, tables: list[str], readers: int, until: Callable[[], bool]) -> Sample:
    """getCommits in a loop on random tables until ``until()``."""
    sample = Sample()
    t0 = time.perf_counter()

    async def one() -> None:
        rnd = random.Random()
        while not until():
            s = time.perf_counter()
            await driver.get_commits(rnd.choice(tables))
            sample.latencies.append(time.perf_counter() - s)

    await asyncio.gather(*(one() for _ in range(readers)))
    sample.elapsed = time.perf_counter() - t0
    return sample


@dataclass
class LagResult:
    commits: Sample
    lag: Sample
    acked: int


async def run_paced(driver: Driver, table: str, start_version: int, rate: float, duration: float,
                    published: Callable[[int], Any]) -> LagResult:
    """One writer at ``rate`` commits/s; a watcher times each version from acknowledgment to ``<v>.json``.

    ``published(v)`` is an async predicate: is ``_delta_log/<v:020>.json`` readable now?
    """
    commits, lag = Sample(), Sample()
    queue: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()
    t0 = time.perf_counter()

    async def writer() -> int:
        known, i = start_version, 0
        while True:
            due = t0 + i / rate
            if due >= t0 + duration:
                break
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            v = await driver.commit(table, known, commits, t0 + duration + 30.0)
            if v > known:
                queue.put_nowait((v, time.perf_counter()))
                known = v
            i += 1
        queue.put_nowait(None)
        return known - start_version

    async def watcher() -> None:
        while (item := await queue.get()) is not None:
            v, acked_at = item
            deadline = acked_at + 60.0
            while not await published(v):
                if time.perf_counter() > deadline:
                    raise BenchError(f"version {v} was not backfilled within 60 s")
                await asyncio.sleep(0.0005)
            lag.latencies.append(time.perf_counter() - acked_at)

    acked, _ = await asyncio.gather(writer(), watcher())
    commits.elapsed = lag.elapsed = time.perf_counter() - t0
    return LagResult(commits, lag, acked)


def local_published(location: str) -> Callable[[int], Any]:
    async def check(v: int) -> bool:
        return os.path.exists(local_path(delta_file(location, v)))

    return check
