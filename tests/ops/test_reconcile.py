"""A store restored from an older backup (issue 43, item 4): the owner refuses to ratify a version already published,
`commit-owner store check` reports the store behind the log, `commit-owner tables reconcile` adopts the published
versions, and the table serves again.

Real SQLite (backed up with sqlite3's online backup API) and real PostgreSQL (pg_dump, then pg_restore into a new
database), local disk and S3 (moto); the service and the commands run as subprocesses. Refusals change neither the
database rows nor the table's files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_backend
from tests.ops.helpers import call, post_commit
from tests.ops.test_cli import cli
from tests.ops.test_table_repair import db_state
from tests.support import Backend, Service, actions, create_owned_table, data_commit, delta_file, delta_rs_table, ndjson

BEFORE, AFTER = 5, 50  # versions committed before the backup, and after it


def env_of(b: Backend) -> dict[str, str]:
    return b.env()


def back_up(b: Backend, folder: Path) -> str:
    """A copy of the store as it is now (the service running): SQLite's online backup, or pg_dump."""
    if b.database_url.startswith("sqlite"):
        target = folder / "backup.db"
        src = sqlite3.connect(b.database_url.split("///", 1)[1])
        dst = sqlite3.connect(target)
        with dst:
            src.backup(dst)
        src.close()
        dst.close()
        return str(target)
    from sqlalchemy.engine import make_url

    u = make_url(b.database_url)
    target = folder / "backup.dump"
    subprocess.run(["pg_dump", "-Fc", "-h", u.host or "127.0.0.1", "-p", str(u.port or 5432), "-U",
                    u.username or "postgres", "-f", str(target), u.database or ""], check=True, timeout=60)
    return str(target)


def restore(b: Backend, backup: str, request: pytest.FixtureRequest) -> Backend:
    """The backend with its store as the backup holds it (the service stopped): the SQLite file copied back with the
    backup API, or a new PostgreSQL database restored from the dump."""
    if b.database_url.startswith("sqlite"):
        src = sqlite3.connect(backup)
        dst = sqlite3.connect(b.database_url.split("///", 1)[1])
        with dst:
            src.backup(dst)
        src.close()
        dst.close()
        return b
    from sqlalchemy.engine import make_url

    url = request.getfixturevalue("pg_database_factory")()
    u = make_url(url)
    subprocess.run(["pg_restore", "--no-owner", "-h", u.host or "127.0.0.1", "-p", str(u.port or 5432), "-U",
                    u.username or "postgres", "-d", u.database or "", backup], check=True, timeout=60)
    return dataclasses.replace(b, database_url=url)


def files_of(b: Backend, location: str) -> dict[str, str]:
    """Every file of the table and its SHA-256."""
    return {k: hashlib.sha256(v).hexdigest() for k, v in b.snapshot(location).items()}


def ids_of(b: Backend, location: str) -> list[int]:
    return sorted(delta_rs_table(b, location).to_pyarrow_table().column("id").to_pylist())


