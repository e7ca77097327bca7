"""Scenario 8: one writer's sequential commits on one table, through each commit API of the one commit service,
side by side in the same run.

* ``/api/v1`` (owner-written): the writer sends the commit's NDJSON; the owner writes the staged file.
* Unity Catalog's preview API (``POST /delta/preview/commits``, writer-staged): the writer writes
  ``_delta_log/_staged_commits/<v:020>.<uuid>.json`` itself, then sends its name, size and timestamps.
* The Delta REST Catalog API (``updateTable`` with ``add-commit`` under ``/delta/v1``, writer-staged): the same
  staged file, then ``add-commit`` and ``set-latest-backfilled-version``.

Every commit is the same blind append (:func:`.load.commit_body`, ~600 bytes). A writer-staged commit's latency
is the whole client-side commit: the staged file's write (a plain create on local disk, no fsync, as Hadoop's
local file system and delta-rs write; one PUT on S3) plus the request, until the acknowledgment. No writer
publishes ``<v>.json`` itself: the service's backfiller does. Each writer reports the highest version it knows
published, as delta-spark does: the ``/delta/v1`` writer learns it from each ``updateTable`` reply (the unpublished
commits it lists); the preview reply is empty, so that writer keeps reporting version 0, what it knew when it
created the table (it does not list the log again). Either way the report costs the service one table read
and publishes nothing.

The three writers take turns in slices of about 2 s (one slice each when the scenario lasts under 3 s), so the
machine's drift over the run falls on all three alike; each slice ends with the backfill drained, unmeasured.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from client.contract.layout import STAGED_COMMITS_DIR, delta_file, local_path, staged_file, staged_file_name
from coordinator.bench.cpu import CpuWindow
from coordinator.bench.env import S3_KEY, S3_SECRET, BenchEnv
from coordinator.bench.load import BenchError, Driver, commit_body
from coordinator.bench.stats import Sample, parse_counters, per_commit

UC = "/api/2.1/unity-catalog"
V1 = UC + "/delta/v1"
JSON = b"application/json"
APIS = ("api/v1", "preview", "delta/v1")
LABELS = {"api/v1": "/api/v1 (owner writes)", "preview": "preview (writer stages)",
          "delta/v1": "delta/v1 (writer stages)"}
RETRYABLE = (429, 503)  # backlog full, unavailable: both APIs say "send the same request again"
SLICE_SECONDS = 2.0

_FIELD = {"name": "id", "type": "long", "nullable": True, "metadata": {}}
SCHEMA = {"type": "struct", "fields": [_FIELD]}
PROTOCOL = {"min-reader-version": 3, "min-writer-version": 7, "reader-features": ["catalogManaged"],
            "writer-features": ["catalogManaged", "inCommitTimestamp"]}
COLUMNS = [{"name": "id", "type_text": "bigint", "type_name": "LONG", "position": 0, "nullable": True,
            "type_json": orjson.dumps(_FIELD).decode()}]


def scenario(api: str) -> str:
    return f"8. 1 writer, {LABELS[api]}"


def version0(table_id: str, ict: int) -> bytes:
    """Version 0 as a catalog-managed writer writes it: catalogManaged (reader and writer), in-commit
    timestamps, the table id in the metadata's configuration."""
    actions: list[dict[str, Any]] = [
        {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "CREATE TABLE",
                        "txnId": str(uuid.uuid4())}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["catalogManaged"],
                      "writerFeatures": ["catalogManaged", "inCommitTimestamp"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": orjson.dumps(SCHEMA).decode(), "partitionColumns": [],
                      "configuration": {"delta.enableInCommitTimestamps": "true",
                                        "delta.feature.catalogManaged": "supported",
                                        "io.unitycatalog.tableId": table_id},
                      "createdTime": ict}},
    ]
    return b"".join(orjson.dumps(a) + b"\n" for a in actions)


def preview_body(table_id: str, location: str, version: int, file_name: str, size: int, ts: int,
                 published: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"table_id": table_id, "table_uri": location,
                            "commit_info": {"version": version, "timestamp": ts, "file_name": file_name,
                                            "file_size": size, "file_modification_timestamp": ts}}
    if published is not None:
        body["latest_backfilled_version"] = published
    return body


def update_body(table_id: str, version: int, file_name: str, size: int, ts: int,
                published: int | None) -> dict[str, Any]:
    updates: list[dict[str, Any]] = [{"action": "add-commit", "commit": {
        "version": version, "timestamp": ts, "file-name": file_name, "file-size": size,
        "file-modification-timestamp": ts}}]
    if published is not None:
        updates.append({"action": "set-latest-backfilled-version", "latest-published-version": published})
    return {"requirements": [{"type": "assert-table-uuid", "uuid": table_id}], "updates": updates}


