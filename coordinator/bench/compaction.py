"""Scenario 12: one compaction pass on a table of many small files, with a writer committing during it (issue 42).

The table: ``inserts`` single-row INSERTs (2,000; smoke 100), one after the other, each a one-row Parquet file
written as ``client.write_table`` writes it (``client.write.ArrowFiles``) and a blind append of it committed
through ``/api/v1`` by the bench's HTTP driver (``load.py``), as the other scenarios commit; then all published.

Before and after the pass, the table's files and bytes (its add actions as delta-rs reads them), and a full scan
by each engine from the published log, ``SCANS`` times after one unmeasured scan, each a fresh open (the log read
is in it): delta-rs ``DeltaTable(path).to_pyarrow_table()`` (and its open alone, beside it) and DuckDB's
``SELECT * FROM delta_scan(path)`` (its ``delta`` extension, loaded from its PyPI wheel). Every scan must return
every row committed, or the bench stops.

The pass is ``coordinator/ops/optimize.py: compact`` (what `commit-owner optimize` runs) with the default target
size and minimum, in a process of its own as the command runs (its pyarrow rewrite does not share an event loop
with the writer), which reports when it started and ended. From just before it starts until it has ended, a
writer commits single-row INSERTs at ``WRITER_RATE`` commits/s; its commits sent inside the pass are what another
writer saw while the compaction ran (a 409 when the compaction took its version: it rebases, as scenario 2's
writers do). The compaction rebases onto those appends and still commits, or the bench stops. Then the same pass
alone, with no writer, on a second table of the same INSERTs: what the writer beside it cost the pass.

Local disk only: on S3 (moto) the pass beside the writer did not end in 10 minutes, its read of the table starting
over from version 0 whenever a version was published while it read (docs/benchmarks.md, "Compaction (issue 42)").
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from client.actions import add_action
from client.contract.layout import new_batch_folder
from coordinator.bench.env import BenchEnv
from coordinator.bench.load import BenchError, Driver
from coordinator.bench.stats import Sample, timed

SCANS = 5  # measured full scans per engine, before and after the pass
WRITER_RATE = 20.0  # commits/s of the writer during the pass: a busy streaming writer, not a flood of new files
#: Seconds after which a pass is stopped and reported failed (alone, at 2,000 INSERTs, it takes about 2 s; a pass that
#: does not catch up with the writer grows in memory as it goes: 12 GB after 10 minutes, once)
PASS_TIMEOUT = 180.0
#: DuckDB's extension for a scan (import name, extension name), loaded from its PyPI wheel
DUCKDB_EXTENSIONS = (("duckdb_extension_delta", "delta"),)
SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def missing(modules: Sequence[tuple[str, str]]) -> list[str]:
    """The packages (pip names) of ``modules`` (import name, pip name) that are not installed."""
    return [pip for module, pip in modules if importlib.util.find_spec(module) is None]


def skipped(env: BenchEnv) -> str | None:
    """Why the whole scenario cannot run here (one line), or None."""
    absent = missing((("pyarrow", "pyarrow"), ("deltalake", "deltalake")))
    if absent:
        return f"needs {' and '.join(absent)} (the bench extra: pip install -e '.[bench]')"
    if env.storage != "local":
        # On S3 (moto) the pass beside the writer did not end in 10 minutes: the compaction's read of the table
        # starts over from version 0 whenever a version was published while it read (docs/benchmarks.md).
        return (f"runs on local disk only, not {env.storage}: beside a writer, the compaction's read of the table "
                "starts over whenever a version is published meanwhile, and on moto's S3 it did not catch up")
    return None


def duckdb_skipped(env: BenchEnv) -> str | None:
    """Why DuckDB's scans cannot run here (one line), or None."""
    absent = missing((("duckdb", "duckdb"), *((m, m.replace("_", "-")) for m, _ in DUCKDB_EXTENSIONS)))
    if absent:
        return f"DuckDB's scans need {', '.join(absent)} (the bench extra: pip install -e '.[bench]')"
    return None


def scenario(part: str) -> str:
    return f"12. compaction: {part}"


