"""Operator commands instead of raw SQL: `commit-owner tables create|forget|unfence|release`.

Each runs as a real subprocess against the operations service (PostgreSQL + local disk, backfill only on
demand); refusals are checked to change neither the database rows nor the files of the table.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.ops.helpers import call, post_commit
from tests.ops.test_cli import cli
from tests.support import ID_SCHEMA, Backend, Service, data_commit, delta_file, delta_rs_table


def db_state(database_url: str, table_id: str) -> tuple[dict[str, Any] | None, list[tuple[Any, ...]]]:
    """The table's row and its commit rows, straight from the ownership store."""
    from sqlalchemy import create_engine, text

    from coordinator.store.engine import sync_url

    engine = create_engine(sync_url(database_url))
    try:
        with engine.connect() as conn:
            row = conn.execute(text("SELECT table_id, location, latest_version, latest_backfilled_version, accepting, "
                                    "status, status_reason, backfill_error FROM owned_tables WHERE table_id = :t"),
                               {"t": table_id}).mappings().first()
            commits = conn.execute(text("SELECT version, file_name, content_sha256, backfilled_at FROM commits "
                                        "WHERE table_id = :t ORDER BY version"), {"t": table_id}).all()
            return (dict(row) if row else None), [tuple(c) for c in commits]
    finally:
        engine.dispose()


def create(svc: Service, location: str, *extra: str) -> Any:
    return cli("tables", "create", "--location", location, "--schema", json.dumps(ID_SCHEMA), "--json",
               "--endpoint", svc.endpoint, *extra)


def db_args(svc: Service) -> list[str]:
    return ["--database-url", svc.backend.database_url]


def commit_rows(svc: Service, table_id: str, location: str, *batches: list[int]) -> None:
    """Commit one real Parquet file per batch of ids through the owner, from version 1 on."""
    for i, ids in enumerate(batches, start=1):
        status, _, body = post_commit(svc, table_id, i, data_commit(svc.backend, location, ids))
        assert status == 200, body


def ids_read_by_delta_rs(b: Backend, location: str) -> list[int]:
    return sorted(delta_rs_table(b, location).to_pyarrow_table().column("id").to_pylist())


# -- tables create -------------------------------------------------------------------------------------

def test_tables_create_registers_and_writes_a_version_0_that_delta_rs_reads(manual_service: Service) -> None:
    svc, b = manual_service, manual_service.backend
    loc = b.new_location()
    res = create(svc, loc, "--property", "delta.appendOnly=true")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["location"] == loc and out["version"] == 0
    row, commits = db_state(b.database_url, out["tableId"])
    assert row is not None and row["location"] == loc and row["status"] == "ACTIVE" and commits == []
    version0 = [json.loads(line) for line in b.read(delta_file(loc, 0)).splitlines()]
    conf = next(a["metaData"] for a in version0 if "metaData" in a)["configuration"]
    assert conf["delta.appendOnly"] == "true" and out["tableId"] in json.dumps(conf)
    dt = delta_rs_table(b, loc)
    assert dt.version() == 0 and [f.name for f in dt.schema().fields] == ["id"]


@pytest.mark.parametrize("args, message", [
    (["--schema", "not json"], "--schema is not JSON"),
    (["--schema", json.dumps({"type": "struct", "fields": "x"})], "schema"),
    (["--property", "no-equals-sign"], "KEY=VALUE"),
])
def test_tables_create_refuses_bad_arguments_and_changes_nothing(manual_service: Service, args: list[str],
                                                                 message: str) -> None:
    svc, b = manual_service, manual_service.backend
    loc = b.new_location()
    schema = [] if "--schema" in args else ["--schema", json.dumps(ID_SCHEMA)]
    res = cli("tables", "create", "--location", loc, *schema, *args, "--endpoint", svc.endpoint)
    assert res.returncode == 1, res.stderr
    assert message in res.stderr
    assert b.snapshot(loc) == {}
    assert not [t for t in svc.client().list_tables() if t.location == loc]


def test_tables_show_of_a_relative_path_looks_in_the_working_directory(manual_service: Service) -> None:
    from tests.support import ROOT

    res = cli("tables", "show", "warehouse/t2", *db_args(manual_service))  # cli runs in the checkout's folder
    assert res.returncode == 1
    assert res.stderr.strip() == f"error: no owned table at {(ROOT / 'warehouse' / 't2').as_uri()}"


