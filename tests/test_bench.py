"""The benchmark cannot rot: its arithmetic, its refusals and a smoke run on each database."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from client.backoff import CONFLICT_BACKOFF_BASE, CONFLICT_BACKOFF_MAX, conflict_delay, full_jitter
from coordinator.bench import catalogs
from coordinator.bench.cpu import CpuWindow, tree_cpu_seconds
from coordinator.bench.load import rebased
from coordinator.bench.report import fairness_lines, markdown
from coordinator.bench.stats import Sample, fairness, parse_counters, per_commit, percentile
from coordinator.cli.main import main


def test_percentile_is_nearest_rank() -> None:
    xs = [float(i) for i in range(1, 101)]
    assert percentile(xs, 50) == 50.0
    assert percentile(xs, 99) == 99.0
    assert percentile(xs, 100) == 100.0
    assert percentile([3.0], 99) == 3.0
    assert math.isnan(percentile([], 50))


def test_per_commit_divides_the_counter_deltas_by_ratified_commits() -> None:
    before = parse_counters(
        'commit_owner_commits_total{outcome="ok"} 10\n'
        'commit_owner_storage_requests_total{operation="put_if_absent"} 20\n'
        "commit_owner_database_statements_total 30\n"
    )
    after = parse_counters(
        "# TYPE commit_owner_commits counter\n"
        'commit_owner_commits_total{outcome="ok"} 14\n'
        'commit_owner_commits_total{outcome="COMMIT_VERSION_CONFLICT"} 2\n'
        "# TYPE commit_owner_storage_requests counter\n"
        'commit_owner_storage_requests_total{operation="put_if_absent"} 28\n'
        "# TYPE commit_owner_database_statements counter\n"
        "commit_owner_database_statements_total 42\n"
    )
    w = per_commit(before, after)
    assert w["commits"] == 4
    assert w["storage_put_if_absent"] == 2.0
    assert w["db_statements"] == 3.0
    assert w["refusals_per_commit"] == 0.5
    assert w["db_round_trips"] == 3.0  # no explicit transactions counted here
    assert per_commit(after, after) == {}


def test_fairness_is_each_writers_share_and_jains_index() -> None:
    assert fairness([5, 5, 5, 5]) == {"writers": 4, "min_share": 0.25, "max_share": 0.25, "jain": 1.0}
    assert fairness([12, 0, 0, 0]) == {"writers": 4, "min_share": 0.0, "max_share": 1.0, "jain": 0.25}
    assert fairness([1, 3]) == {"writers": 2, "min_share": 0.25, "max_share": 0.75, "jain": 0.8}
    assert fairness([0, 0])["jain"] is None
    one = Sample(latencies=[0.01], per_writer=[1]).summary()
    assert "fairness" not in one  # a single writer has nobody to share with
    row = {"scenario": "2. one table, 4 writers", "system": "owner",
           **Sample(latencies=[0.002] * 4, per_writer=[1, 3, 0, 0]).summary(),
           "per_second": 10.0, "p50_ms": 2.0, "p99_ms": 9.0}
    assert fairness_lines([row])[-1] == "| 4 | 10.00 | 2.00 | 9.00 | 0.000 | 0.750 | 0.250 | 0.40 |"
    assert fairness_lines([{**row, "scenario": "3. 8 tables, 8 writers"}]) == []


def test_a_bench_writer_rebases_on_the_carried_commits_else_on_the_latest_version() -> None:
    carried = {"conflict": True, "latestTableVersion": 9, "unseenCommitsComplete": True,
               "unseenCommits": [{"version": 5}, {"version": 6}, {"version": 7}]}
    assert rebased(5, carried, 4) == 7  # the last carried commit, even if the answer's latest says more
    assert rebased(5, {**carried, "unseenCommitsComplete": False}, 4) == 9
    assert rebased(4, carried, 3) == 9  # carried commits that do not start at the version asked for
    assert rebased(5, {"conflict": True, "latestTableVersion": 8}, 4) == 8  # an owner that carries none
    assert rebased(5, {"conflict": True}, 4) == 4


def test_conflict_backoff_is_full_jitter_bounded_by_a_doubling_window() -> None:
    import random

    rng = random.Random(7)
    for losses in range(1, 12):
        bound = min(CONFLICT_BACKOFF_MAX, CONFLICT_BACKOFF_BASE * 2 ** (losses - 1))
        draws = [conflict_delay(losses, rng) for _ in range(400)]
        assert all(0.0 <= d <= bound for d in draws)
        assert max(draws) > 0.8 * bound and min(draws) < 0.2 * bound  # spread over the whole window
    assert full_jitter(10_000, 0.05, 2.0, rng) <= 2.0
def test_scenario_8_sends_what_catalog_managed_writers_send() -> None:
    """The preview and /delta/v1 bodies of a staged commit, and what a writer learns from an updateTable reply."""
    tid, loc = "6f1c1e2a-0000-4000-8000-000000000001", "file:///w/managed/t"
    p = catalogs.preview_body(tid, loc, 7, "x.json", 600, 1234, 3)
    assert p == {"table_id": tid, "table_uri": loc, "latest_backfilled_version": 3,
                 "commit_info": {"version": 7, "timestamp": 1234, "file_name": "x.json", "file_size": 600,
                                 "file_modification_timestamp": 1234}}
    assert "latest_backfilled_version" not in catalogs.preview_body(tid, loc, 7, "x.json", 600, 1234, None)
    u = catalogs.update_body(tid, 7, "x.json", 600, 1234, 3)
    assert u["requirements"] == [{"type": "assert-table-uuid", "uuid": tid}]
    assert u["updates"] == [
        {"action": "add-commit", "commit": {"version": 7, "timestamp": 1234, "file-name": "x.json", "file-size": 600,
                                            "file-modification-timestamp": 1234}},
        {"action": "set-latest-backfilled-version", "latest-published-version": 3}]
    assert catalogs.published_from_load({"commits": [{"version": 9}, {"version": 8}], "latest-table-version": 9}) == 7
    assert catalogs.published_from_load({"commits": [], "latest-table-version": 9}) == 9
    v0 = [json.loads(line) for line in catalogs.version0(tid, 1234).splitlines()]
    assert v0[1]["protocol"]["readerFeatures"] == ["catalogManaged"]
    assert v0[2]["metaData"]["configuration"]["io.unitycatalog.tableId"] == tid
    rows = [{"scenario": catalogs.scenario(api), "system": "owner", **Sample(latencies=[0.01]).summary()}
            for api in catalogs.APIS]
    report = {"options": {"database": "postgres", "storage": "local", "duration": 1.0}, "machine": {},
              "started": "-", "seconds": 1, "results": rows, "targets": [], "consistency": {"tables": 3,
              "violations": []}, "growth": {"tables_added": 0, "rows_added": 0, "seconds": 0, "tables_total": 0,
                                          "commit_rows_total": 0}}
    assert "the staged file's write (local disk: no fsync) plus the request" in markdown(report)


def test_scenario_12_counts_the_commits_sent_during_the_pass_and_reports_both_engines() -> None:
    from coordinator.bench.compaction import Appends, markdown_lines

    appends = Appends("t", files=None, known=0)  # type: ignore[arg-type]  # no file is written here
    appends.commits = [(t, Sample(latencies=[ms / 1000], conflicts=int(ms > 20))) for t, ms in
                       ((9.5, 4.0), (10.0, 6.0), (10.5, 30.0), (11.0, 8.0), (11.5, 5.0))]
    during = appends.sample(10.0, 11.0)  # the commits sent at 10.0, 10.5 and 11.0
    assert during.count == 3 and during.conflicts == 1 and during.elapsed == 1.0
    assert during.summary()["p50_ms"] == 8.0
    table = {"version": 100, "files": 100, "bytes": 50_000, "rows": 100, "delta-rs scan p50_ms": 90.0,
             "delta-rs open p50_ms": 60.0, "duckdb scan p50_ms": 120.0}
    c = {"inserts": 100, "before": table,
         "after": {**table, "version": 104, "files": 4, "bytes": 2_100, "rows": 103, "duckdb scan p50_ms": None},
         "pass": {"filesRemoved": 100, "bytesRemoved": 50_000, "filesAdded": 1, "bytesAdded": 600, "seconds": 0.5,
                  "readVersion": 100, "version": 102, "rebases": 1, "publishedVersion": 102},
         "writer": {"rate": 20.0, "during_pass": 3, "p50_ms": 8.0, "p99_ms": 30.0, "max_ms": 30.0, "conflicts": 1,
                    "inserts_p50_ms": 4.0, "inserts_p99_ms": 6.0}}
    lines = markdown_lines(c)
    assert "| before | 100 | 100 | 50000 | 100 | 90.00 | 60.00 | 120.00 |" in lines
    assert "| after | 104 | 4 | 2100 | 103 | 90.00 | 60.00 | - |" in lines  # DuckDB skipped: a dash, not a number
    assert "committed as version 102 after 1 lost race(s)" in lines[-1] and "p99 30.00 ms" in lines[-1]
    failed = markdown_lines({**c, "pass": None, "pass_error": "the compaction pass did not end within 180 s"})
    assert failed[-1].startswith("The pass beside the writer FAILED (the compaction pass did not end within 180 s). "
                                 "A writer at 20 commits/s beside it: 3 commits")
    c["pass_alone"] = {"filesRemoved": 100, "filesAdded": 1, "seconds": 0.25, "readVersion": 100, "version": 101,
                       "rebases": 0}
    assert "no writer beside it, on a second table of the same INSERTs: 100 files into 1 in 0.25 s" in \
        markdown_lines(c)[-1]


def test_the_cpu_of_a_process_tree_counts_its_children(tmp_path) -> None:
    """A child that burns CPU raises its parent's tree figure; a finished one stays counted (reaped)."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\nimport sys; sys.stdin.read()"
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys\n"
                               f"p = subprocess.Popen([sys.executable, '-c', {burn!r}], stdin=subprocess.PIPE)\n"
                               "sys.stdin.readline(); p.stdin.close(); p.wait(); sys.stdin.read()"],
                              stdin=subprocess.PIPE, text=True)
    try:
        with CpuWindow(parent.pid) as w:
            deadline = time.monotonic() + 20
            while (tree_cpu_seconds(parent.pid) or 0) - (w._service0 or 0) < 0.35 and time.monotonic() < deadline:
                time.sleep(0.05)
            alive = tree_cpu_seconds(parent.pid)
            parent.stdin.write("\n")  # the child ends and is reaped: its time moves into the parent's cutime
            parent.stdin.flush()
            time.sleep(0.5)
        assert alive is not None and alive - (w._service0 or 0) >= 0.35
        assert w.service is not None and w.service >= 0.35
        fig = w.figures(commits=100, requests=400)
        assert fig["service_cpu_ms_per_commit"] == pytest.approx(w.service / 100 * 1000, abs=0.01)
        assert fig["load_generator_cores_per_1k_rps"] == pytest.approx(w.load_generator / 400 * 1000, abs=0.01)
    finally:
        parent.stdin.close()
        parent.wait(10)
    assert tree_cpu_seconds(parent.pid) is None  # gone: no figure, not a wrong one


