"""Scenario 9: the browser UI's pages once the database has grown (scenario 6's growth: 10,000 tables with
100 commit rows each by default), one request at a time, the whole reply read.

The list pages are keyset-paged in SQL, so the first page, a page in the middle of every table (``?after=``
the median location) and a search cost about the same; the landing page adds the owner-wide charts (its
commits-per-minute query reads only the tables with a commit in the last hour). A grown table's page reads its
commit rows and, at most 25, its commit files (the grown tables have none on storage: the page says so).
The target: every page's p95 under 200 ms.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from coordinator.bench.env import BenchEnv
from coordinator.bench.load import BenchError, Driver
from coordinator.bench.stats import Sample

TARGET_MS = 50.0  # issue 39


def pages(env: BenchEnv) -> list[tuple[str, str]]:
    """(label, path) of each page measured, found in the grown database."""
    db = env.sync_db()
    try:
        n = db.execute("SELECT count(*) FROM owned_tables").fetchone()[0]
        middle = db.execute("SELECT location FROM owned_tables ORDER BY location LIMIT 1 OFFSET ?"
                            if env.database == "sqlite" else
                            "SELECT location FROM owned_tables ORDER BY location LIMIT 1 OFFSET %s", (n // 2,)).fetchone()[0]
        grown = db.execute("SELECT table_id FROM owned_tables WHERE location = ?" if env.database == "sqlite" else
                           "SELECT table_id FROM owned_tables WHERE location = %s", (middle,)).fetchone()[0]
    finally:
        db.close()
    prefix = env.location("growth-")
    return [
        ("landing page (catalogs, charts, backlog)", "/ui/"),
        ("every table, first page", "/ui/tables"),
        ("every table, page in the middle", "/ui/tables?after=" + quote(middle, safe="")),
        ("tables without a name, first page", "/ui/tables?unnamed=1"),
        ("search by location prefix", "/ui/tables?q=" + quote(prefix, safe="")),
        ("search by name, no match", "/ui/tables?q=no_such_catalog."),
        ("a grown table's page", f"/ui/tables/{grown}"),
    ]


async def measure(env: BenchEnv, repeats: int) -> list[tuple[str, Sample]]:
    out = []
    async with Driver(env.endpoint) as d:
        for label, path in pages(env):
            status, body = await d.get(path)  # warm: the statement cache, the page's imports
            if status != 200:
                raise BenchError(f"{path} answered HTTP {status}: {body[:300]!r}")
            sample = Sample()
            t0 = time.perf_counter()
            for _ in range(repeats):
                s = time.perf_counter()
                status, body = await d.get(path)
                if status != 200:
                    raise BenchError(f"{path} answered HTTP {status}")
                sample.latencies.append(time.perf_counter() - s)
            sample.elapsed = time.perf_counter() - t0
            out.append((label, sample))
    return out


def targets(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [r for r in results if r["scenario"].startswith("9. UI")]
    worst = max((r["p95_ms"] for r in rows if r["p95_ms"] is not None), default=None)
    return [{"target": "UI page p95 after growth (ms)", "measured": worst, "rule": f"< {TARGET_MS:g}",
             "met": worst is not None and worst < TARGET_MS,
             "how": "scenario 9: the slowest of the UI pages' p95, one request at a time, at the grown size"}]