# -- tables forget -------------------------------------------------------------------------------------

def test_forget_drops_a_registration_whose_version_0_was_never_written(manual_service: Service) -> None:
    """What the old README tour left: registered, version 1 ratified and published, no version 0."""
    svc, b = manual_service, manual_service.backend
    loc = b.new_location()
    table_id = svc.client().register_table(loc, current_version=-1).table_id
    commit_rows(svc, table_id, loc, [1, 2])
    assert call(svc, "POST", f"/api/v1/tables/{table_id}/backfill", b"{}",
                {"Content-Type": "application/json"})[0] == 200
    assert b.exists(delta_file(loc, 1)) and not b.exists(delta_file(loc, 0))
    files = b.snapshot(loc)

    res = cli("tables", "forget", table_id, "--json", *db_args(svc))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["tableId"], out["forgottenCommits"], out["publishedVersions"], out["stagedFiles"]) == (
        table_id, 1, [1], 1)
    assert db_state(b.database_url, table_id) == (None, [])
    assert b.snapshot(loc) == files  # files are the operator's to remove


def test_forget_refuses_a_table_readers_use_and_force_needs_a_confirmation(manual_service: Service) -> None:
    svc, b = manual_service, manual_service.backend
    loc = b.new_location()
    table_id = json.loads(create(svc, loc).stdout)["tableId"]
    commit_rows(svc, table_id, loc, [7])
    before_db, before_files = db_state(b.database_url, table_id), b.snapshot(loc)

    refused = cli("tables", "forget", table_id, *db_args(svc))
    assert refused.returncode == 1
    assert "readers use this log as owned" in refused.stderr and "tables release" in refused.stderr
    assert "nothing changed" in refused.stderr

    declined = cli("tables", "forget", loc, "--force", *db_args(svc))  # stdin is empty: no confirmation
    assert declined.returncode == 1 and "not confirmed; nothing changed" in declined.stderr
    assert db_state(b.database_url, table_id) == before_db and b.snapshot(loc) == before_files

    forced = cli("tables", "forget", loc, "--force", "--yes", "--json", *db_args(svc))
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["forced"] is True
    assert db_state(b.database_url, table_id) == (None, [])
    assert b.snapshot(loc) == before_files


def test_forget_of_an_unknown_table_exits_1_and_names_it(manual_service: Service) -> None:
    res = cli("tables", "forget", "/nowhere/at/all", *db_args(manual_service))
    assert res.returncode == 1 and "no owned table at file:///nowhere/at/all" in res.stderr


# -- tables unfence ------------------------------------------------------------------------------------

def fenced_table(svc: Service) -> tuple[str, str, bytes]:
    """A table fenced by a foreign version 1; returns (table id, location, the foreign bytes)."""
    b = svc.backend
    loc = b.new_location()
    table_id = json.loads(create(svc, loc).stdout)["tableId"]
    commit_rows(svc, table_id, loc, [1, 2, 3])
    foreign = b'{"commitInfo":{"inCommitTimestamp":1,"operation":"WRITE","engineInfo":"elsewhere"}}\n'
    b.write(delta_file(loc, 1), foreign)
    status, _, body = call(svc, "POST", f"/api/v1/tables/{table_id}/backfill", b"{}",
                           {"Content-Type": "application/json"})
    assert status == 409 and body["error"]["code"] == "FOREIGN_COMMIT_FILE"
    assert db_state(b.database_url, table_id)[0]["status"] == "FENCED"
    return table_id, loc, foreign


