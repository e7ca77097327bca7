"""Scenario 7: open time of an N-version owned table (default 1,000), at version 10 and at version N, by delta-rs
and by the project's snapshot reader, without and then with checkpoints (`commit-owner maintain` writes them
in between), in one run on the bench's own world.

The table is built through the owner: N commits of one ``add`` each (file names only: opening reads the
log, not the data), then backfilled. Each open is timed ``repeats`` times; the target compares the p50 at
version N with the p50 at version 10, with checkpoints.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

from coordinator.bench.env import S3_KEY, S3_SECRET, BenchEnv
from coordinator.bench.stats import Sample, timed

READERS = ("delta-rs", "snapshot")
FIRST = 10  # the small version every open is compared with
TARGET = 1.5  # with checkpoints, opening at version N costs at most this times opening at version 10


def scenario(version: int, checkpoints: bool) -> str:
    return f"7. open at v{version}, {'checkpoints' if checkpoints else 'no checkpoints'}"


def build_table(env: BenchEnv, versions: int) -> str:
    """An owned table with ``versions`` versions above 0, all published; returns its location."""
    from client import CommitOwnerClient
    from client.contract.delta_log import commit_info, now_ms
    from client.lifecycle import create_table

    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    location = env.location(f"open-{uuid.uuid4().hex[:10]}")
    with CommitOwnerClient(env.endpoint) as c:
        t = create_table(location, schema, client=c, storage_options=_fs_options(env))
        ict = now_ms()
        for v in range(1, versions + 1):
            ict += 1
            c.commit(t.table_id, v, [
                commit_info("WRITE", in_commit_timestamp=ict, read_version=v - 1),
                {"add": {"path": f"part-{uuid.uuid4()}.parquet", "partitionValues": {}, "size": 100,
                         "modificationTime": ict, "dataChange": True, "stats": json.dumps({"numRecords": 1})}}])
        c.backfill_to_version(t.table_id, versions)
    return location


def _fs_options(env: BenchEnv) -> dict[str, Any] | None:
    """The snapshot reader's (fsspec) options for the bench's storage."""
    if env.storage != "s3":
        return None
    return {"key": S3_KEY, "secret": S3_SECRET, "client_kwargs": {"endpoint_url": env.s3_endpoint,
                                                                  "region_name": "us-east-1"}}


def maintain(env: BenchEnv, location: str) -> None:
    """`commit-owner maintain LOCATION` (checkpoints only) against the bench's database and storage."""
    subprocess.run([sys.executable, "-m", "coordinator", "maintain", location, "--no-log-cleanup"],
                   env=env.maintenance_env(), check=True, capture_output=True, timeout=600)


def _openers(env: BenchEnv, location: str, version: int) -> dict[str, Callable[[], Any]]:
    from deltalake import DeltaTable

    from client.snapshot import load_snapshot

    uri = location if env.storage == "s3" else location[len("file://"):]
    rs_opts = env.storage_options() or None
    fs_opts = _fs_options(env)
    return {"delta-rs": lambda: DeltaTable(uri, version=version, storage_options=rs_opts),
            "snapshot": lambda: load_snapshot(location, version, ask_owner=False, storage_options=fs_opts)}


def run(env: BenchEnv, versions: int, repeats: int) -> list[tuple[str, str, Sample]]:
    """Build the table, time the opens without checkpoints, run maintain, time them again.
    Returns (scenario, reader, sample) rows in the order measured."""
    location = build_table(env, versions)
    rows: list[tuple[str, str, Sample]] = []
    for with_checkpoints in (False, True):
        if with_checkpoints:
            maintain(env, location)
        for v in (FIRST, versions):
            for reader, open_ in _openers(env, location, v).items():
                rows.append((scenario(v, with_checkpoints), reader, timed(open_, repeats)))
    return rows


def targets(results: list[dict[str, Any]], versions: int) -> list[dict[str, Any]]:
    """Per reader: p50 of opening at version N over p50 at version 10, with checkpoints (target <= 1.5)."""
    def p50(name: str, reader: str) -> float | None:
        row = next((r for r in results if r["scenario"] == name and r["system"] == reader), None)
        return row["p50_ms"] if row else None

    out = []
    for reader in READERS:
        top, low = p50(scenario(versions, True), reader), p50(scenario(FIRST, True), reader)
        value = round(top / low, 3) if top is not None and low else None
        out.append({"target": f"{reader} open v{versions} / v{FIRST}, checkpoints", "measured": value,
                    "rule": f"<= {TARGET:g}", "met": value is not None and value <= TARGET,
                    "how": f"scenario 7: p50 of opening at version {versions} over p50 at version {FIRST}, "
                           "after `commit-owner maintain` wrote the checkpoints"})
    return out


def ratios(results: list[dict[str, Any]], versions: int) -> dict[str, dict[str, float | None]]:
    """For the report: v{N}/v10 per reader, with and without checkpoints."""
    out: dict[str, dict[str, float | None]] = {}
    for reader in READERS:
        for cp in (False, True):
            rows = {r["scenario"]: r["p50_ms"] for r in results if r["system"] == reader}
            top, low = rows.get(scenario(versions, cp)), rows.get(scenario(FIRST, cp))
            out.setdefault(reader, {})["checkpoints" if cp else "no checkpoints"] = (
                round(top / low, 3) if top is not None and low else None)
    return out
