"""The orphan janitor: removes staged files that will never be ratified, and nothing else.

An orphan is what a process leaves when it dies while writing ``_commits/<v>.<uuid>.json`` during its
ratification transaction; the tests leave such files the same way (a staged file under a fresh key).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from harness.checker import db_rows
from tests.conftest import make_backend
from tests.support import ROOT, Backend, Service, actions, create_owned_table, ndjson, wait_until


def _leave_orphan(backend: Backend, location: str, version: int) -> str:
    """What a crashed commit leaves behind: a complete staged file no row names."""
    name = f"{version:020d}.{uuid.uuid4()}.json"
    backend.write(f"{location}/_delta_log/_commits/{name}", ndjson(actions(tag="orphan-")))
    return name


def _age(backend: Backend, location: str, name: str, seconds: float) -> None:
    path = backend._p(f"{location}/_delta_log/_commits/{name}")
    t = time.time() - seconds
    os.utime(path, (t, t))


def _janitor(backend: Backend, *, dry_run: bool = False) -> dict:
    """One janitor pass in this process (the same code the CLI runs)."""
    import asyncio

    from coordinator.ops.commands import run_janitor
    from coordinator.runtime.settings import Settings

    settings = Settings.load({"database_url": backend.database_url, "request_timeout_seconds": 2.0,
                              "janitor_min_age_seconds": 60.0}, environ={})
    return asyncio.run(run_janitor(settings, dry_run=dry_run))


def _janitor_cli(backend: Backend, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "coordinator", "janitor", "--json", "--database-url", backend.database_url,
         "--request-timeout-seconds", "2", "--janitor-min-age-seconds", "60", *args],
        cwd=str(ROOT), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_janitor_removes_only_old_orphans_of_decided_versions_on_local_disk(request: pytest.FixtureRequest) -> None:
    backend = make_backend(request, "sqlite", "local", "rel-janitor-local")
    svc = Service(backend, extra_env={"COMMIT_OWNER_JANITOR_INTERVAL_SECONDS": "0"}).start()
    try:
        table_id, loc = create_owned_table(svc)
        c = svc.client()
        old_decided = _leave_orphan(backend, loc, 1)    # the crash happened, then v1 went to another commit
        young_decided = _leave_orphan(backend, loc, 2)  # same, but too recent to touch
        for v in (1, 2, 3):
            c.commit(table_id, v, actions())
        undecided = _leave_orphan(backend, loc, 4)      # above latest: its attempt may still be in flight
        for name in (old_decided, undecided):
            _age(backend, loc, name, 3600)
        ratified = set(db_rows(backend.database_url, table_id)[1][i]["file_name"] for i in range(3))
        for name in ratified:
            _age(backend, loc, name, 3600)  # old ratified files: never candidates
        staged_dir = f"{loc}/_delta_log/_commits"
        before = set(backend.list(staged_dir))

        dry = _janitor_cli(backend, "--dry-run")
        assert dry["orphans"] == 3 and dry["removed"] == 1 and dry["keptTooYoung"] == 1 and dry["keptUndecided"] == 1
        assert [f.rsplit("/", 1)[1] for f in dry["removedFiles"]] == [old_decided]
        assert set(backend.list(staged_dir)) == before  # a dry run removes nothing

        rep = _janitor(backend)
        assert rep["removed"] == 1
        after = set(backend.list(staged_dir))
        assert after == before - {old_decided}
        assert ratified <= after and young_decided in after and undecided in after

        # The resend of the attempt that wrote the undecided file writes a file of its own (names are fresh for
        # every attempt, decision 43): version 4 is then decided, and the old undecided file an orphan like any.
        key = undecided.split(".")[1]
        data = backend.read(f"{staged_dir}/{undecided}")
        got = c.commit(table_id, 4, data, idempotency_key=key)
        assert got.version == 4 and got.file_name != undecided
        _age(backend, loc, undecided, 3600)
        _age(backend, loc, young_decided, 3600)
        rep = _janitor(backend)
        assert sorted(f.rsplit("/", 1)[1] for f in rep["removedFiles"]) == sorted([young_decided, undecided])
        staged = set(backend.list(staged_dir))
        # its file: the staged one, named by the answer (decision 67)
        assert got.file_name in staged and got.path == f"{staged_dir}/{got.file_name}"
        c.backfill_to_version(table_id, 4)
        for row in db_rows(backend.database_url, table_id)[1]:
            assert row["file_name"] in staged
            assert backend.read(f"{loc}/_delta_log/{row['version']:020d}.json") == \
                backend.read(f"{staged_dir}/{row['file_name']}")
    finally:
        svc.stop()


@pytest.mark.slow
def test_service_janitor_removes_orphans_on_s3_after_the_safe_age(request: pytest.FixtureRequest) -> None:
    backend = make_backend(request, "sqlite", "s3", "rel-janitor-s3")
    # request timeout 1 s: the janitor never touches a file younger than 3 x 1 + 5 = 8 s (janitor_min_age 0).
    svc = Service(backend, extra_env={"COMMIT_OWNER_JANITOR_INTERVAL_SECONDS": "1",
                                      "COMMIT_OWNER_JANITOR_MIN_AGE_SECONDS": "0",
                                      "COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS": "1",
                                      "COMMIT_OWNER_LOG_LEVEL": "INFO"}).start()
    try:
        table_id, loc = create_owned_table(svc)
        c = svc.client()
        orphan = _leave_orphan(backend, loc, 1)
        written = time.time()
        c.commit(table_id, 1, actions())
        c.commit(table_id, 2, actions())
        undecided = _leave_orphan(backend, loc, 3)
        staged_dir = f"{loc}/_delta_log/_commits"
        ratified = {r["file_name"] for r in db_rows(backend.database_url, table_id)[1]}
        wait_until(lambda: orphan not in backend.list(staged_dir), timeout=30, what="the janitor to remove the orphan")
        assert time.time() - written >= 8.0  # not before the safe age
        assert "janitor: removed orphan" in svc.log_text()
        from tests.ops.helpers import sample, scrape

        assert sample(scrape(svc), "commit_owner_janitor_removed_orphans_total") == 1.0
        time.sleep(1.5)  # another round: still nothing else removed
        left = set(backend.list(staged_dir))
        assert ratified <= left and undecided in left and orphan not in left
    finally:
        svc.stop()


async def test_a_service_round_lists_the_active_tables_and_a_slice_of_the_rest(request: pytest.FixtureRequest) -> None:
    """A round of the service's janitor costs what changed plus a fixed slice, not a LIST per table; every table
    is still looked at within janitor_full_round_seconds, so an orphan in a quiet table goes too."""
    import sqlite3

    from coordinator.ops.context import opened
    from coordinator.ops.janitor import Janitor
    from coordinator.runtime.settings import Settings

    backend = make_backend(request, "sqlite", "local", "rel-janitor-rounds")
    svc = Service(backend, extra_env={"COMMIT_OWNER_JANITOR_INTERVAL_SECONDS": "0"}).start()
    try:
        tables = [create_owned_table(svc) for _ in range(10)]
        c = svc.client()
        orphans = {}
        for table_id, loc in tables:
            orphans[table_id] = _leave_orphan(backend, loc, 1)  # then version 1 went to another commit
            c.commit(table_id, 1, actions())
            _age(backend, loc, orphans[table_id], 3600)
    finally:
        svc.stop()
    active = tables[0][0]
    db = sqlite3.connect(backend.database_url.split("///", 1)[1])
    with db:  # nine tables quiet for two hours (their last commit and their row), one active now
        db.execute("UPDATE owned_tables SET last_commit_at = ?, updated_at = ?",
                   (int(time.time() * 1000) - 7_200_000, int(time.time() * 1000) - 7_200_000))
        db.execute("UPDATE owned_tables SET updated_at = ? WHERE table_id = ?", (int(time.time() * 1000), active))
    db.close()
    # A round every 60 s, every table within 300 s: 5 rounds, a slice of ceil(10 / 5) = 2 quiet tables each.
    settings = Settings.load({"database_url": backend.database_url, "request_timeout_seconds": 2.0,
                              "janitor_min_age_seconds": 60.0, "janitor_interval_seconds": 60.0,
                              "janitor_full_round_seconds": 300.0}, environ={})
    async with opened(settings) as (store, storage):
        janitor = Janitor(store, storage, settings)
        looked: list[int] = []
        for n in range(5):
            rep = await janitor.run_once(every_table=False)
            looked.append(rep.tables)
            assert rep.errors == 0
            if n == 0:  # the active table is looked at in the first round
                assert orphans[active] not in backend.list(f"{tables[0][1]}/_delta_log/_commits")
        full = await janitor.run_once(dry_run=True)  # what `commit-owner janitor` does: every table
    assert all(n <= 3 for n in looked), looked  # the active table and a slice of two
    assert sum(looked) >= 10, looked
    assert full.tables == 10 and full.orphans == 0
    for table_id, loc in tables:
        assert orphans[table_id] not in backend.list(f"{loc}/_delta_log/_commits"), table_id


def test_the_janitors_removals_are_counted_by_any_worker_that_answers_the_scrape(request: pytest.FixtureRequest) -> None:
    """With `serve --workers 2` a removal is counted when it happens, in the workers' shared counters: every
    scrape reads the workers' total, whichever worker answers (not only a scrape of the worker that removed)."""
    from tests.ops.helpers import sample, scrape

    backend = make_backend(request, "postgres", "local", "rel-janitor-workers")
    svc = Service(backend, workers=2, extra_env={"COMMIT_OWNER_JANITOR_INTERVAL_SECONDS": "1",
                                                 "COMMIT_OWNER_JANITOR_MIN_AGE_SECONDS": "0",
                                                 "COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS": "1",
                                                 "COMMIT_OWNER_LOG_LEVEL": "INFO"}).start()
    try:
        table_id, loc = create_owned_table(svc)
        orphan = _leave_orphan(backend, loc, 1)
        _age(backend, loc, orphan, 60)
        svc.client().commit(table_id, 1, actions())  # version 1 decided: the orphan may go
        wait_until(lambda: orphan not in backend.list(f"{loc}/_delta_log/_commits"), timeout=30,
                   what="a worker's janitor to remove the orphan")
        time.sleep(1.5)  # another round of each worker: nothing more to remove
        # Both workers' rounds may have found it in the same second and both removed it: each counts its own.
        removals = [json.loads(line)["pid"] for line in svc.log_text().splitlines()
                    if line.startswith("{") and "janitor: removed orphan" in line]
        assert 1 <= len(removals) <= 2
        seen = [sample(scrape(svc), "commit_owner_janitor_removed_orphans_total") for _ in range(8)]
        assert seen == [float(len(removals))] * 8, (seen, removals)
    finally:
        svc.stop()