@pytest.fixture(params=["sqlite-local", "postgres-local", "sqlite-s3"])
def restored_world(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param.startswith("postgres") and not shutil.which("pg_dump"):
        pytest.skip("pg_dump not installed")
    db, storage = request.param.split("-")
    b = make_backend(request, db, storage, f"restore-{request.param}-{uuid.uuid4().hex[:6]}")
    return b, tmp_path


def test_a_store_restored_from_an_older_backup_refuses_is_reported_and_reconciled_then_serves(
        restored_world: Any, request: pytest.FixtureRequest) -> None:
    b, tmp = restored_world
    svc = Service(b).start()
    services = [svc]
    try:
        table_id, loc = create_owned_table(svc)
        client = svc.client()
        ids: list[int] = []
        for v in range(1, BEFORE + 1):
            client.commit(table_id, v, data_commit(b, loc, [v]))
            ids.append(v)
        client.backfill_to_version(table_id, BEFORE)
        backup = back_up(b, tmp)
        for v in range(BEFORE + 1, BEFORE + AFTER + 1):
            client.commit(table_id, v, data_commit(b, loc, [v]))
            ids.append(v)
        top = BEFORE + AFTER
        client.backfill_to_version(table_id, top)
        assert ids_of(b, loc) == ids
        svc.stop()

        b = restore(b, backup, request)
        svc = Service(b).start()
        services.append(svc)
        row, rows = db_state(b.database_url, table_id)
        assert row is not None and row["latest_version"] == BEFORE and len(rows) == BEFORE
        files = files_of(b, loc)

        # the owner refuses to ratify version BEFORE + 1, already published: retry later, naming the command
        status, _, body = post_commit(svc, table_id, BEFORE + 1, actions())
        assert status == 503, body
        err = body["error"]
        assert (err["code"], err["retryable"], err["conflict"]) == ("LOG_AHEAD_OF_STORE", True, False)
        assert f"commit-owner tables reconcile {table_id}" in err["message"]
        assert err["latestTableVersion"] == BEFORE
        # ... and the version a writer reading the log proposes, and a multi-table transaction: one core
        assert post_commit(svc, table_id, top + 1, actions())[0] == 503
        tx = {"commits": [{"tableId": table_id, "version": top + 1, "actions": actions()}]}
        status, _, body = call(svc, "POST", "/api/v1/transactions", json.dumps(tx).encode(),
                               {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())})
        assert status == 503 and body["error"]["code"] == "LOG_AHEAD_OF_STORE", body
        assert db_state(b.database_url, table_id) == (row, rows)

        # store check reports the store behind the log, changes nothing, exits 1
        res = cli("store", "check", "--json", env=env_of(b))
        assert res.returncode == 1, res.stderr
        report = json.loads(res.stdout)
        [t] = [t for t in report["tables"] if t["tableId"] == table_id]
        assert not report["ok"] and not t["ok"] and t["aheadVersions"] == [BEFORE + 1, top]
        assert [p["kind"] for p in t["problems"]] == ["log-ahead"]
        assert f"commit-owner tables reconcile {table_id}" in t["problems"][0]["message"]
        assert db_state(b.database_url, table_id) == (row, rows) and files_of(b, loc) == files

        # reconcile adopts the 50 published versions, in one transaction
        res = cli("tables", "reconcile", table_id, "--json", env=env_of(b))
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert (out["adoptedFrom"], out["adoptedThrough"], out["adopted"]) == (BEFORE + 1, top, AFTER)
        assert out["stagedCopiesWritten"] == 0  # every version's own staged file holds its bytes: named, not copied
        row2, rows2 = db_state(b.database_url, table_id)
        assert row2 is not None and (row2["latest_version"], row2["latest_backfilled_version"]) == (top, top)
        assert [r[0] for r in rows2] == list(range(1, top + 1))  # one row per version: none ratified twice
        for version, file_name, sha, backfilled_at in rows2:
            assert backfilled_at is not None
            assert hashlib.sha256(b.read(delta_file(loc, version))).hexdigest() == sha
            assert b.read(f"{loc}/_delta_log/_commits/{file_name}") == b.read(delta_file(loc, version))

        # the running service takes commits again (its refusal was not kept), and the check is clean
        done = client_of(svc).commit(table_id, top + 1, data_commit(b, loc, [top + 1]))
        ids.append(top + 1)
        assert done.version == top + 1
        client_of(svc).backfill_to_version(table_id, top + 1)
        assert ids_of(b, loc) == ids
        res = cli("store", "check", "--table", table_id, "--json", env=env_of(b))
        assert res.returncode == 0, res.stdout + res.stderr
        assert json.loads(res.stdout)["ok"]
        # a second reconcile: nothing to adopt, nothing changed
        state = db_state(b.database_url, table_id)
        res = cli("tables", "reconcile", table_id, env=env_of(b))
        assert res.returncode == 1 and "is not ahead of the store" in res.stderr, res.stderr
        assert db_state(b.database_url, table_id) == state
    finally:
        for s in services:
            s.stop()


