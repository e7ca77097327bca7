"""Scenario 11: a user's sequential small ``client.write_table`` appends, end to end (issue 39).

Each write is what a new user's script does: ``write_table(<three rows>, location, endpoint=...)``. A fresh client
per call, so a new connection, which the kernel hands to any of `serve`'s workers (a table's publication lease
is in one of them); the table's snapshot read through the owner; a Parquet file written; the commit; and the
wait until the version is published in ``_delta_log`` (``wait_published``, the default: read-your-writes for
every Delta reader). The latency is the whole call, as the user's script sees it.
"""

from __future__ import annotations

import time
import urllib.request
from typing import Any

from coordinator.bench.env import S3_KEY, S3_SECRET, BenchEnv
from coordinator.bench.stats import Sample, parse_counters, per_commit

#: At least this many measured writes, however short the duration (a p99 of fewer says little).
MIN_WRITES = 20


def run(env: BenchEnv, location: str, duration: float) -> tuple[Sample, int, dict[str, Any]]:
    """Sequential writes into the owned table at ``location`` for ``duration`` seconds (at least MIN_WRITES), after
    one unmeasured write. Returns the sample (a write whose version was not published when it returned counts
    as a failure), the table's latest version and the service's work per commit."""
    import pyarrow as pa

    from client.write import write_table

    options = ({"key": S3_KEY, "secret": S3_SECRET, "endpoint_url": env.s3_endpoint} if env.storage == "s3"
               else None)

    def write(i: int) -> tuple[float, bool, int]:
        started = time.perf_counter()
        result = write_table(pa.table({"id": [i, i + 1, i + 2]}), location, endpoint=env.endpoint,
                             storage_options=options)
        published = result.published_version is not None and result.published_version >= result.version
        return time.perf_counter() - started, published, result.version

    _, _, latest = write(0)  # the script's first write: imports, the first read of the table
    before = _counters(env)
    sample = Sample()
    started = time.perf_counter()
    while time.perf_counter() - started < duration or sample.count + sample.failures < MIN_WRITES:
        seconds, published, latest = write(latest + 1)
        if published:
            sample.latencies.append(seconds)
        else:
            sample.failures += 1
    sample.elapsed = time.perf_counter() - started
    return sample, latest, per_commit(before, _counters(env))


def _counters(env: BenchEnv) -> dict[str, float]:
    """The service's work counters, every worker's counts in (each writes them within ``TALLY_SECONDS``)."""
    time.sleep(0.1)
    with urllib.request.urlopen(env.endpoint + "/metrics", timeout=30) as r:
        return parse_counters(r.read().decode())