# -- the writes -----------------------------------------------------------------------------------------------


class OneRowFiles:
    """One-row Parquet files of the table at ``location``, each in a fresh batch folder, as write_table writes
    them (one ``ArrowFiles`` for them all: one filesystem)."""

    def __init__(self, location: str, storage_options: dict[str, Any] | None) -> None:
        from client.write import ArrowFiles

        self._files = ArrowFiles(None, SCHEMA, location, storage_options)

    def add(self, row: int) -> dict[str, Any]:
        """Write the file of row ``row``; returns its add action's body."""
        import pyarrow as pa

        self._files.table = pa.table({"id": pa.array([row], pa.int64())})
        (f,) = self._files.write(new_batch_folder(), [])
        return dict(add_action(f)["add"])


class PassFailed(BenchError):
    """The compaction pass failed or was stopped after ``PASS_TIMEOUT`` (the message says which, with its stderr)."""

    def __init__(self, message: str, started: float, ended: float) -> None:
        super().__init__(message)
        self.started, self.ended = started, ended


@dataclass
class Appends:
    """One writer's single-row INSERTs: each commit's send time (epoch seconds) and its own sample."""

    table_id: str
    files: OneRowFiles
    known: int  # the table's version the writer knows
    rows: int = 0  # rows it committed (ids 0 .. rows - 1 across the table)
    commits: list[tuple[float, Sample]] = field(default_factory=list)

    async def insert(self, d: Driver) -> None:
        add = self.files.add(self.rows)
        one = Sample()
        sent = time.time()
        version = await d.commit(self.table_id, self.known, one, time.perf_counter() + 60.0, add=add)
        if one.failures:
            raise BenchError(f"scenario 12: the INSERT of row {self.rows} was not committed within 60 s")
        self.commits.append((sent, one))
        self.known, self.rows = version, self.rows + 1

    def sample(self, since: float, until: float) -> Sample:
        """The commits sent in [since, until] (epoch seconds), as one sample over that span."""
        out = Sample()
        for t, one in self.commits:
            if since <= t <= until:
                out.extend(one)
        out.elapsed = until - since
        return out


async def build(d: Driver, appends: Appends, inserts: int) -> Sample:
    """``inserts`` single-row INSERTs, one after the other, then published; returns their sample."""
    started = time.time()
    for _ in range(inserts):
        await appends.insert(d)
    s = appends.sample(started, time.time())
    await d.drain_backfill([appends.table_id], timeout=300.0)
    return s


async def paced(d: Driver, appends: Appends, done: asyncio.Event) -> None:
    """INSERTs at ``WRITER_RATE`` commits/s until ``done``."""
    t0, i = time.perf_counter(), 0
    while not done.is_set():
        await appends.insert(d)
        i += 1
        delay = t0 + i / WRITER_RATE - time.perf_counter()
        if delay > 0:
            try:
                await asyncio.wait_for(done.wait(), delay)
            except asyncio.TimeoutError:
                pass


# -- the pass -------------------------------------------------------------------------------------------------