def client_of(svc: Service) -> Any:
    return svc.client()


# -- bad input: refused, nothing changed ------------------------------------------------------------------------

@pytest.fixture(params=["sqlite-local", "postgres-local"])
def stopped_table(request: pytest.FixtureRequest) -> Any:
    """A table with versions 1..3 committed and published, its service stopped."""
    db, storage = request.param.split("-")
    b = make_backend(request, db, storage, f"reconcile-bad-{request.param}-{uuid.uuid4().hex[:6]}")
    svc = Service(b).start()
    try:
        table_id, loc = create_owned_table(svc)
        for v in (1, 2, 3):
            assert post_commit(svc, table_id, v, actions())[0] == 200
        svc.client().backfill_to_version(table_id, 3)
    finally:
        svc.stop()
    return b, table_id, loc


def _valid(ict_offset: int = 0) -> bytes:
    acts = actions()
    acts[0]["commitInfo"]["inCommitTimestamp"] += 60_000 + ict_offset
    return ndjson(acts)


@pytest.mark.parametrize("case, files, message", [
    ("not ahead", lambda: {}, "is not ahead of the store"),
    ("a gap", lambda: {4: _valid(), 6: _valid(2)}, "missing below"),
    ("not JSON", lambda: {4: b"this is not a delta commit\n"}, "is not a Delta commit"),
    ("not UTF-8", lambda: {4: b"\xff\xfe\n"}, "not UTF-8"),
    ("no commitInfo", lambda: {4: b'{"add": {"path": "x.parquet"}}\n'}, "first action is not a commitInfo"),
    ("no inCommitTimestamp", lambda: {4: b'{"commitInfo": {"timestamp": 1}}\n'}, "no integer inCommitTimestamp"),
    ("a gap further up", lambda: {4: _valid(), 5: _valid(1), 7: _valid(3)}, "have a gap"),
    ("timestamps going back", lambda: {4: _valid(5), 5: _valid(1)}, "is not above the previous version's"),
])
def test_reconcile_refuses_bad_input_and_changes_nothing(stopped_table: Any, case: str,
                                                         files: Callable[[], dict[int, bytes]], message: str) -> None:
    b, table_id, loc = stopped_table
    for v, data in files().items():
        b.write(delta_file(loc, v), data)
    before, snapshot = db_state(b.database_url, table_id), files_of(b, loc)
    res = cli("tables", "reconcile", table_id, env=env_of(b))
    assert res.returncode == 1, (case, res.stdout, res.stderr)
    assert message in res.stderr and "nothing changed" in res.stderr, (case, res.stderr)
    assert db_state(b.database_url, table_id) == before
    assert files_of(b, loc) == snapshot


def test_store_check_reports_a_changed_staged_file_and_a_missing_published_one(stopped_table: Any) -> None:
    b, table_id, loc = stopped_table
    res = cli("store", "check", "--table", table_id, "--json", env=env_of(b))
    assert res.returncode == 0, res.stdout + res.stderr
    _, rows = db_state(b.database_url, table_id)
    staged = f"{loc}/_delta_log/_commits/{rows[1][1]}"
    b.write(staged, b.read(staged) + b"\n")  # version 2's staged file no longer holds the ratified bytes
    b.remove(delta_file(loc, 3))  # version 3 published, then lost
    snapshot = files_of(b, loc)
    res = cli("store", "check", "--table", table_id, env=env_of(b))
    assert res.returncode == 1
    assert "MISMATCH (2)" in res.stdout and "staged-differs v2" in res.stdout and "published-missing v3" in res.stdout
    assert re.search(r"\b(None|True|False)\b", res.stdout) is None, res.stdout
    assert files_of(b, loc) == snapshot


