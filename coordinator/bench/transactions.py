"""Scenario 10: multi-table transactions of 2, 8 and 32 tables beside the same commits sent one table at a time.

One closed-loop writer. An operation is one commit on each of k tables (the same blind append as the other
scenarios, :func:`.load.commit_body`): on the ``transaction`` side one ``POST /api/v1/transactions``, on the
``one at a time`` side k ``POST /api/v1/tables/{id}/commits`` in a row. Its latency is the whole operation;
commits/s is operations/s x k. The two sides take turns on the same k tables (the first k of one set of tables),
each with the backfill drained before it starts, so neither pays for the other's publication.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from coordinator.bench.load import NDJSON, BenchError, Driver, commit_body
from coordinator.bench.stats import Sample

SIZES = (2, 8, 32)
SIDES = ("transaction", "one at a time")
JSON = b"application/json"


def scenario(k: int, side: str) -> str:
    return f"10. {k} tables, {side}"


async def _retry_or_fail(status: int, raw: bytes, sample: Sample, what: str) -> None:
    err = (orjson.loads(raw) if raw else {}).get("error") or {}
    if not err.get("retryable") or err.get("conflict"):  # one writer on its own tables: no conflict is possible
        raise BenchError(f"{what} refused: HTTP {status} {err}")
    sample.retries += 1
    await asyncio.sleep(0.002)


async def _transaction(d: Driver, tables: list[str], latest: dict[str, int], sample: Sample, n: int) -> None:
    t0 = time.perf_counter()
    body = {"commits": [{"tableId": t, "version": latest[t] + 1,
                         "actions": [orjson.loads(line) for line in commit_body(d.clock.next(), n).splitlines()]}
                        for t in tables]}
    data = orjson.dumps(body)
    while True:
        status, raw = await d._call("POST", "/api/v1/transactions", data, JSON)
        if status == 200:
            break
        await _retry_or_fail(status, raw, sample, f"a transaction of {len(tables)} tables")
    sample.latencies.append(time.perf_counter() - t0)
    for t in tables:
        latest[t] += 1


async def _one_at_a_time(d: Driver, tables: list[str], latest: dict[str, int], sample: Sample, n: int) -> None:
    t0 = time.perf_counter()
    for t in tables:
        while True:
            status, raw = await d._call("POST", f"/api/v1/tables/{t}/commits?version={latest[t] + 1}",
                                        commit_body(d.clock.next(), n), NDJSON)
            if status == 200:
                break
            await _retry_or_fail(status, raw, sample, f"version {latest[t] + 1} of table {t}")
        latest[t] += 1
    sample.latencies.append(time.perf_counter() - t0)


async def run(endpoint: str, duration: float, tables: list[str], latest: dict[str, int],
              sizes: tuple[int, ...] = SIZES) -> list[tuple[str, Sample, dict[str, Any]]]:
    """Each size's two sides for ``duration`` seconds each, on the first k of ``tables`` (at the versions of
    ``latest``, which is moved forward). Returns (scenario, sample, extra) rows."""
    rows = []
    async with Driver(endpoint) as d:
        for k in sizes:
            chosen = tables[:k]
            for side in SIDES:
                await d.drain_backfill(chosen)
                sample, n = Sample(), 0
                step = _transaction if side == "transaction" else _one_at_a_time
                started = time.perf_counter()
                while time.perf_counter() - started < duration:
                    await step(d, chosen, latest, sample, n)
                    n += 1
                sample.elapsed = time.perf_counter() - started
                commits = round(sample.count * k / sample.elapsed, 1) if sample.elapsed else 0.0
                rows.append((scenario(k, side), sample, {"tables": k, "commits_per_second": commits}))
            await d.drain_backfill(chosen)
    return rows