def published_from_load(reply: dict[str, Any]) -> int:
    """The highest published version an updateTable (load-table) reply tells: below its oldest unpublished
    commit, or its latest version when it lists none."""
    commits = reply.get("commits") or []
    if commits:
        return min(int(c["version"]) for c in commits) - 1
    return int(reply["latest-table-version"])


class Stager:
    """The writer's own file writes, on the bench's storage: a plain exclusive create on local disk (the
    folder made once), one PUT through s3fs on S3."""

    def __init__(self, env: BenchEnv) -> None:
        self.s3 = env.storage == "s3"
        self.env = env
        self.fs: Any = None
        self._dirs: set[str] = set()

    async def __aenter__(self) -> Stager:
        if self.s3:
            import s3fs

            self.fs = s3fs.S3FileSystem(key=S3_KEY, secret=S3_SECRET, endpoint_url=self.env.s3_endpoint,
                                        asynchronous=True, skip_instance_cache=True, use_listings_cache=False)
            await self.fs.set_session()
        return self

    async def __aexit__(self, *_exc: Any) -> None:
        creator = getattr(self.fs, "_s3creator", None)
        if creator is not None:  # s3fs leaves an asynchronous instance's session open
            await creator.__aexit__(None, None, None)

    async def put(self, uri: str, data: bytes) -> None:
        if self.s3:
            await self.fs._pipe_file(uri[len("s3://"):], data)
            return
        path = local_path(uri)
        folder = os.path.dirname(path)
        if folder not in self._dirs:
            os.makedirs(folder, exist_ok=True)
            self._dirs.add(folder)
        with open(path, "xb") as f:
            f.write(data)


async def call(d: Driver, method: str, target: str, body: Any = None) -> tuple[int, Any]:
    status, raw = await d._call(method, target, b"" if body is None else orjson.dumps(body), JSON)
    return status, (orjson.loads(raw) if raw else None)


async def ok(d: Driver, method: str, target: str, body: Any = None) -> Any:
    status, reply = await call(d, method, target, body)
    if status != 200:
        raise BenchError(f"{method} {target} answered HTTP {status}: {reply}")
    return reply


@dataclass
class StagingWriter:
    """One catalog-managed table and its one writer, through the preview API or /delta/v1."""

    api: str  # "preview" | "delta/v1"
    d: Driver
    stager: Stager
    catalog: str = field(default_factory=lambda: f"bench_{uuid.uuid4().hex[:8]}")
    schema: str = "s"
    table: str = "t"
    table_id: str = ""
    location: str = ""
    version: int = 0  # the latest version this writer committed
    published: int = 0  # the highest version it knows published
    n: int = 0

    @property
    def v1_path(self) -> str:
        return f"{V1}/catalogs/{self.catalog}/schemas/{self.schema}/tables/{self.table}"

    async def create(self) -> StagingWriter:
        """Names, a staging table, version 0 written by the writer, then the table (unmeasured)."""
        d = self.d
        await ok(d, "POST", f"{UC}/catalogs", {"name": self.catalog})
        await ok(d, "POST", f"{UC}/schemas", {"name": self.schema, "catalog_name": self.catalog})
        ict = d.clock.next()
        if self.api == "delta/v1":
            base = f"{V1}/catalogs/{self.catalog}/schemas/{self.schema}"
            staging = await ok(d, "POST", f"{base}/staging-tables", {"name": self.table})
            self.table_id, self.location = staging["table-id"], staging["location"]
            await self.stager.put(delta_file(self.location, 0), version0(self.table_id, ict))
            await ok(d, "POST", f"{base}/tables", {
                "name": self.table, "location": self.location, "table-type": "MANAGED", "columns": SCHEMA,
                "protocol": PROTOCOL, "last-commit-timestamp-ms": ict,
                "properties": {"io.unitycatalog.tableId": self.table_id, "delta.enableInCommitTimestamps": "true"}})
        else:
            names = {"name": self.table, "catalog_name": self.catalog, "schema_name": self.schema}
            staging = await ok(d, "POST", f"{UC}/staging-tables", names)
            self.table_id, self.location = staging["id"], staging["staging_location"]
            await self.stager.put(delta_file(self.location, 0), version0(self.table_id, ict))
            await ok(d, "POST", f"{UC}/tables", {
                **names, "table_type": "MANAGED", "data_source_format": "DELTA", "storage_location": self.location,
                "columns": COLUMNS,
                "properties": {"io.unitycatalog.tableId": self.table_id, "delta.feature.catalogManaged": "supported"}})
        return self

    async def commit(self, sample: Sample, give_up_at: float) -> bool:
        """Stage version ``version + 1`` and send it; the latency is both. True when ratified."""
        t0 = time.perf_counter()
        v, ts = self.version + 1, self.d.clock.next()
        data = commit_body(ts, self.n)
        self.n += 1
        name = staged_file_name(v)
        await self.stager.put(staged_file(self.location, STAGED_COMMITS_DIR, name), data)
        if self.api == "delta/v1":
            target, body = self.v1_path, update_body(self.table_id, v, name, len(data), ts, self.published)
        else:
            target = f"{UC}/delta/preview/commits"
            body = preview_body(self.table_id, self.location, v, name, len(data), ts, self.published)
        while True:
            status, reply = await call(self.d, "POST", target, body)
            if status == 200:
                sample.latencies.append(time.perf_counter() - t0)
                self.version = v
                if self.api == "delta/v1":
                    self.published = published_from_load(reply)
                return True
            if status not in RETRYABLE:  # a lone sequential writer never loses a race: any other answer is wrong
                raise BenchError(f"{self.api} commit of version {v} refused: HTTP {status} {reply}")
            sample.retries += 1
            if time.perf_counter() > give_up_at:
                sample.failures += 1
                return False
            await asyncio.sleep(0.002)  # the same request again: a ratified retry is a no-op