@pytest.mark.parametrize("args, message", [
    (["--contention", "0"], "writer counts must be >= 1"),
    (["--contention", "4,x"], "comma-separated list of integers"),
    (["--duration", "-1"], "must be positive"),
    (["--database", "mysql"], "mysql"),
    (["--workers", "-1"], "--workers"),
    (["--only", "13"], "scenario numbers are 0 to 12"),
    (["--compaction-inserts", "1"], "a compaction needs two files"),
    (["--only", "1,two"], "comma-separated list of scenario numbers"),
    (["--storage", "azure", "--only", "1,5"], "--storage azure runs scenarios 0, 1, 2, 3, 4 only, not 5"),
    (["--storage", "gcs", "--only", "8", "--no-deltars"], "--storage gcs runs scenarios 0, 1, 2, 3, 4 only, not 8"),
    (["--storage", "gcs", "--only", "1"], "delta-rs cannot write to fake-gcs-server"),
])
def test_bad_options_are_refused_before_anything_starts(args: list[str], message: str, tmp_path) -> None:
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["bench", "--smoke", "--json", str(out), *args])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert not out.exists()


def _run(tmp_path, *args: str) -> dict:
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "coordinator", "bench", "--smoke", "--json", str(out), *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["consistency"]["violations"] == []
    assert report["consistency"]["tables"] >= 5
    return report