def test_unfence_refuses_while_the_foreign_file_is_there_then_publishes_once_it_is_moved(
        manual_service: Service) -> None:
    svc, b = manual_service, manual_service.backend
    table_id, loc, foreign = fenced_table(svc)
    before_db, before_files = db_state(b.database_url, table_id), b.snapshot(loc)

    refused = cli("tables", "unfence", table_id, *db_args(svc))
    assert refused.returncode == 1
    assert "00000000000000000001.json differs from the commit the owner ratified as version 1" in refused.stderr
    assert db_state(b.database_url, table_id) == before_db and b.snapshot(loc) == before_files

    os.remove(delta_file(loc, 1)[len("file://"):])  # the operator saves and moves the foreign file aside
    res = cli("tables", "unfence", loc, "--json", *db_args(svc))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"tableId": table_id, "location": loc, "status": "ACTIVE",
                                      "backfilledThrough": 1}
    row, commits = db_state(b.database_url, table_id)
    assert (row["status"], row["accepting"], row["status_reason"], row["backfill_error"]) == ("ACTIVE", True, None,
                                                                                             None)
    assert b.read(delta_file(loc, 1)) != foreign
    assert ids_read_by_delta_rs(b, loc) == [1, 2, 3]
    status, _, body = post_commit(svc, table_id, 2, data_commit(b, loc, [4]))
    assert status == 200, body  # accepting commits again


def test_unfence_refuses_a_foreign_file_above_the_owners_latest_version(manual_service: Service) -> None:
    svc, b = manual_service, manual_service.backend
    table_id, loc, foreign = fenced_table(svc)
    os.remove(delta_file(loc, 1)[len("file://"):])
    b.write(delta_file(loc, 2), foreign)  # above the owner's latest version (1)
    before_db, before_files = db_state(b.database_url, table_id), b.snapshot(loc)
    res = cli("tables", "unfence", table_id, *db_args(svc))
    assert res.returncode == 1 and "00000000000000000002.json lies above the owner's latest version 1" in res.stderr
    assert db_state(b.database_url, table_id) == before_db and b.snapshot(loc) == before_files


def test_unfence_of_a_table_that_is_not_fenced_is_refused(manual_service: Service) -> None:
    svc, b = manual_service, manual_service.backend
    loc = b.new_location()
    table_id = json.loads(create(svc, loc).stdout)["tableId"]
    before = db_state(b.database_url, table_id)
    res = cli("tables", "unfence", table_id, *db_args(svc))
    assert res.returncode == 1 and "is ACTIVE, not FENCED" in res.stderr
    assert db_state(b.database_url, table_id) == before


# -- tables release ------------------------------------------------------------------------------------

def test_release_hands_the_table_back_and_delta_rs_reads_it(manual_service: Service) -> None:
    svc, b = manual_service, manual_service.backend
    loc = b.new_location()
    table_id = json.loads(create(svc, loc).stdout)["tableId"]
    commit_rows(svc, table_id, loc, [5, 6])
    res = cli("tables", "release", table_id, "--endpoint", svc.endpoint)
    assert res.returncode == 0, res.stderr
    assert f"released {loc} at version 2" in res.stdout
    row, _ = db_state(b.database_url, table_id)
    assert (row["status"], row["accepting"]) == ("RELEASED", False)
    last = [json.loads(line) for line in b.read(delta_file(loc, 2)).splitlines()]
    conf = next(a["metaData"] for a in last if "metaData" in a)["configuration"]
    assert not any("managedCommit" in k or "coordinatedCommits" in k for k in conf)
    assert ids_read_by_delta_rs(b, loc) == [5, 6]
    again = cli("tables", "release", table_id, "--endpoint", svc.endpoint)
    assert again.returncode == 1 and "no commit owner to release" in again.stderr


# -- the runbook -----------------------------------------------------------------------------------------

def test_the_runbook_has_no_raw_sql_and_every_command_it_names_exists() -> None:
    import re

    from tests.ops.test_cli import cli_here
    from tests.support import ROOT

    text = (ROOT / "docs" / "runbook.md").read_text()
    assert not re.search(r"\b(DELETE\s+FROM|UPDATE\s+\w+\s+SET|INSERT\s+INTO|SELECT\s.+\sFROM)\b", text, re.I)
    commands = set(re.findall(r"^commit-owner ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)", text, re.M))
    assert {"tables forget", "tables unfence", "tables release", "tables create"} <= commands
    for command in commands:
        words = command.split()
        res = cli_here(*words, "--help")
        if res.returncode != 0 and len(words) == 2:  # `backfill --table`-style: the second word is no command
            res = cli_here(words[0], "--help")
        assert res.returncode == 0, (command, res.stderr)
