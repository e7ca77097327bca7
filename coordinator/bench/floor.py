"""The physical floor: only the unavoidable work of one commit, done sequentially on the same machine.

Per commit: one durable create of a file of the same size (exclusive create, write, fsync of the file
and of its folder on local disk; a conditional PUT on S3, ``If-None-Match: *`` on azurite,
``ifGenerationMatch=0`` on fake-gcs-server: fsspec's ``mode="create"`` on each), then one database transaction with the same
conditional UPDATE of the table row and INSERT of the commit row the owner runs, on the owner's own
database (a table row of its own). No HTTP, no JSON parsing, no pools, no backfill.

The card floor (``card=True``) is the work the design card itself asks of a commit, in sequence: the staged
file's durable create, the one ratifying transaction, then ``<v>.json``'s durable create (issue 39, decision 67).

Scenario 0b runs the same work on many tables at once, one thread and one connection per table.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

from client.contract.layout import (
    COMMITS_DIR,
    commit_dir_uri,
    delta_file_name,
    local_path,
    log_dir,
    object_key,
    staged_file_name,
)
from coordinator.bench.env import BenchEnv
from coordinator.bench.load import Clock, commit_body
from coordinator.bench.stats import Sample

# The owner's conditional UPDATE, which also moves latest_backfilled_version along (one more column of the same
# row): the service's backfiller, whose sweep looks for tables whose latest version is ahead of the backfilled one,
# then never works on the floor's tables while the floor is measured or afterwards.
_UPDATE = ("UPDATE owned_tables SET latest_version = {p}, latest_backfilled_version = {p}, last_commit_timestamp = {p}, "
           "last_commit_at = {p}, updated_at = {p} WHERE table_id = {p} AND latest_version = {p} AND accepting "
           "AND latest_version - latest_backfilled_version < {p} "
           "AND (last_commit_timestamp IS NULL OR last_commit_timestamp < {p})")
_INSERT = ("INSERT INTO commits (table_id, version, file_name, idempotency_key, file_size, file_modification_time, "
           "commit_timestamp, content_sha256, ratified_at, backfilled_at) "
           "VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})")
_TABLE = ("INSERT INTO owned_tables (table_id, location, commit_dir, base_version, latest_version, "
          "latest_backfilled_version, accepting, status, created_at, updated_at) "
          "VALUES ({p}, {p}, '_commits', 0, 0, 0, {t}, 'ACTIVE', 0, 0)")

_DONE_COMMITS = "UPDATE commits SET backfilled_at = {p} WHERE table_id = {p} AND backfilled_at IS NULL"


def _sql(env: BenchEnv, text: str) -> str:
    return text.format(p="?" if env.database == "sqlite" else "%s", t="1" if env.database == "sqlite" else "true")


class FloorTable:
    """One table of the floor: its own table row, commit folder and database connection; ``commit()`` does the
    unavoidable work of one version and returns (storage seconds, database seconds). ``card``: the design card's
    work, ``<v>.json``'s durable create after the transaction too."""

    def __init__(self, env: BenchEnv, card: bool = False) -> None:
        self.env, self.clock, self.v, self.card = env, Clock(), 0, card  # a clock per table: not thread-safe
        self.table_id = str(uuid.uuid4())
        location = env.location(f"floor-{self.table_id[:8]}")
        self.db = env.sync_db()
        self.update, self.insert = _sql(env, _UPDATE), _sql(env, _INSERT)
        self.fs = env.s3fs() if env.storage == "s3" else env.cloud_fs() if env.cloud is not None else None
        self.dir_fd = self.log_fd = -1
        try:
            if self.fs is None:
                self.folder = local_path(commit_dir_uri(location, COMMITS_DIR))
                self.log_folder = local_path(log_dir(location))
                os.makedirs(self.folder, exist_ok=True)
                self.dir_fd = os.open(self.folder, os.O_RDONLY)
                self.log_fd = os.open(self.log_folder, os.O_RDONLY)
            else:
                self.folder = object_key(commit_dir_uri(location, COMMITS_DIR))
                self.log_folder = object_key(log_dir(location))
            self.db.execute(_sql(env, _TABLE), (self.table_id, location))
        except BaseException:
            self.close()
            raise

    def commit(self) -> tuple[float, float]:
        self.v += 1
        v, ts = self.v, self.clock.next()
        data = commit_body(ts, v)
        uid = str(uuid.uuid4())
        name = staged_file_name(v, uid)
        s0 = time.perf_counter()
        self._create(self.folder, self.dir_fd, name, data)
        s1 = time.perf_counter()
        db = self.db
        db.execute("BEGIN IMMEDIATE" if self.env.database == "sqlite" else "BEGIN")
        cur = db.execute(self.update, (v, v, ts, ts, ts, self.table_id, v - 1, 1_000_000, ts))
        if cur.rowcount != 1:
            raise RuntimeError(f"floor: the conditional update of version {v} matched {cur.rowcount} rows")
        db.execute(self.insert, (self.table_id, v, name, uid, len(data), ts, ts, "0" * 64, ts, None))
        db.execute("COMMIT")
        s2 = time.perf_counter()
        if not self.card:
            return s1 - s0, s2 - s1
        self._create(self.log_folder, self.log_fd, delta_file_name(v), data)
        return s1 - s0 + time.perf_counter() - s2, s2 - s1

    def _create(self, folder: str, dir_fd: int, name: str, data: bytes) -> None:
        """One durable create: exclusive create, write, fsync of the file and its folder (a put-if-absent in a cloud)."""
        if self.fs is None:
            fd = os.open(f"{folder}/{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.fsync(dir_fd)
        else:
            self.fs.pipe_file(f"{folder}/{name}", data, mode="create")

    def close(self) -> None:
        """Mark the floor's commit rows backfilled, so that /metrics (oldest unbackfilled commit) and the
        backfiller leave them alone in later scenarios."""
        for fd in (self.dir_fd, self.log_fd):
            if fd >= 0:
                os.close(fd)
        self.dir_fd = self.log_fd = -1
        try:
            if self.v:
                self.db.execute(_sql(self.env, _DONE_COMMITS), (self.clock.next(), self.table_id))
        finally:
            self.db.close()


def run_floor(env: BenchEnv, duration: float, min_ops: int = 20, *, card: bool = False) -> dict[str, Any]:
    """Sequential floor commits for ``duration`` seconds; returns samples for the whole and each half."""
    table = FloorTable(env, card)
    try:
        whole, storage, database = Sample(), Sample(), Sample()
        t_end = time.perf_counter() + duration
        t0 = time.perf_counter()
        while time.perf_counter() < t_end or whole.count < min_ops:
            st, dbt = table.commit()
            storage.latencies.append(st)
            database.latencies.append(dbt)
            whole.latencies.append(st + dbt)
        whole.elapsed = storage.elapsed = database.elapsed = time.perf_counter() - t0
        return {"commit": whole, "storage": storage, "database": database}
    finally:
        table.close()


def run_parallel_floor(env: BenchEnv, tables: int, duration: float, *, card: bool = False) -> Sample:
    """Scenario 0b: ``tables`` threads, each doing the floor's work on a table of its own, all at once: the
    machine's own limit for scenario 3 (the file system's and the database's concurrency, no HTTP, no pools).
    File writes, fsyncs and database round trips release the GIL, so the threads overlap where the machine can."""
    lock = threading.Lock()
    floors: list[FloorTable] = []
    try:
        for _ in range(tables):
            floors.append(FloorTable(env, card))
        sample = Sample()
        start = threading.Barrier(tables + 1)
        errors: list[BaseException] = []
        stop_at = [0.0]

        def one(table: FloorTable) -> None:
            mine: list[float] = []
            try:
                start.wait()
                while time.perf_counter() < stop_at[0]:
                    st, dbt = table.commit()
                    mine.append(st + dbt)
            except BaseException as e:  # reported after the join
                errors.append(e)
            with lock:
                sample.latencies.extend(mine)

        threads = [threading.Thread(target=one, args=(t,), name=f"floor-{i}") for i, t in enumerate(floors)]
        for t in threads:
            t.start()
        stop_at[0] = time.perf_counter() + duration
        t0 = time.perf_counter()
        start.wait()
        for t in threads:
            t.join()
        sample.elapsed = time.perf_counter() - t0
        if errors:
            raise errors[0]
        return sample
    finally:
        for f in floors:
            f.close()