async def compaction_pass(env: BenchEnv, d: Driver, appends: Appends, location: str, *,
                          writer: bool) -> dict[str, Any]:
    """``compact`` on the table in a process of its own (``main`` below); with ``writer``, ``appends`` committing
    from the pass's start (the process's first line) until the process ended. Returns the pass's report with
    ``startedAt`` and ``endedAt`` (epoch seconds). Raises PassFailed when it failed or did not end in time."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "coordinator.bench.compaction", location,
                                                env=env.maintenance_env(), stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    errors = asyncio.ensure_future(proc.stderr.read())
    done = asyncio.Event()
    task = None
    started, first = time.time(), b""
    try:
        first = await proc.stdout.readline()
        if first and writer:
            task = asyncio.ensure_future(paced(d, appends, done))
        rest = await asyncio.wait_for(proc.stdout.read(), PASS_TIMEOUT)
        await proc.wait()
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise PassFailed(f"the compaction pass did not end within {PASS_TIMEOUT:.0f} s "
                         f"{'beside a writer' if writer else 'alone'} and was stopped: "
                         f"{(await errors).decode(errors='replace')[-2000:]}".rstrip(": "),
                         _started(first, started), time.time()) from None
    finally:
        done.set()
        if task is not None:
            await task
    err = (await errors).decode(errors="replace")
    if proc.returncode != 0 or not first:
        raise PassFailed(f"the compaction pass failed (exit {proc.returncode}): {err[-2000:]}",
                         _started(first, started), time.time())
    await d.drain_backfill([appends.table_id], timeout=300.0)
    return {**json.loads(first), **json.loads(rest)}


def _started(first_line: bytes, fallback: float) -> float:
    """When the pass started, from its process's first line (else ``fallback``: the process's start)."""
    try:
        return float(json.loads(first_line)["startedAt"])
    except (ValueError, KeyError, TypeError):
        return fallback


# -- the scans ------------------------------------------------------------------------------------------------


def _engine_uri(location: str) -> str:
    return location[len("file://"):] if location.startswith("file://") else location


def files_and_bytes(env: BenchEnv, location: str) -> dict[str, int]:
    """The table's latest version, its files and their bytes, as delta-rs reads its log."""
    import pyarrow as pa
    from deltalake import DeltaTable

    dt = DeltaTable(_engine_uri(location), storage_options=env.storage_options() or None)
    adds = pa.table(dt.get_add_actions())
    return {"version": dt.version(), "files": adds.num_rows, "bytes": sum(adds.column("size_bytes").to_pylist())}


def _checked(engine: str, rows: int, want: int) -> None:
    if rows != want:
        raise BenchError(f"scenario 12: a {engine} scan returned {rows} rows, {want} were committed")


def deltars_scans(env: BenchEnv, location: str, want: int) -> dict[str, Sample]:
    """delta-rs: the full scan (open + read) and the open alone, each ``SCANS`` times."""
    from deltalake import DeltaTable

    uri, opts = _engine_uri(location), env.storage_options() or None

    def scan() -> None:
        _checked("delta-rs", DeltaTable(uri, storage_options=opts).to_pyarrow_table().num_rows, want)

    return {"scan": timed(scan, SCANS), "open": timed(lambda: DeltaTable(uri, storage_options=opts), SCANS)}


def duckdb_connection() -> Any:
    """A DuckDB connection with the delta extension loaded from its wheel, DuckDB's cache of file data off (each
    scan reads its files, as delta-rs does)."""
    import duckdb

    con = duckdb.connect()
    for module, name in DUCKDB_EXTENSIONS:
        folder = Path(importlib.import_module(module).__file__ or "").parent
        con.execute(f"LOAD '{next(folder.rglob(f'{name}.duckdb_extension'))}'")
    try:
        con.execute("SET enable_external_file_cache = false")
    except duckdb.Error:  # a DuckDB without that cache
        pass
    return con


def duckdb_scans(env: BenchEnv, location: str, want: int) -> dict[str, Sample]:
    """DuckDB: ``SELECT * FROM delta_scan(path)`` to an Arrow table, ``SCANS`` times on one connection."""
    con = duckdb_connection()
    query = "SELECT * FROM delta_scan('{}')".format(_engine_uri(location).replace("'", "''"))
    try:
        def scan() -> None:
            _checked("DuckDB", con.execute(query).to_arrow_table().num_rows, want)

        return {"scan": timed(scan, SCANS)}
    finally:
        con.close()


# -- the scenario ---------------------------------------------------------------------------------------------


Row = tuple[str, str, Sample, dict[str, Any]]


