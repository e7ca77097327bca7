"""The benchmark cannot rot: its arithmetic, its refusals and a smoke run on each database."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from click.testing import CliRunner

from coordinator.bench.stats import parse_counters, per_commit, percentile
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


@pytest.mark.parametrize("args, message", [
    (["--contention", "0"], "writer counts must be >= 1"),
    (["--contention", "4,x"], "comma-separated list of integers"),
    (["--duration", "-1"], "must be positive"),
    (["--database", "mysql"], "mysql"),
    (["--workers", "-1"], "--workers"),
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


def _row(report: dict, prefix: str, system: str = "owner") -> dict:
    return next(r for r in report["results"] if r["scenario"].startswith(prefix) and r["system"] == system)


@pytest.mark.slow
def test_smoke_on_sqlite_with_delta_rs_and_chart(tmp_path) -> None:
    png = tmp_path / "bench.png"
    report = _run(tmp_path, "--database", "sqlite", "--png", str(png), "--workers", "2")
    assert report["service_workers"] == 2 and report["options"]["workers"] == 2
    for prefix in ("0. physical floor", "1. one table, 1 writer", "2. one table, 16 writers", "3. 8 tables",
                   "4. getCommits during 3", "5. paced", "6. growth probe, after growth"):
        row = _row(report, prefix, "floor" if prefix.startswith("0.") else "owner")
        assert row["ops"] > 0 and row["p50_ms"] > 0, row
    assert _row(report, "3. 8 tables", "delta-rs")["ops"] > 0
    assert len(report["targets"]) == 7 and all(isinstance(t["met"], bool) for t in report["targets"])
    assert report["growth"]["commit_rows_total"] >= 200 * 20
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.postgres
def test_smoke_on_postgres_counts_the_work_per_commit(tmp_path, pg_admin_url: str | None) -> None:
    if pg_admin_url is None:
        pytest.skip("PostgreSQL not reachable (set COMMIT_OWNER_TEST_DATABASE_URL)")
    report = _run(tmp_path, "--database", "postgres", "--pg-url", pg_admin_url, "--no-deltars")
    work = _row(report, "1. one table, 1 writer")["work"]
    # One staged commit file per commit, plus at most one backfill publication.
    assert 1.0 <= work["storage_put_if_absent"] <= 2.0, work
    # Ratification is one statement; the backfill adds a read and one bookkeeping statement per run.
    assert 1.0 <= work["db_statements"] <= 4.0, work
    assert work["db_round_trips"] == pytest.approx(work["db_statements"] + 2 * work["db_transactions"], abs=0.01)
    assert report["growth"]["tables_total"] >= 200
