"""Log cleanup (`commit-owner maintain`, delta.logRetentionDuration) on real owned tables: SQLite + local disk
(file ages set with os.utime) and PostgreSQL + S3 on the moto server (a retention of seconds, as S3 keeps
its own LastModified); delta-rs and the project's snapshot reader judge what stays readable."""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import pytest
from deltalake import DeltaTable

from client.contract.layout import (
    COMMIT_DIRS,
    LAST_CHECKPOINT,
    LOG_DIR,
    checkpoint_file_names,
    delta_file_name,
    parse_staged_file,
)
from client.lifecycle import create_table
from client.snapshot import load_snapshot
from harness.storage_faults import STORAGE_FAULTS
from tests.lifecycle.helpers import SCHEMA, append_through_owner, tree
from tests.ops.test_maintenance import _cli, _expected_ids, _overwrite, _prom

DAY = 86400.0


def _log(path: str) -> str:
    return os.path.join(path, LOG_DIR)


def _log_files(path: str) -> set[str]:
    """Every file below ``_delta_log`` relative to it (``_commits/<v>.<uuid>.json`` for staged ones)."""
    root = _log(path)
    return {os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files}


def _of_versions(names: set[str], versions: range) -> set[str]:
    """The commit, checkpoint and staged files among ``names`` whose version lies in ``versions``."""
    out = set()
    for n in names:
        folder, _, base = n.rpartition("/")
        if folder in COMMIT_DIRS:
            s = parse_staged_file(base)
            if s is not None and s.version in versions:
                out.add(n)
        elif not folder and any(base in (delta_file_name(v), *checkpoint_file_names(v)) for v in versions):
            out.add(n)
    return out


def _age(path: str, names: set[str], seconds: float) -> None:
    t = time.time() - seconds
    for n in names:
        os.utime(os.path.join(_log(path), n), (t, t))


def _ids(dt: DeltaTable) -> list[int]:
    return sorted(dt.to_pyarrow_table().column("id").to_pylist())


