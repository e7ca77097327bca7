"""The alternative a user would pick: delta-rs committing the same add actions straight to the storage.

Each writer is a thread with its own ``DeltaTable``; a commit is ``create_write_transaction`` with one
add action (the same action the owner's writers send), relying on delta-rs's put-if-absent and its own
conflict retries, with delta-rs's default post-commit hooks (a checkpoint every 100 versions). After
each commit the writer refreshes its snapshot (``update_incremental``), as a long-running writer does;
the latency is the transaction call alone, the throughput includes the refresh.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from coordinator.bench.env import BenchEnv
from coordinator.bench.load import add_action
from coordinator.bench.stats import Sample


def _schema() -> Any:
    from deltalake import Field, Schema
    from deltalake.schema import PrimitiveType

    return Schema([Field("id", PrimitiveType("long"), nullable=True)])


def create_tables(env: BenchEnv, n: int) -> list[str]:
    from deltalake import DeltaTable

    uris = []
    for _ in range(n):
        loc = env.location(f"deltars-{uuid.uuid4().hex[:10]}")
        uri = loc[len("file://"):] if loc.startswith("file://") else loc
        DeltaTable.create(uri, _schema(), storage_options=env.storage_options() or None)
        uris.append(uri)
    return uris


def run_deltars(env: BenchEnv, uris: list[str], writers_per_table: int, duration: float) -> Sample:
    """Closed-loop delta-rs writers for ``duration`` seconds. ``retries`` counts transactions that
    failed after delta-rs's own retries and were tried again on a refreshed table."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import AddAction, CommitProperties

    sample = Sample()
    lock = threading.Lock()
    opts = env.storage_options() or None
    props = CommitProperties(max_commit_retries=1000)
    start = threading.Barrier(len(uris) * writers_per_table + 1)
    stop_at = [0.0]
    errors: list[BaseException] = []

    def writer(uri: str) -> None:
        try:
            dt = DeltaTable(uri, storage_options=opts)
            schema = dt.schema()
            n = 0
            start.wait()
            while time.perf_counter() < stop_at[0]:
                n += 1
                a = add_action(n, int(time.time() * 1000))
                add = AddAction(a["path"], a["size"], {}, a["modificationTime"], True, a["stats"])
                t0 = time.perf_counter()
                while True:
                    try:
                        dt.create_write_transaction([add], "append", schema, commit_properties=props)
                        break
                    except CommitFailedError:
                        with lock:
                            sample.retries += 1
                        dt.update_incremental()
                elapsed = time.perf_counter() - t0
                dt.update_incremental()
                with lock:
                    sample.latencies.append(elapsed)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            errors.append(e)
            raise

    threads = [threading.Thread(target=writer, args=(u,), daemon=True) for u in uris for _ in range(writers_per_table)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + 3600.0  # set for real below, once every writer has opened its table
    start.wait()
    t0 = time.perf_counter()
    stop_at[0] = t0 + duration
    for t in threads:
        t.join()
    sample.elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"delta-rs writer failed: {type(errors[0]).__name__}: {errors[0]}")
    return sample