def measure_table(env: BenchEnv, location: str, want: int, when: str,
                  with_duckdb: bool) -> tuple[dict[str, Any], list[Row]]:
    """Files, bytes and each engine's scans of the table as it is now (``when``: before / after)."""
    table = files_and_bytes(env, location)
    label = f"{when}, {table['files']} files"
    rows: list[Row] = []
    figures: dict[str, Any] = {**table, "rows": want}
    scans: list[tuple[str, Callable[[BenchEnv, str, int], dict[str, Sample]]]] = [("delta-rs", deltars_scans)]
    if with_duckdb:
        scans.append(("duckdb", duckdb_scans))
    for engine, run_scans in scans:
        for kind, sample in run_scans(env, location, want).items():
            what = "full scan" if kind == "scan" else "open only"
            rows.append((scenario(f"{what} {label}"), engine, sample, {"files": table["files"], "bytes": table["bytes"]}))
            figures[f"{engine} {kind} p50_ms"] = sample.summary()["p50_ms"]
    return figures, rows


async def run(env: BenchEnv, tables: tuple[str, str], locations: tuple[str, str], inserts: int,
              say: Callable[[str], None]) -> tuple[dict[str, Any], list[Row], tuple[int, int]]:
    """The whole scenario on two empty owned tables (``tables`` at ``locations``): the first scanned before and
    after the pass beside the writer, the second compacted alone. Returns the summary for the report, the rows
    (scenario, system, sample, extra) in the order measured, and each table's latest version. Raises BenchError
    when a commit, a pass or a scan went wrong."""
    table_id, location = tables[0], locations[0]
    duckdb_why = duckdb_skipped(env)
    if duckdb_why:
        say(f"  scenario 12: DuckDB's scans skipped: {duckdb_why}")
    rows: list[Row] = []
    appends = Appends(table_id, OneRowFiles(location, env.fs_options()), known=0)
    async with Driver(env.endpoint) as d:
        say(f"  scenario 12: {inserts} single-row INSERTs ...")
        built = await build(d, appends, inserts)
        rows.append((scenario(f"{inserts} single-row INSERTs"), "owner", built, {}))
        before, measured = await asyncio.to_thread(measure_table, env, location, appends.rows, "before", not duckdb_why)
        rows += measured
        say(f"  scenario 12: the compaction pass, a writer at {WRITER_RATE:g} commits/s beside it ...")
        sent = len(appends.commits)
        try:
            out = await compaction_pass(env, d, appends, location, writer=True)
        except PassFailed as e:  # reported, and the bench goes on (the table is as the writer left it, or compacted)
            say(f"  scenario 12: FAILED: {e}")
            out = {"startedAt": e.started, "endedAt": e.ended, "pass": None, "error": str(e)}
            await d.drain_backfill([table_id], timeout=300.0)
        # version 0, one per row (each INSERT and append), the compaction's one when it committed
        latest = appends.rows + 1 if out["pass"] else await d.latest(table_id)
        if latest not in (appends.rows, appends.rows + 1):
            raise BenchError(f"scenario 12: the table's latest version is {latest} after {appends.rows} rows")
        window = out["endedAt"] - out["startedAt"]
        rows.append((scenario("the pass, a writer beside it"), "owner",
                     Sample(latencies=[window] if out["pass"] else [], elapsed=window, failures=0 if out["pass"] else 1),
                     {}))
        during = appends.sample(out["startedAt"], out["endedAt"])
        if not during.count:
            say("  scenario 12: the writer sent no commit during the pass (it was shorter than one pacing interval)")
        rows.append((scenario("a writer's commits during the pass"), "owner", during,
                     {"max_ms": _max_ms(during), "rate": WRITER_RATE}))
        after, measured = await asyncio.to_thread(measure_table, env, location, appends.rows, "after", not duckdb_why)
        rows += measured
        if after["version"] != latest:
            raise BenchError(f"scenario 12: delta-rs read version {after['version']} after the pass, {latest} were "
                             "committed")
        say("  scenario 12: the same pass with no writer beside it, on a second table ...")
        alone_appends = Appends(tables[1], OneRowFiles(locations[1], env.fs_options()), known=0)
        await build(d, alone_appends, inserts)
        alone = await compaction_pass(env, d, alone_appends, locations[1], writer=False)
    _committed(alone["pass"], "alone")
    alone_window = alone["endedAt"] - alone["startedAt"]
    rows.append((scenario("the pass, no writer"), "owner", Sample(latencies=[alone_window], elapsed=alone_window), {}))
    d50, d99 = during.summary()["p50_ms"], during.summary()["p99_ms"]
    summary = {
        "inserts": inserts, "before": before, "after": after, "pass": out["pass"], "pass_error": out.get("error"),
        "pass_alone": alone["pass"],
        "writer": {"rate": WRITER_RATE, "commits": len(appends.commits) - sent, "during_pass": during.count,
                   "p50_ms": d50, "p99_ms": d99, "max_ms": _max_ms(during), "conflicts": during.conflicts,
                   "inserts_p50_ms": built.summary()["p50_ms"], "inserts_p99_ms": built.summary()["p99_ms"]},
    }
    return summary, rows, (latest, alone_appends.rows + 1)