@pytest.fixture
def table25(owner_service: Any) -> tuple[str, str, Any]:
    """An owned table with versions 0..25 (an overwrite at 12), published, checkpoints at 10 and 20."""
    b = owner_service.backend
    path = str(b.tmp / f"lc-{uuid.uuid4().hex[:10]}")
    client = owner_service.client()
    t = create_table(path, SCHEMA, client=client)
    for i in range(1, 26):
        if i == 12:
            assert _overwrite(client, path, [1200]) == 12
        else:
            assert append_through_owner(client, path, [i]) == i
    assert client.backfill_to_version(t.table_id, 25).latest_backfilled_version == 25
    r = _cli(b, "maintain", path, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (rep,) = out["tables"]
    assert rep["written"] == [10, 20]
    # Nothing is 30 days old yet: the cleanup ran and removed nothing.
    assert rep["logCleanup"]["fileCount"] == 0 and rep["logCleanup"]["keptFrom"] is None
    return path, t.table_id, client


def test_cleanup_removes_expired_files_below_the_checkpoint_and_keeps_the_rest(owner_service: Any, table25,
                                                                              tmp_path) -> None:
    path, table_id, client = table25
    b = owner_service.backend
    names = _log_files(path)
    assert _of_versions(names, range(1, 10)) & {n for n in names if "/" in n}, "staged commits were expected"
    # Versions 0..14 (their commits, staged files and checkpoint 10) are 40 days old; 15..25 are young.
    _age(path, _of_versions(names, range(0, 15)), 40 * DAY)
    expect = _of_versions(names, range(0, 10))  # below checkpoint 10: version 14 (in the window) needs 10..14

    dry = _cli(b, "maintain", path, "--log-cleanup-dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "log cleanup: would delete" in dry.stdout and "versions from 10 stay readable" in dry.stdout
    assert _log_files(path) == names
    dry_json = json.loads(_cli(b, "maintain", path, "--log-cleanup-dry-run", "--json").stdout)
    listed = dry_json["tables"][0]["logCleanup"]
    assert {f["path"][len(LOG_DIR) + 1:] for f in listed["files"]} == expect and listed["deleted"] == 0
    versions = [f["version"] for f in listed["files"]]
    assert versions == sorted(versions) and versions[0] == 0  # oldest first
    assert _log_files(path) == names

    prom = tmp_path / "maintain.prom"
    r = _cli(b, "maintain", path, "--json", "--metrics-file", str(prom))
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)["tables"][0]["logCleanup"]
    assert rep["deleted"] == len(expect) and rep["keptFrom"] == 10
    assert _prom(prom)["commit_owner_log_cleanup_deleted_files_total"] == len(expect)
    assert _log_files(path) == names - expect
    for kept in (checkpoint_file_names(10)[0], checkpoint_file_names(20)[0], LAST_CHECKPOINT, delta_file_name(10)):
        assert kept in _log_files(path)

    # Both readers open the latest version; time travel inside the window (and to the checkpoint) works.
    assert _ids(DeltaTable(path)) == _expected_ids()
    assert load_snapshot(path, ask_owner=False).version == 25
    assert _ids(DeltaTable(path, version=14)) == sorted([1200, 13, 14])
    assert _ids(DeltaTable(path, version=10)) == list(range(1, 11))
    assert len(load_snapshot(path, 14, ask_owner=False).file_paths) == 3
    assert len(load_snapshot(path, 10, ask_owner=False).file_paths) == 10
    with pytest.raises(Exception):  # noqa: B017 - delta-rs's own error type: the version is gone
        DeltaTable(path, version=5)

    # Later, everything through 22 has expired: checkpoint 20 becomes the boundary, checkpoint 10 goes.
    now_names = _log_files(path)
    _age(path, _of_versions(now_names, range(0, 23)), 40 * DAY)
    r = _cli(b, "maintain", path, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tables"][0]["logCleanup"]["keptFrom"] == 20
    left = _log_files(path)
    assert left == now_names - _of_versions(now_names, range(0, 20))
    assert checkpoint_file_names(20)[0] in left and LAST_CHECKPOINT in left
    assert {delta_file_name(v) for v in range(20, 26)} <= left
    assert _ids(DeltaTable(path)) == _expected_ids() and load_snapshot(path, ask_owner=False).version == 25
    assert _ids(DeltaTable(path, version=22)) == sorted([1200, *range(13, 23)])

    # Version 0 (the published proof of ownership) is gone: forgetting the table is still refused.
    assert delta_file_name(0) not in left
    before = tree(path)
    refused = _cli(b, "tables", "forget", path)
    assert refused.returncode != 0 and "readers use this log as owned" in refused.stderr
    assert client.get_table(table_id).latest_table_version == 25 and tree(path) == before


def test_a_bad_log_retention_is_refused_and_nothing_is_deleted(owner_service: Any) -> None:
    b = owner_service.backend
    path = str(b.tmp / f"lc-{uuid.uuid4().hex[:10]}")
    client = owner_service.client()
    t = create_table(path, SCHEMA, properties={"delta.logRetentionDuration": "a month or so"}, client=client)
    for i in range(1, 12):
        assert append_through_owner(client, path, [i]) == i
    client.backfill_to_version(t.table_id, 11)
    first = _cli(b, "maintain", path, "--json")  # the checkpoint is written; the cleanup is refused
    assert first.returncode == 1
    assert json.loads(first.stdout)["tables"][0]["written"] == [10]
    _age(path, _log_files(path), 400 * DAY)
    before = tree(path)
    r = _cli(b, "maintain", path, "--json")
    assert r.returncode == 1
    (failure,) = json.loads(r.stdout)["failures"]
    assert failure["table"] == "file://" + path
    assert ("delta.logRetentionDuration 'a month or so' is not a duration" in failure["reason"]
            and "no log file deleted" in failure["reason"])
    assert tree(path) == before
    assert DeltaTable(path).version() == 11


def test_no_cleanup_option_keeps_everything(owner_service: Any, table25) -> None:
    path, _, _ = table25
    _age(path, _log_files(path), 400 * DAY)
    before = tree(path)
    r = _cli(owner_service.backend, "maintain", path, "--no-log-cleanup", "--json")
    assert r.returncode == 0, r.stderr
    assert "logCleanup" not in json.loads(r.stdout)["tables"][0] and tree(path) == before


# -- PostgreSQL + S3 (the moto server) -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pg_s3_service(request: pytest.FixtureRequest):
    from tests.conftest import make_backend
    from tests.support import Service

    svc = Service(make_backend(request, "postgres", "s3", "logclean-s3")).start()
    yield svc
    svc.stop()


def _s3_log_files(b: Any, loc: str) -> set[str]:
    log = f"{loc}/{LOG_DIR}"
    return set(b.list(log)) | {f"{d}/{n}" for d in COMMIT_DIRS for n in b.list(f"{log}/{d}")}


def test_cleanup_on_s3(pg_s3_service: Any) -> None:
    from tests.support import S3_KEY, S3_SECRET, data_commit, delta_rs_table

    b = pg_s3_service.backend
    loc = b.new_location()
    client = pg_s3_service.client()
    options = {"key": S3_KEY, "secret": S3_SECRET, "client_kwargs": {"endpoint_url": b.s3_endpoint,
                                                                     "region_name": "us-east-1"}}
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    # S3 sets LastModified itself: a retention of seconds, and versions 0..12 written before a pause.
    t = create_table(loc, schema, properties={"delta.logRetentionDuration": "interval 2 seconds"}, client=client,
                     storage_options=options, commit_dir="_staged_commits")
    for v in range(1, 13):
        assert client.commit(t.table_id, v, data_commit(b, loc, [v])).version == v
    client.backfill_to_version(t.table_id, 12)
    r = _cli(b, "maintain", loc, "--no-log-cleanup", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tables"][0]["written"] == [10]
    time.sleep(2.5)
    for v in range(13, 16):
        assert client.commit(t.table_id, v, data_commit(b, loc, [v])).version == v
    client.backfill_to_version(t.table_id, 15)
    before = _s3_log_files(b, loc)
    staged = {n for n in before if n.startswith("_staged_commits/")}
    assert staged, "staged commits were expected"
    expect = _of_versions(before, range(0, 10))
    assert {delta_file_name(v) for v in range(10)} <= expect and expect & staged

    dry = json.loads(_cli(b, "maintain", loc, "--log-cleanup-dry-run", "--json").stdout)
    assert {f["path"][len(LOG_DIR) + 1:] for f in dry["tables"][0]["logCleanup"]["files"]} == expect
    assert _s3_log_files(b, loc) == before
    r = _cli(b, "maintain", loc, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["logFilesRemoved"] == len(expect) and out["tables"][0]["logCleanup"]["keptFrom"] == 10
    after = _s3_log_files(b, loc)
    assert after == before - expect
    assert checkpoint_file_names(10)[0] in after and LAST_CHECKPOINT in after
    assert _ids(delta_rs_table(b, loc)) == list(range(1, 16))
    assert _ids(delta_rs_table(b, loc, version=12)) == list(range(1, 13))
    assert load_snapshot(loc, ask_owner=False, storage_options=options).version == 15
    assert load_snapshot(loc, 11, ask_owner=False, storage_options=options).version == 11


def test_sigkill_mid_cleanup_leaves_the_table_readable_and_the_next_pass_finishes(owner_service: Any,
                                                                                  table25) -> None:
    import signal
    import subprocess
    import sys

    from tests.support import ROOT

    path, _, _ = table25
    b = owner_service.backend
    names = _log_files(path)
    _age(path, _of_versions(names, range(0, 15)), 40 * DAY)
    expect = _of_versions(names, range(0, 10))
    # Storage faults (harness/storage_faults.py): deleting <5>.json waits 30 s, so the process is killed in the middle of the
    # cleanup, with versions 0..4 (and the staged commit of 5) deleted.
    e = {**os.environ, **b.env(), STORAGE_FAULTS: f"latency_ms=30000;match=/{delta_file_name(5)}"}
    proc = subprocess.Popen([sys.executable, "-m", "harness.with_faults", "maintain", path], cwd=str(ROOT), env=e,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while _of_versions(_log_files(path), range(0, 6)) != {delta_file_name(5)}:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    left = _log_files(path)
    assert left == names - _of_versions(names, range(0, 5)) - (_of_versions(names, range(5, 6)) - {delta_file_name(5)})
    assert _ids(DeltaTable(path)) == _expected_ids() and load_snapshot(path, ask_owner=False).version == 25
    assert _ids(DeltaTable(path, version=14)) == sorted([1200, 13, 14])
    assert load_snapshot(path, 10, ask_owner=False).version == 10
    r = _cli(b, "maintain", path, "--json")
    assert r.returncode == 0, r.stderr
    assert _log_files(path) == names - expect