@dataclass
class Side:
    """What scenario 8 gathers for one API over its slices."""

    sample: Sample = field(default_factory=Sample)
    work: dict[str, float] = field(default_factory=dict)  # counter deltas, summed over the slices
    cpu_service: float | None = 0.0
    cpu_own: float = 0.0
    cpu_elapsed: float = 0.0
    requests: int = 0

    def add_counters(self, before: dict[str, float], after: dict[str, float]) -> None:
        for k in set(before) | set(after):
            self.work[k] = self.work.get(k, 0.0) + after.get(k, 0.0) - before.get(k, 0.0)

    def add_cpu(self, w: CpuWindow, requests: int) -> None:
        self.cpu_elapsed += w.elapsed
        self.cpu_own += w.load_generator
        self.cpu_service = None if w.service is None or self.cpu_service is None else self.cpu_service + w.service
        self.requests += requests

    def cpu_figures(self) -> dict[str, float | None]:
        w = CpuWindow(0)
        w.elapsed, w.load_generator, w.service = self.cpu_elapsed, self.cpu_own, self.cpu_service
        return w.figures(self.sample.count, self.requests)


async def run(env: BenchEnv, duration: float, owner_table: str, start: int) -> tuple[dict[str, Side], dict[str, int]]:
    """Each API's writer in turn for ``duration`` seconds in all. ``owner_table`` is a fresh /api/v1 table at
    version ``start``. Returns each API's side and the latest version acknowledged per table."""
    rounds = max(1, round(duration / SLICE_SECONDS))
    slice_s = duration / rounds
    sides = {api: Side() for api in APIS}
    async with Driver(env.endpoint) as d, Stager(env) as stager:
        writers = {api: await StagingWriter(api, d, stager).create() for api in APIS[1:]}
        owner_known = start
        for _ in range(rounds):
            for api in APIS:
                side, s = sides[api], sides[api].sample
                table = owner_table if api == "api/v1" else writers[api].table_id
                before, sent = parse_counters(await d.metrics_text()), d.requests
                t0 = time.perf_counter()
                stop_at = t0 + slice_s
                with CpuWindow(env.service_pid) as cpu:
                    while time.perf_counter() < stop_at:
                        if api == "api/v1":
                            owner_known = await d.commit(owner_table, owner_known, s, stop_at + 30.0)
                        else:
                            await writers[api].commit(s, stop_at + 30.0)
                s.elapsed += time.perf_counter() - t0
                side.add_cpu(cpu, d.requests - sent)
                side.add_counters(before, parse_counters(await d.metrics_text()))
                await d.drain_backfill([table])
    latest = {owner_table: owner_known, **{w.table_id: w.version for w in writers.values()}}
    return sides, latest


def rows(sides: dict[str, Side]) -> list[tuple[str, Sample, dict[str, Any]]]:
    """(scenario, sample, extra fields of the row) per API, in APIS order."""
    return [(scenario(api), side.sample, {"api": api, "work": per_commit({}, side.work), "cpu": side.cpu_figures(),
                                          "latency_covers": "request" if api == "api/v1" else "stage + request"})
            for api, side in sides.items()]


NOTE = ("Scenario 8 (one writer, sequential commits on one table, per API; the three take turns in slices): a "
        "writer-staged commit's latency is the whole client-side commit, the staged file's write (local disk: no "
        "fsync) plus the request, until the acknowledgment, and its load generator CPU includes that write; an "
        "/api/v1 commit's is the request alone (the owner writes the file). No writer publishes: the service's "
        "backfiller does. The writers report the highest version they know published (delta/v1: from each "
        "updateTable reply; preview: 0, its reply is empty).")