def _committed(report: dict[str, Any], how: str) -> None:
    if report.get("version") is None:
        raise BenchError(f"scenario 12: the compaction pass {how} committed nothing: {report}")


def _max_ms(s: Sample) -> float | None:
    return round(max(s.latencies) * 1000.0, 3) if s.latencies else None


# -- the report -----------------------------------------------------------------------------------------------


def markdown_lines(c: dict[str, Any]) -> list[str]:
    """Scenario 12 for the markdown report: the table and each engine's scan before and after, the pass, the
    writer beside it."""
    p, w = c["pass"], c["writer"]
    lines = ["", f"Scenario 12, compaction of a table of {c['inserts']} single-row INSERTs (p50 of each engine's "
                 "full scans; delta-rs's open alone beside them):", "",
             "| | version | files | bytes | rows | delta-rs scan ms | delta-rs open ms | DuckDB scan ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for when in ("before", "after"):
        t = c[when]
        lines.append(f"| {when} | {t['version']} | {t['files']} | {t['bytes']} | {t['rows']} | "
                     f"{_ms(t.get('delta-rs scan p50_ms'))} | {_ms(t.get('delta-rs open p50_ms'))} | "
                     f"{_ms(t.get('duckdb scan p50_ms'))} |")
    if p is None:
        head = f"The pass beside the writer FAILED ({c.get('pass_error')})."
    else:
        head = (f"The pass: {p['filesRemoved']} files ({p['bytesRemoved']} bytes) rewritten into {p['filesAdded']} "
                f"({p['bytesAdded']} bytes) in {p['seconds']:.2f} s, read version {p['readVersion']}, committed as "
                f"version {p['version']} after {p['rebases']} lost race(s), published through {p['publishedVersion']}.")
    lines += ["", f"{head} A writer at {w['rate']:g} commits/s beside it: {w['during_pass']} commits sent during the "
                  f"pass, p50 {_ms(w['p50_ms'])} ms, p99 {_ms(w['p99_ms'])} ms, max {_ms(w['max_ms'])} ms, "
                  f"{w['conflicts']} conflict(s) (the INSERTs before it, one writer alone: p50 "
                  f"{_ms(w['inserts_p50_ms'])} ms, p99 {_ms(w['inserts_p99_ms'])} ms)."]
    a = c.get("pass_alone")
    if a:
        lines += ["", f"The same pass with no writer beside it, on a second table of the same INSERTs: {a['filesRemoved']} "
                      f"files into {a['filesAdded']} in {a['seconds']:.2f} s, read version {a['readVersion']}, "
                      f"committed as version {a['version']} after {a['rebases']} lost race(s)."]
    return lines


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


# -- the pass's own process -----------------------------------------------------------------------------------


def main(argv: list[str]) -> None:
    """``compact`` on the table ``argv[0]`` with the settings of the environment (the bench's database and
    storage); prints its report and when it started and ended (epoch seconds) as one JSON object."""
    from coordinator.ops.optimize import compact
    from coordinator.runtime.settings import Settings

    settings = Settings.load()

    async def once() -> dict[str, Any]:
        print(json.dumps({"startedAt": time.time()}), flush=True)  # the bench's writer starts on this line
        out = await compact(settings, argv[0])
        return {"endedAt": time.time(), "pass": out}

    print(json.dumps(asyncio.run(once())))


if __name__ == "__main__":
    main(sys.argv[1:])
