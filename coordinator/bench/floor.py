"""The physical floor: only the unavoidable work of one commit, done sequentially on the same machine.

Per commit: one durable create of a file of the same size (exclusive create, write, fsync of the file
and of its folder on local disk; a conditional PUT on S3), then one database transaction with the same
conditional UPDATE of the table row and INSERT of the commit row the owner runs, on the owner's own
database (a table row of its own). No HTTP, no JSON parsing, no pools, no backfill.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from client.layout import COMMITS_DIR, commit_dir_uri, local_path, staged_file_name

from .env import BenchEnv
from .load import Clock, commit_body
from .stats import Sample

_UPDATE = ("UPDATE owned_tables SET latest_version = {p}, last_commit_timestamp = {p}, last_commit_at = {p}, "
           "updated_at = {p} WHERE table_id = {p} AND latest_version = {p} AND accepting "
           "AND latest_version - latest_backfilled_version < {p} "
           "AND (last_commit_timestamp IS NULL OR last_commit_timestamp < {p})")
_INSERT = ("INSERT INTO commits (table_id, version, file_name, idempotency_key, file_size, file_modification_time, "
           "commit_timestamp, content_sha256, ratified_at, backfilled_at) "
           "VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})")
_TABLE = ("INSERT INTO owned_tables (table_id, location, commit_dir, base_version, latest_version, "
          "latest_backfilled_version, accepting, status, created_at, updated_at) "
          "VALUES ({p}, {p}, '_commits', 0, 0, 0, {t}, 'ACTIVE', 0, 0)")


def _sql(env: BenchEnv, text: str) -> str:
    return text.format(p="?" if env.database == "sqlite" else "%s", t="1" if env.database == "sqlite" else "true")


def run_floor(env: BenchEnv, duration: float, min_ops: int = 20) -> dict[str, Any]:
    """Sequential floor commits for ``duration`` seconds; returns samples for the whole and each half."""
    table_id = str(uuid.uuid4())
    location = env.location(f"floor-{table_id[:8]}")
    db = env.sync_db()
    update, insert = _sql(env, _UPDATE), _sql(env, _INSERT)
    fs = env.s3fs() if env.storage == "s3" else None
    if fs is None:
        folder = local_path(commit_dir_uri(location, COMMITS_DIR))
        os.makedirs(folder, exist_ok=True)
        dir_fd = os.open(folder, os.O_RDONLY)
    else:
        folder, dir_fd = commit_dir_uri(location, COMMITS_DIR)[len("s3://"):], -1
    try:
        db.execute(_sql(env, _TABLE), (table_id, location))
        whole, storage, database = Sample(), Sample(), Sample()
        clock, v = Clock(), 0
        t_end = time.perf_counter() + duration
        t0 = time.perf_counter()
        while time.perf_counter() < t_end or whole.count < min_ops:
            v += 1
            ts = clock.next()
            data = commit_body(ts, v)
            uid = str(uuid.uuid4())
            name = staged_file_name(v, uid)
            s0 = time.perf_counter()
            if fs is None:
                fd = os.open(f"{folder}/{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    os.write(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.fsync(dir_fd)
            else:
                fs.pipe_file(f"{folder}/{name}", data, mode="create")
            s1 = time.perf_counter()
            if env.database == "sqlite":
                db.execute("BEGIN IMMEDIATE")
            else:
                db.execute("BEGIN")
            cur = db.execute(update, (v, ts, ts, ts, table_id, v - 1, 1_000_000, ts))
            if cur.rowcount != 1:
                raise RuntimeError(f"floor: the conditional update of version {v} matched {cur.rowcount} rows")
            db.execute(insert, (table_id, v, name, uid, len(data), ts, ts, "0" * 64, ts, None))
            db.execute("COMMIT")
            s2 = time.perf_counter()
            storage.latencies.append(s1 - s0)
            database.latencies.append(s2 - s1)
            whole.latencies.append(s2 - s0)
        whole.elapsed = storage.elapsed = database.elapsed = time.perf_counter() - t0
        return {"commit": whole, "storage": storage, "database": database}
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)
        db.close()
