"""Runs the scenarios in one go against one world and gathers the figures and the targets."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from client.contract.layout import delta_file
from coordinator.bench.cpu import CpuWindow
from coordinator.bench.env import BenchEnv, storage_label
from coordinator.bench.load import BenchError, Driver, local_published, run_paced, run_readers, run_writers
from coordinator.bench.stats import Sample, parse_counters, per_commit

#: Scenario 6: the probe and its twin's take turns in this many slices each (decision 57).
PROBE_SLICES = 4


@dataclass
class BenchOptions:
    database: str = "postgres"
    storage: str = "local"
    pg_url: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    duration: float = 10.0  # seconds per scenario
    contention: tuple[int, ...] = (4, 16, 64)
    tables: int = 64
    readers: int = 4
    lag_rate: float = 100.0
    growth_tables: int = 10_000
    growth_rows: int = 100
    deltars: bool = True
    backfill_batch_size: int = 1
    keep_workdir: bool = False
    open_versions: int = 1000  # scenario 7 (coordinator/bench/checkpoints.py); 0 skips it
    open_repeats: int = 15
    ui_repeats: int = 30  # scenario 9: requests per UI page
    only_ui: bool = False  # the warm-up, the growth and scenario 9 only (the UI's figures, in a minute)
    default_settings: bool = True  # scenario 3 once more on a service with default settings
    workers: int = 0  # the service's processes (serve --workers); 0 = serve's default, the number of CPUs
    tx_sizes: tuple[int, ...] = (2, 8, 32)  # scenario 10 (coordinator/bench/transactions.py); () skips it
    compaction_inserts: int = 2000  # scenario 12 (coordinator/bench/compaction.py): the table's INSERTs; 0 skips it
    only: tuple[int, ...] = ()  # the scenarios to run (0-12; 9 runs after 6's growth); empty: all of them

    def wants(self, scenario: int) -> bool:
        return not self.only or scenario in self.only

    @classmethod
    def smoke(cls, **kw: Any) -> BenchOptions:
        """Seconds, not minutes: every scenario runs briefly on a small growth."""
        base: dict[str, Any] = dict(duration=1.0, contention=(4, 16), tables=8, readers=2, lag_rate=50.0, growth_tables=200,
                    growth_rows=20, open_versions=30, open_repeats=3, ui_repeats=3, compaction_inserts=100)
        base.update(kw)
        return cls(**base)


@dataclass
class Bench:
    opts: BenchOptions
    say: Callable[[str], None] = print
    results: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, int] = field(default_factory=dict)  # table id -> expected latest version
    env: BenchEnv | None = None
    twin: BenchEnv | None = None  # scenario 6: a second world, never grown, probed beside the first
    twin_checks: dict[str, int] = field(default_factory=dict)
    compaction: dict[str, Any] | None = None  # scenario 12's summary, for the report

    # -- plumbing -----------------------------------------------------------------------------------

    def _record(self, scenario: str, system: str, sample: Sample, **extra: Any) -> dict[str, Any]:
        row = {"scenario": scenario, "system": system, **sample.summary(), **extra}
        self.results.append(row)
        self.say(f"  {scenario:<34} {system:<9} {row['per_second']:>9.1f}/s  p50 {_f(row['p50_ms'])}  "
                 f"p95 {_f(row['p95_ms'])}  p99 {_f(row['p99_ms'])} ms  conflicts {row['conflicts']}  "
                 f"retries {row['retries']}")
        if "fairness" in row:
            f = row["fairness"]
            self.say(f"  {'':<34} {'':<9} fairness over {f['writers']} writers: share min {_f(f['min_share'])} "
                     f"max {_f(f['max_share'])}, Jain {_f(f['jain'])}")
        cpu = extra.get("cpu") or {}
        if cpu.get("service_cpu_ms_per_commit") is not None:
            self.say(f"  {'':<34} {'':<9} service CPU {cpu['service_cpu_ms_per_commit']:.2f} ms/commit "
                     f"({cpu['service_cores']:.2f} cores); load generator {cpu['load_generator_cores']:.2f} cores, "
                     f"{cpu['load_generator_cores_per_1k_rps']} cores per 1,000 requests/s")
        return row

    def _new_tables(self, n: int, env: BenchEnv | None = None) -> list[str]:
        from client import CommitOwnerClient
        from client.lifecycle import create_table

        env = env or self.env
        assert env is not None
        opts = env.fs_options()
        schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
        ids = []
        with CommitOwnerClient(env.endpoint) as c:
            for _ in range(n):
                import uuid

                t = create_table(env.location(f"owner-{uuid.uuid4().hex[:10]}"), schema, client=c,
                                 storage_options=opts)
                ids.append(t.table_id)
                self._checks(env)[t.table_id] = 0
        return ids

    async def _owner_writers(self, scenario: str, tables: list[str], per_table: int, readers: int = 0,
                             suffix: str = "", tickets: bool = True) -> None:
        assert self.env is not None
        async with Driver(self.env.endpoint) as d:
            before = parse_counters(await d.metrics_text())
            starts = {t: self.checks[t] for t in tables}
            sent = d.requests
            # The CPU window holds the load only: the /metrics scrapes and the backfill drain stay outside it.
            with CpuWindow(self.env.service_pid) as cpu:
                if readers:
                    done = asyncio.Event()
                    rtask = asyncio.ensure_future(run_readers(d, tables, readers, done.is_set))
                    sample, acked = await run_writers(d, tables, per_table, self.opts.duration, starts,
                                                      tickets=tickets)
                    done.set()
                    rsample = await rtask
                else:
                    sample, acked = await run_writers(d, tables, per_table, self.opts.duration, starts,
                                                      tickets=tickets)
            counts = per_commit(before, parse_counters(await d.metrics_text()))
            cpu_figures = cpu.figures(sample.count, d.requests - sent)
            for t, n in acked.items():
                self.checks[t] += n
            await d.drain_backfill(tables)
        self._record(scenario + suffix, "owner", sample, work=counts, writers=len(tables) * per_table, cpu=cpu_figures,
                     settings=self.env.settings)
        if readers:
            self._record("4. getCommits during 3" + suffix, "owner", rsample, readers=readers)

    async def _probe(self, label: str) -> dict[str, Any]:
        """Scenario 6's probe: one writer on a fresh table, then sequential getCommits on it. With the twin (a
        second world on the same machine that is never grown) the same on a fresh table of its own, the two
        taking turns in ``PROBE_SLICES`` slices each, so the probe after the growth has beside it how the
        machine itself moved since the probe before (its load, its caches, its clock speed)."""
        envs = [e for e in (self.env, self.twin) if e is not None]
        tables = [self._new_tables(1, e)[0] for e in envs]
        slices = PROBE_SLICES if len(envs) > 1 else 1
        part = max(0.5, self.opts.duration / 2) / slices
        writes, reads = [Sample() for _ in envs], [Sample() for _ in envs]
        acked = dict.fromkeys(tables, 0)
        async with contextlib.AsyncExitStack() as stack:
            drivers = [await stack.enter_async_context(Driver(e.endpoint)) for e in envs]
            for _ in range(slices):
                for d, t, w in zip(drivers, tables, writes, strict=True):
                    sample, done = await run_writers(d, [t], 1, part, {t: acked[t]})
                    acked[t] += done[t]
                    w.extend(sample)
            for d, t in zip(drivers, tables, strict=True):
                await d.drain_backfill([t])
            for _ in range(slices):
                for d, t, r in zip(drivers, tables, reads, strict=True):
                    t0 = time.perf_counter()
                    while time.perf_counter() - t0 < part:
                        s = time.perf_counter()
                        await d.get_commits(t)
                        r.latencies.append(time.perf_counter() - s)
                    r.elapsed += time.perf_counter() - t0
        for e, t in zip(envs, tables, strict=True):
            self._checks(e)[t] += acked[t]
        out = {"commit": self._record(f"6. growth probe, {label}", "owner", writes[0]),
               "get": self._record(f"6. getCommits probe, {label}", "owner", reads[0])}
        if len(envs) > 1:
            out["twin"] = {"commit": self._record(f"6. growth probe, {label}, twin", "owner", writes[1]),
                           "get": self._record(f"6. getCommits probe, {label}, twin", "owner", reads[1])}
        return out

    async def _warm_up(self) -> None:
        """Unrecorded commits and reads first, so the first measured scenario does not pay for cold starts
        (the service's pools, imports and caches) and the growth comparison compares like with like."""
        assert self.env is not None
        (table,) = self._new_tables(1)
        async with Driver(self.env.endpoint) as d:
            _, acked = await run_writers(d, [table], 4, min(3.0, self.opts.duration), {table: 0})
            self.checks[table] += acked[table]
            await d.drain_backfill([table])
            for _ in range(100):
                await d.get_commits(table)

    async def _lag(self) -> None:
        assert self.env is not None
        env = self.env
        (table,) = self._new_tables(1)
        from client.http import CommitOwnerClient

        with CommitOwnerClient(env.endpoint) as c:
            location = c.get_table(table).location
        if env.storage == "s3":
            import s3fs

            fs = s3fs.S3FileSystem(key="bench", secret="bench", endpoint_url=env.s3_endpoint, asynchronous=True,
                                   skip_instance_cache=True, use_listings_cache=False)
            await fs.set_session()

            async def on_s3(v: int) -> bool:
                return bool(await fs._exists(delta_file(location, v)[len("s3://"):]))
            published: Callable[[int], Any] = on_s3
        else:
            published = local_published(location)
        async with Driver(env.endpoint) as d:
            res = await run_paced(d, table, 0, self.opts.lag_rate, self.opts.duration, published)
        self.checks[table] += res.acked
        self._record(f"5. paced {self.opts.lag_rate:.0f}/s: commit", "owner", res.commits)
        self._record(f"5. paced {self.opts.lag_rate:.0f}/s: backfill lag", "owner", res.lag)

    async def _catalog_commits(self) -> None:
        """Scenario 8: one writer's sequential commits through /api/v1, the preview API and /delta/v1."""
        from coordinator.bench import catalogs

        assert self.env is not None
        (table,) = self._new_tables(1)
        sides, latest = await catalogs.run(self.env, self.opts.duration, table, self.checks[table])
        self.checks.update(latest)
        for name, sample, extra in catalogs.rows(sides):
            self._record(name, "owner", sample, settings=self.env.settings, **extra)

    async def _transactions(self) -> None:
        """Scenario 10: multi-table transactions of each size beside the same commits one table at a time."""
        from coordinator.bench import transactions

        assert self.env is not None
        tables = self._new_tables(max(self.opts.tx_sizes))
        latest = {t: self.checks[t] for t in tables}
        rows = await transactions.run(self.env.endpoint, self.opts.duration, tables, latest, self.opts.tx_sizes)
        self.checks.update(latest)
        for name, sample, extra in rows:
            row = self._record(name, "owner", sample, settings=self.env.settings, **extra)
            self.say(f"  {'':<34} {'':<9} {row['commits_per_second']:.1f} commits/s over {extra['tables']} tables")

    def _write_table(self) -> None:
        """Scenario 11: a user's sequential small ``write_table`` appends, each end to end (``writes.py``)."""
        from client import CommitOwnerClient
        from coordinator.bench import writes

        assert self.env is not None
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            self.say("  scenario 11 skipped: write_table needs pyarrow (make install-test installs it)")
            return
        (table,) = self._new_tables(1)
        with CommitOwnerClient(self.env.endpoint) as c:
            location = c.get_table(table).location
        sample, latest, work = writes.run(self.env, location, self.opts.duration)
        self.checks[table] = latest
        self._record("11. write_table, 3 rows, sequential", "owner", sample, work=work, settings=self.env.settings,
                     workers=self.env.service_workers)

    async def _compaction(self) -> None:
        """Scenario 12: a table of single-row INSERTs scanned by delta-rs and DuckDB before and after one compaction
        pass, and a writer's commits during the pass (``compaction.py``)."""
        from client import CommitOwnerClient
        from coordinator.bench import compaction

        assert self.env is not None
        why = compaction.skipped(self.env)
        if why:
            self.say(f"  scenario 12 skipped: {why}")
            return
        first, second = self._new_tables(2)
        with CommitOwnerClient(self.env.endpoint) as c:
            locations = (c.get_table(first).location, c.get_table(second).location)
        self.compaction, rows, (self.checks[first], self.checks[second]) = await compaction.run(
            self.env, (first, second), locations, self.opts.compaction_inserts, self.say)
        for name, system, sample, extra in rows:
            self._record(name, system, sample, **extra)

    def _deltars(self, tables: int, writers: int) -> Sample:
        """delta-rs writing ``tables`` new tables of its own, ``writers`` each (the filesystem's commits)."""
        from coordinator.bench import deltars

        assert self.env is not None
        return deltars.run_deltars(self.env, deltars.create_tables(self.env, tables), writers, self.opts.duration)

    def _checks(self, env: BenchEnv) -> dict[str, int]:
        """The expected latest versions of ``env``'s tables (the twin keeps its own)."""
        return self.twin_checks if env is self.twin else self.checks

    async def _check(self, env: BenchEnv) -> list[str]:
        """Every table of ``env`` whose latest version differs from the commits acknowledged to it."""
        bad = []
        async with Driver(env.endpoint) as d:
            for t, want in self._checks(env).items():
                got = await d.latest(t)
                if got != want:
                    bad.append(f"table {t}: latestTableVersion {got}, acknowledged through {want}")
        return bad

    # -- the run ------------------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        """Every scenario of the options, in one event loop (the command runs it: ``cli/bench.py``); the
        synchronous ones (floors, delta-rs, growth, checkpoints, write_table, restarts) run in a thread while the
        loop waits, so they meet no running loop, as before."""
        o = self.opts
        from coordinator.bench import checkpoints, floor, growth, ui

        self.env = env = BenchEnv(database=o.database, storage=o.storage, pg_url=o.pg_url,
                                  backfill_batch_size=o.backfill_batch_size, keep_workdir=o.keep_workdir, workers=o.workers)
        started = time.time()
        self.say(f"bench: {o.database} + {storage_label(o.storage)}, {o.duration:g} s per scenario, service workers "
                 f"{self.env.service_workers}, workdir {self.env.workdir}")
        with self.env:
            await self._warm_up()
            if o.only_ui:
                return await self._ui_only(started)
            if o.wants(6):
                await self._probe("empty database")  # reported; the target uses the probe before growth
            if o.wants(0):
                fl = await asyncio.to_thread(floor.run_floor, self.env, o.duration)
                self._record("0. physical floor (create+tx)", "floor", fl["commit"])
                self._record("0. floor: durable create", "floor", fl["storage"])
                self._record("0. floor: one transaction", "floor", fl["database"])
                self._record(f"0b. parallel floor, {o.tables} tables", "floor",
                             await asyncio.to_thread(floor.run_parallel_floor, self.env, o.tables, o.duration),
                             threads=o.tables)
                # the design card's own work per commit: staged create, transaction, <v>.json's create (issue 39)
                card = await asyncio.to_thread(lambda: floor.run_floor(env, o.duration, card=True))
                self._record("0. card floor (create+tx+create)", "floor", card["commit"])
                self._record(f"0b. parallel card floor, {o.tables} tables", "floor",
                             await asyncio.to_thread(lambda: floor.run_parallel_floor(env, o.tables, o.duration, card=True)),
                             threads=o.tables)
            if o.wants(1):
                await self._owner_writers("1. one table, 1 writer", self._new_tables(1), 1)
            if o.wants(2):
                for w in o.contention:
                    await self._owner_writers(f"2. one table, {w} writers", self._new_tables(1), w)
                # naive clients (Sail, DuckDB, delta-spark): no ticket in the table's line (issue 39)
                await self._owner_writers("2n. one table, 16 writers without tickets", self._new_tables(1), 16,
                                                tickets=False)
            if o.wants(3):
                await self._owner_writers(f"3. {o.tables} tables, {o.tables} writers", self._new_tables(o.tables),
                                                1, readers=o.readers)
            if o.wants(3) and o.default_settings:
                # The same scenario on a service with the settings a user gets by default (INFO access log,
                # JSON lines, default pool, janitor on): its CPU per commit is the figure users pay.
                await asyncio.to_thread(self.env.restart_service, "default")
                await self._warm_up()
                await self._owner_writers(f"3. {o.tables} tables, {o.tables} writers", self._new_tables(o.tables),
                                                1, readers=o.readers, suffix=", default settings")
                await asyncio.to_thread(self.env.restart_service, "tuned")
                await self._warm_up()
            if o.wants(5):
                await self._lag()
            if o.wants(8):
                await self._catalog_commits()
            if o.tx_sizes and o.wants(10):
                await self._transactions()
            if o.wants(11):
                await asyncio.to_thread(self._write_table)
            if o.open_versions and o.wants(7):
                self.say(f"  scenario 7: a {o.open_versions}-version table, opened without and with checkpoints ...")
                for name, reader, sample in await asyncio.to_thread(checkpoints.run, self.env, o.open_versions,
                                                                    o.open_repeats):
                    self._record(name, reader, sample)
            if o.compaction_inserts and o.wants(12):
                await self._compaction()
            if o.deltars:
                if o.wants(1):
                    self._record("1. one table, 1 writer", "delta-rs", await asyncio.to_thread(self._deltars, 1, 1))
                if o.wants(2):
                    w = 16 if 16 in o.contention else max(o.contention)
                    self._record(f"2. one table, {w} writers", "delta-rs", await asyncio.to_thread(self._deltars, 1, w))
                if o.wants(3):
                    self._record(f"3. {o.tables} tables, {o.tables} writers", "delta-rs",
                                 await asyncio.to_thread(self._deltars, o.tables, 1))
            before = after = grown = None
            twin_bad: list[str] = []
            if o.wants(6):
                # The growth target compares probes taken just before and just after the growth: adjacent in
                # time, so the machine's drift over the run (caches, autovacuum, other load) does not decide it.
                self.twin = BenchEnv(database=o.database, storage=o.storage, pg_url=o.pg_url,
                                     backfill_batch_size=o.backfill_batch_size, workers=o.workers)
                with self.twin:
                    before = await self._probe("before growth")
                    self.say(f"  growing the database: {o.growth_tables} tables x {o.growth_rows} commit rows "
                             "(not the twin's) ...")
                    grown = await asyncio.to_thread(growth.grow, self.env, o.growth_tables, o.growth_rows)
                    self.say(f"  grown in {grown['seconds']} s: {grown['tables_total']} tables, "
                             f"{grown['commit_rows_total']} commit rows")
                    after = await self._probe("after growth")
                    twin_bad = await self._check(self.twin)
                self.twin, self.twin_checks = None, {}
                if o.wants(9):  # scenario 9 measures the UI at the grown size
                    for label, sample in await ui.measure(self.env, o.ui_repeats):
                        self._record(f"9. UI {label}, {grown['tables_total']} tables", "owner", sample)
            bad = await self._check(self.env) + twin_bad
        report = {
            "machine": machine(),
            "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(o).items()},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 1),
            "service_workers": self.env.service_workers,
            "results": self.results,
            "growth": grown,
            "targets": targets(self.results, before, after, o)
            + (checkpoints.targets(self.results, o.open_versions) if o.open_versions and o.wants(7) else [])
            + (ui.targets(self.results) if o.wants(9) else []),
            "openRatios": checkpoints.ratios(self.results, o.open_versions) if o.open_versions and o.wants(7) else {},
            "compaction": self.compaction,
            "consistency": {"tables": len(self.checks), "violations": bad},
        }
        if bad:
            raise BenchCheckError(report)
        return report


    async def _ui_only(self, started: float) -> dict[str, Any]:
        """The growth, then scenario 9 (inside the running world)."""
        from coordinator.bench import growth, ui

        o = self.opts
        assert self.env is not None
        self.say(f"  growing the database: {o.growth_tables} tables x {o.growth_rows} commit rows ...")
        grown = await asyncio.to_thread(growth.grow, self.env, o.growth_tables, o.growth_rows)
        for label, sample in await ui.measure(self.env, o.ui_repeats):
            self._record(f"9. UI {label}, {grown['tables_total']} tables", "owner", sample)
        return {"machine": machine(), "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(o).items()},
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                "seconds": round(time.time() - started, 1), "service_workers": self.env.service_workers,
                "results": self.results, "growth": grown, "targets": ui.targets(self.results), "openRatios": {}, "compaction": None,
                "consistency": {"tables": 0, "violations": []}}


#: The scenarios the bench runs on an emulator (coordinator/bench/env.py ``EMULATED``): the floors, one writer,
#: racing writers, many tables (with its readers) and delta-rs beside them. The others read or write storage
#: through code written for local disk and S3 only.
EMULATOR_SCENARIOS = (0, 1, 2, 3, 4)


class BenchCheckError(BenchError):
    def __init__(self, report: dict[str, Any]) -> None:
        super().__init__("; ".join(report["consistency"]["violations"]))
        self.report = report


def _f(x: float | None) -> str:
    return "   -  " if x is None else f"{x:6.2f}"


def _find(results: list[dict[str, Any]], prefix: str, system: str) -> dict[str, Any] | None:
    for r in results:
        if r["scenario"].startswith(prefix) and r["system"] == system:
            return r
    return None


def _cpu_ms(row: dict[str, Any] | None) -> float | None:
    value = (row.get("cpu") or {}).get("service_cpu_ms_per_commit") if row else None
    return float(value) if value is not None else None


def _ratio(a: Any, b: Any) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def targets(results: list[dict[str, Any]], before: dict[str, Any] | None, after: dict[str, Any] | None,
            o: BenchOptions) -> list[dict[str, Any]]:
    """Each target of docs/benchmarks.md whose scenarios ran, as a measured ratio and met / not met (the limits
    are those of the latest performance issue, issue 39, "The targets" in docs/benchmarks.md)."""
    out: list[dict[str, Any]] = []

    def add(name: str, value: Any, op: str, limit: float, how: str) -> None:
        met = value is not None and (value <= limit if op == "<=" else value >= limit if op == ">=" else value < limit)
        out.append({"target": name, "measured": value, "rule": f"{op} {limit:g}", "met": bool(met), "how": how})

    one = _find(results, "1. one table, 1 writer", "owner")
    card = _find(results, "0. card floor", "floor")
    add("one writer p50 / card floor p50", _ratio(one and one["p50_ms"], card and card["p50_ms"]), "<=", 1.0,
        "scenario 1 p50 over the card floor's p50 (staged create, transaction, <v>.json's create, in sequence)")
    w16 = _find(results, "2. one table, 16 writers", "owner")
    add("16 writers rate / 1 writer rate", _ratio(w16 and w16["per_second"], one and one["per_second"]), ">=", 0.8,
        "scenario 2 (16 writers) commits/s over scenario 1 commits/s")
    add("16 writers Jain's fairness index", w16 and (w16.get("fairness") or {}).get("jain"), ">=", 0.9,
        "scenario 2 (16 writers): (sum of commits per writer)^2 / (writers x sum of squares)")
    add("16 writers p99 (ms)", w16 and w16["p99_ms"], "<", 250.0, "scenario 2 (16 writers) commit p99")
    naive = _find(results, "2n. one table, 16 writers without tickets", "owner")
    add("16 writers without tickets rate / 1 writer rate",
        _ratio(naive and naive["per_second"], one and one["per_second"]), ">=", 0.5,
        "scenario 2n (16 racing writers that send no ticket) commits/s over scenario 1 commits/s")
    shares = (naive or {}).get("fairness") or {}
    add("16 writers without tickets: smallest share / fair share",
        shares.get("min_share") and round(shares["min_share"] * shares["writers"], 3), ">=", 0.25,
        "scenario 2n: none starved (the writer with the fewest commits had at least a quarter of a fair share)")
    many = _find(results, f"3. {o.tables} tables", "owner")
    drs = _find(results, f"3. {o.tables} tables", "delta-rs")
    add(f"{o.tables} tables rate / delta-rs rate", _ratio(many and many["per_second"], drs and drs["per_second"]),
        ">=", 3.0, "scenario 3 commits/s over delta-rs on the same number of tables")
    par = _find(results, "0b. parallel card floor", "floor")
    add(f"{o.tables} tables rate / parallel card floor rate",
        _ratio(many and many["per_second"], par and par["per_second"]), ">=", 1.2,
        f"scenario 3 commits/s over scenario 0b's card floor (the card's work on {o.tables} tables at once)")
    add(f"{o.tables} tables p99 / parallel card floor p99", _ratio(many and many["p99_ms"], par and par["p99_ms"]),
        "<=", 1.0, "scenario 3 commit p99 over the parallel card floor's p99 in the same run")
    v1 = _find(results, "8. 1 writer, /api/v1", "owner")
    for label in ("preview", "delta/v1"):
        side = _find(results, f"8. 1 writer, {label}", "owner")
        add(f"{label} rate / /api/v1 rate", _ratio(side and side["per_second"], v1 and v1["per_second"]), ">=", 0.9,
            f"scenario 8: one writer through {label} over one writer through /api/v1")
        add(f"{label} service CPU per commit / /api/v1's", _ratio(_cpu_ms(side), _cpu_ms(v1)), "<=", 1.0,
            f"scenario 8: the service's CPU ms per commit through {label} over /api/v1's")
    lag = next((r for r in results if r["scenario"].endswith("backfill lag")), None)
    add(f"backfill lag p99 at {o.lag_rate:g}/s (ms)", lag and lag["p99_ms"], "<", 10.0,
        "time from acknowledgment to <v>.json readable")
    writes = _find(results, "11. write_table", "owner")
    add("write_table p99 (ms)", writes and writes["p99_ms"], "<", 50.0,
        "scenario 11: sequential small write_table appends through serve's workers, each until published (issue 39)")
    if before is not None and after is not None:
        _growth_targets(add, before, after)
    # --only: the targets of the scenarios left out are left out too (a full run reports them as not met)
    return [t for t in out if t["measured"] is not None] if o.only else out


def _growth_targets(add: Callable[..., None], before: dict[str, Any], after: dict[str, Any]) -> None:
    """The probe after the growth over the probe just before it; with the twin, divided by the twin's own ratio
    over the same minutes (what the machine moved by itself: a world that was not grown)."""
    for name, part, key, what in (("commit p50", "commit", "p50_ms", "one writer on a fresh table"),
                                  ("commit p99", "commit", "p99_ms", "one writer on a fresh table"),
                                  ("getCommits p50", "get", "p50_ms", "sequential getCommits")):
        value = _ratio(after[part][key], before[part][key])
        how = f"scenario 6 probe ({what}) after the growth over the same probe just before it"
        if "twin" in before and "twin" in after:
            value = _ratio(value, _ratio(after["twin"][part][key], before["twin"][part][key]))
            how += ", over the same ratio of the twin (never grown), probed in turns with it"
        add(f"{name} after growth / before", value, "<=", 1.1, how)


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform()}
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            info["memory_gib"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return info