def _assert_scenario_8(report: dict) -> None:
    """One writer on one table per API, each measured, and its tables in the consistency check."""
    for api in catalogs.APIS:
        row = _row(report, catalogs.scenario(api))
        assert row["api"] == api and row["ops"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0, row
        assert row["conflicts"] == row["failures"] == 0, row
        assert row["latency_covers"] == ("request" if api == "api/v1" else "stage + request")
        # Writer-staged: the owner writes only the publication; it reads the staged file instead.
        # /api/v1: the staged file and the publication, and now and then a third: with two workers, a backfill
        # run that meets the other worker's commit while its file is being written writes it from the row
        # (decision 43); one of the two finds it there.
        # Writer-staged: now and then a publication is tried twice across a lease handover between the two
        # workers and finds its file there (the same bytes).
        assert row["work"]["storage_put_if_absent"] <= (2.5 if api == "api/v1" else 1.1), row["work"]


def _assert_scenario_11(report: dict) -> None:
    """A user's sequential write_table appends through the service's workers, each published before it returned,
    measured end to end against the target of issue 39."""
    row = _row(report, "11. write_table")
    assert row["ops"] >= 20 and row["failures"] == 0 and row["p99_ms"] >= row["p50_ms"] > 0, row
    assert row["workers"] == report["service_workers"] and row["work"]["commits"] >= row["ops"], row
    target = next(t for t in report["targets"] if t["target"] == "write_table p99 (ms)")
    assert target["measured"] == row["p99_ms"] and target["rule"] == "< 50"


def _assert_scenario_12(report: dict) -> None:
    """A table of 100 single-row INSERTs (the smoke's) scanned by delta-rs and DuckDB before and after one compaction
    pass that committed beside a writer, every row read back each time."""
    c = report["compaction"]
    assert c["inserts"] == 100 and c["before"]["files"] == 100 and c["before"]["rows"] == 100, c
    p = c["pass"]
    assert p["version"] is not None and p["filesAdded"] == 1 and p["filesRemoved"] == p["filesBefore"] >= 100, p
    assert p["publishedVersion"] >= p["version"] > p["readVersion"] >= 100, p
    w = c["writer"]
    after = c["after"]
    # one new file for the rewritten ones, one per append that came after the pass read the table
    assert after["rows"] == 100 + w["commits"] and after["files"] == 1 + after["rows"] - p["filesRemoved"], (c, after)
    assert after["version"] == after["rows"] + 1, after
    for engine in ("delta-rs", "duckdb"):
        for when, files in (("before", 100), ("after", after["files"])):
            row = _row(report, f"12. compaction: full scan {when}, {files} files", engine)
            assert row["ops"] == 5 and row["p50_ms"] > 0 and row["files"] == files, row
            assert c[when][f"{engine} scan p50_ms"] == row["p50_ms"]
    assert _row(report, "12. compaction: open only before", "delta-rs")["ops"] == 5
    assert _row(report, "12. compaction: 100 single-row INSERTs")["ops"] == 100
    assert _row(report, "12. compaction: the pass, a writer beside it")["ops"] == 1
    alone = c["pass_alone"]  # the same pass on a second table of 100 INSERTs, nobody else committing
    assert alone["filesRemoved"] == 100 and alone["version"] == 101 and alone["rebases"] == 0, alone
    assert _row(report, "12. compaction: the pass, no writer")["p50_ms"] > 0
    during = _row(report, "12. compaction: a writer's commits during the pass")
    assert during["ops"] == w["during_pass"] <= w["commits"] and during["failures"] == 0, during
    if during["ops"]:
        assert during["max_ms"] >= during["p99_ms"] >= during["p50_ms"] > 0, during
    assert "Scenario 12, compaction of a table of 100 single-row INSERTs" in markdown(report)


def _row(report: dict, prefix: str, system: str = "owner") -> dict:
    return next(r for r in report["results"] if r["scenario"].startswith(prefix) and r["system"] == system)


@pytest.mark.slow
def test_smoke_on_sqlite_with_delta_rs_and_chart(tmp_path) -> None:
    png = tmp_path / "bench.png"
    report = _run(tmp_path, "--database", "sqlite", "--png", str(png), "--workers", "2")
    assert report["service_workers"] == 2 and report["options"]["workers"] == 2
    for prefix in ("0. physical floor", "0. card floor", "1. one table, 1 writer", "2. one table, 16 writers", "3. 8 tables",
                   "4. getCommits during 3", "5. paced", "6. growth probe, after growth"):
        row = _row(report, prefix, "floor" if prefix.startswith("0.") else "owner")
        assert row["ops"] > 0 and row["p50_ms"] > 0, row
    assert _row(report, "3. 8 tables", "delta-rs")["ops"] > 0
    for reader in ("delta-rs", "snapshot"):  # scenario 7: the smoke's table has 30 versions
        for prefix in ("7. open at v10, no checkpoints", "7. open at v30, no checkpoints",
                       "7. open at v10, checkpoints", "7. open at v30, checkpoints"):
            assert _row(report, prefix, reader)["ops"] == 3
        assert report["openRatios"][reader]["checkpoints"] > 0
    assert any(t["target"] == "delta-rs open v30 / v10, checkpoints" for t in report["targets"])
    assert _row(report, "0b. parallel floor, 8 tables", "floor")["ops"] > 0
    assert _row(report, "0b. parallel card floor, 8 tables", "floor")["ops"] > 0
    assert _row(report, "2n. one table, 16 writers without tickets")["ops"] > 0
    assert len(report["targets"]) == 18 + 2 + 1 and all(isinstance(t["met"], bool) for t in report["targets"])
    ui_pages = [r for r in report["results"] if r["scenario"].startswith("9. UI ")]  # scenario 9, at the grown size
    assert len(ui_pages) == 7 and all(r["ops"] == 3 and r["p50_ms"] > 0 for r in ui_pages), ui_pages
    assert any(t["target"] == "UI page p95 after growth (ms)" and t["measured"] > 0 for t in report["targets"])
    share = next(t for t in report["targets"] if t["target"] == "8 tables rate / parallel card floor rate")
    assert share["measured"] == pytest.approx(_row(report, "3. 8 tables")["per_second"]
                                              / _row(report, "0b. parallel card floor", "floor")["per_second"], abs=0.01)
    # Service CPU per ratified commit, tuned and with the settings a user gets by default.
    for prefix, settings in (("3. 8 tables, 8 writers", "tuned"), ("3. 8 tables, 8 writers, default settings", "default")):
        row = next(r for r in report["results"] if r["scenario"] == prefix and r["system"] == "owner")
        assert row["settings"] == settings
        cpu = row["cpu"]
        assert cpu["service_cpu_ms_per_commit"] > 0 and cpu["load_generator_cores_per_1k_rps"] > 0, cpu
        assert cpu["service_cpu_ms_per_commit"] == pytest.approx(cpu["service_cpu_s"] / row["ops"] * 1000, rel=0.01)
    assert report["growth"]["commit_rows_total"] >= 200 * 20
    _assert_scenario_8(report)
    _assert_scenario_11(report)
    _assert_scenario_12(report)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.postgres
def test_smoke_on_postgres_counts_the_work_per_commit(tmp_path, pg_admin_url: str | None) -> None:
    if pg_admin_url is None:
        pytest.skip("PostgreSQL not reachable (set COMMIT_OWNER_TEST_DATABASE_URL)")
    report = _run(tmp_path, "--database", "postgres", "--pg-url", pg_admin_url, "--no-deltars")
    work = _row(report, "1. one table, 1 writer")["work"]
    # One staged commit file per commit, plus at most one backfill publication (and the odd third of a race
    # between the two workers, decision 43: see scenario 8).
    assert 1.0 <= work["storage_put_if_absent"] <= 2.5, work
    # Ratification is one statement; the backfill adds a read and one bookkeeping statement per run.
    assert 1.0 <= work["db_statements"] <= 4.0, work
    assert work["db_round_trips"] == pytest.approx(work["db_statements"] + 2 * work["db_transactions"], abs=0.01)
    assert report["growth"]["tables_total"] >= 200
    _assert_scenario_8(report)
    _assert_scenario_11(report)
    _assert_scenario_12(report)


def test_only_runs_the_scenarios_asked_for_and_their_targets(tmp_path) -> None:
    """Scenario 2 measured alone beside scenario 1 (what its targets divide by): the racing writers' rate
    ratio, fairness and p99, and nothing else."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "coordinator", "bench", "--smoke", "--database", "sqlite", "--only",
                           "1,2", "--no-deltars", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    assert {r["scenario"] for r in report["results"]} == {"1. one table, 1 writer", "2. one table, 4 writers",
                                                          "2. one table, 16 writers",
                                                          "2n. one table, 16 writers without tickets"}
    assert report["growth"] is None and report["consistency"]["violations"] == []
    assert [t["target"] for t in report["targets"]] == [
        "16 writers rate / 1 writer rate", "16 writers Jain's fairness index", "16 writers p99 (ms)",
        "16 writers without tickets rate / 1 writer rate", "16 writers without tickets: smallest share / fair share"]
    sixteen = _row(report, "2. one table, 16 writers")
    assert sixteen["fairness"]["writers"] == 16 and sixteen["ops"] > 0


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("storage", ["azure", "gcs"])
def test_smoke_on_an_emulator_measures_the_floor_and_one_writer(storage: str, tmp_path,
                                                                pg_admin_url: str | None) -> None:
    """The bench on azurite / fake-gcs-server (issue 41): the floors are put-if-absent writes on the emulator, the
    owner's commits land there, the acknowledged versions check out, and the report says whose figures they are."""
    from harness.emulators import missing

    if pg_admin_url is None:
        pytest.skip("PostgreSQL not reachable (set COMMIT_OWNER_TEST_DATABASE_URL)")
    if (why := missing(storage)) is not None:
        pytest.skip(why)
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "coordinator", "bench", "--smoke", "--storage", storage, "--pg-url",
                           pg_admin_url, "--only", "0,1", "--no-deltars", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["options"]["storage"] == storage and report["consistency"]["violations"] == []
    one = _row(report, "1. one table, 1 writer")
    assert one["ops"] > 0 and one["failures"] == 0 and one["work"]["storage_put_if_absent"] >= 1.0, one
    for prefix in ("0. physical floor", "0. card floor", "0b. parallel floor"):
        assert _row(report, prefix, "floor")["ops"] > 0
    assert "(emulator)" in proc.stdout.splitlines()[0], proc.stdout[:300]