# -- every API goes through the one check ---------------------------------------------------------------------

@pytest.mark.parametrize("api", ["unity-catalog", "delta-rest"])
def test_the_catalog_apis_refuse_a_published_version_until_reconciled(request: pytest.FixtureRequest, api: str) -> None:
    """A catalog-managed table whose <1>.json is published although the store records version 0 (the restore of a
    store backed up before version 1): the Unity Catalog preview commit and the Delta REST add-commit are refused
    with their API's 503, nothing ratified; reconcile adopts <1>.json (writing it a staged copy in
    _staged_commits, since no staged file there holds its bytes), and the next version is taken."""
    from tests.delta.conftest import V1Writer
    from tests.unity.conftest import Writer, picture

    b = make_backend(request, "sqlite", "local", f"reconcile-{api}-{uuid.uuid4().hex[:6]}")
    svc = Service(b).start()
    try:
        w = (Writer if api == "unity-catalog" else V1Writer)(svc).names()
        w.create()
        published = ndjson(actions(1))
        b.write(delta_file(w.location, 1), published)
        svc.stop()  # a restore implies restarting the owners (the one that registered the table trusts its log)
        svc = Service(b, port=svc.port).start()
        before = picture(svc, w.location)
        status, payload, name = w.commit(1)
        assert status == 503, payload
        if api == "unity-catalog":
            assert payload["error_code"] == "UNAVAILABLE"
            assert f"commit-owner tables reconcile {w.table_id}" in payload["message"]
        else:
            assert payload["error"]["type"] == "InternalServerErrorException"
            assert f"commit-owner tables reconcile {w.table_id}" in payload["error"]["message"]
        b.remove(f"{w.location}/_delta_log/_staged_commits/{name}")  # the refused writer's own staged file
        assert picture(svc, w.location) == before

        res = cli("tables", "reconcile", w.table_id, "--json", env=env_of(b))
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert (out["adoptedFrom"], out["adoptedThrough"], out["stagedCopiesWritten"]) == (1, 1, 1)
        _, rows = db_state(b.database_url, w.table_id)
        [(version, file_name, sha, backfilled_at)] = rows
        assert (version, sha) == (1, hashlib.sha256(published).hexdigest()) and backfilled_at is not None
        assert b.read(f"{w.location}/_delta_log/_staged_commits/{file_name}") == published
        status, payload, _ = w.commit(2)
        assert status == 200, payload
        assert [r[0] for r in db_state(b.database_url, w.table_id)[1]] == [1, 2]
    finally:
        svc.stop()


def test_store_check_counts_files_log_cleanup_removed_below_a_checkpoint_as_cleaned(stopped_table: Any) -> None:
    """Log cleanup (coordinator/ops/logcleanup.py) deletes <v>.json and the staged files of versions below a complete
    checkpoint: no mismatch there, and every file from the checkpoint on is still required."""
    b, table_id, loc = stopped_table
    _, rows = db_state(b.database_url, table_id)
    b.write(f"{loc}/_delta_log/{2:020d}.checkpoint.parquet", b"PAR1")  # (only its name counts here)
    for v in (0, 1):
        b.remove(delta_file(loc, v))
    b.remove(f"{loc}/_delta_log/_commits/{rows[0][1]}")  # version 1's staged file
    res = cli("store", "check", "--table", table_id, "--json", env=env_of(b))
    assert res.returncode == 0, res.stdout + res.stderr
    [t] = json.loads(res.stdout)["tables"]
    assert (t["ok"], t["cleanedBelow"], t["cleanedFiles"]) == (True, 2, 2)
    b.remove(delta_file(loc, 2))  # the checkpoint's own version is never cleaned up
    res = cli("store", "check", "--table", table_id, "--json", env=env_of(b))
    assert res.returncode == 1
    [t] = json.loads(res.stdout)["tables"]
    assert [(p["kind"], p["version"]) for p in t["problems"]] == [("published-missing", 2)]
