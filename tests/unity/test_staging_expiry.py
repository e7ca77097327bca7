"""Staging reservations never turned into a table expire (``staging_expiry_seconds``): `commit-owner staging
clean` and the janitor's round remove the reservation and then the files a writer left under its location;
a reservation in use, a young one and a registered table are untouched; a dry run changes nothing. On every
backend, against the service's own database and storage."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import make_backend
from tests.ops.test_cli import cli
from tests.support import Backend, Service, delta_file, ndjson
from tests.unity.conftest import Writer, assert_uc_error, catalog_managed_version0, db_rows, ok, picture, uc


@pytest.fixture(scope="module")
def stg_service(request: pytest.FixtureRequest, backend: Backend) -> Iterator[Service]:
    """Its own database and bucket (the expiry removes every old reservation of a database); no janitor or
    backfill in the background: the rounds are the commands'."""
    db, storage = backend.name.split("-")
    svc = Service(make_backend(request, db, storage, backend.name + "-stg"),
                  extra_env={"COMMIT_OWNER_BACKFILL": "false", "COMMIT_OWNER_JANITOR_INTERVAL_SECONDS": "0"}).start()
    yield svc
    svc.stop()


AGE = 3600  # seconds the abandoned reservation is made older than it is (its row's created_at, moved back)
EXPIRY = AGE / 2  # an expiry the abandoned reservation exceeds by 30 minutes and a fresh one stays far below:
# no command's start-up time, however slow the machine, can move either across it


def backdate(svc: Service, staging_id: str, seconds: int) -> None:
    """Make a reservation ``seconds`` older, as if it had been made that much earlier."""
    from sqlalchemy import create_engine, text

    from coordinator.store.engine import sync_url

    engine = create_engine(sync_url(svc.backend.database_url))
    try:
        with engine.begin() as conn:
            n = conn.execute(text("UPDATE staging_tables SET created_at = created_at - :ms WHERE id = :id"),
                             {"ms": seconds * 1000, "id": staging_id}).rowcount
        assert n == 1
    finally:
        engine.dispose()


def command(svc: Service, *args: str, expiry: float = 1.0) -> Any:
    env = {**svc.backend.env(), "COMMIT_OWNER_STAGING_EXPIRY_SECONDS": str(expiry)}
    res = cli(*args, "--json", env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def reserve(w: Writer, name: str) -> dict[str, Any]:
    return ok(w.svc, "POST", "/staging-tables", {"name": name, "catalog_name": w.catalog, "schema_name": w.schema})


def test_an_old_unused_reservation_expires_with_its_files_and_nothing_else_changes(stg_service: Service) -> None:
    svc, b = stg_service, stg_service.backend
    w = Writer(svc).names()
    old = reserve(w, "abandoned")
    loc = old["staging_location"]
    b.write(delta_file(loc, 0), ndjson(catalog_managed_version0(old["id"])))  # a writer began, then gave up
    b.write(f"{loc}/part-00000.parquet", b"PAR1 not really")
    w.create()  # a reservation turned into a table: no longer a reservation
    table_files = b.snapshot(w.location)
    backdate(svc, old["id"], AGE)
    young = reserve(w, "fresh")

    listed = {r["id"]: r for r in command(svc, "staging", "list", expiry=3600)}
    assert set(listed) == {old["id"], young["id"]}
    assert listed[old["id"]]["name"] == f"{w.catalog}.{w.schema}.abandoned"
    assert listed[old["id"]]["ageSeconds"] >= AGE
    assert listed[old["id"]]["expiresAt"] == listed[old["id"]]["createdAt"] + 3600 * 1000

    before = picture(svc, loc)
    dry = command(svc, "staging", "clean", "--dry-run", expiry=EXPIRY)
    assert [(r["id"], r["files"], r["filesKept"]) for r in dry["expired"]] == [(old["id"], 2, None)]
    assert picture(svc, loc) == before  # a dry run changes nothing

    rep = command(svc, "staging", "clean", expiry=EXPIRY)
    assert [r["id"] for r in rep["expired"]] == [old["id"]] and rep["filesRemoved"] == 2 and rep["errors"] == 0
    assert b.snapshot(loc) == {}
    assert [r[0].strip("'") for r in db_rows(b.database_url)["staging_tables"]] == [young["id"]]
    assert b.snapshot(w.location) == table_files  # the table made from a reservation is untouched
    assert ok(svc, "GET", f"/tables/{w.full_name}")["table_id"] == w.table_id
    # the expired reservation can no longer become a table, and its name is free for a new one
    b.write(delta_file(loc, 0), ndjson(catalog_managed_version0(old["id"])))
    status, payload = uc(svc, "POST", "/tables", {
        "name": "abandoned", "catalog_name": w.catalog, "schema_name": w.schema, "table_type": "MANAGED",
        "data_source_format": "DELTA", "storage_location": loc, "columns": [],
        "properties": {"io.unitycatalog.tableId": old["id"]}})
    assert_uc_error(status, payload, 404, "NOT_FOUND")
    assert "no staging table" in payload["message"]
    assert reserve(w, "abandoned")["id"] != old["id"]


def test_the_janitors_round_expires_reservations_too_and_keeps_files_it_cannot_vouch_for(
        stg_service: Service) -> None:
    svc, b = stg_service, stg_service.backend
    w = Writer(svc).names()
    res = reserve(w, "inner")
    loc = res["staging_location"]
    # a table registered inside the reservation's location (through /api/v1): its files are not the reservation's
    inner = f"{loc}/nested"
    b.write(delta_file(inner, 0), ndjson(catalog_managed_version0(res["id"])))
    svc.client().register_table(inner, current_version=0)
    time.sleep(1.5)
    rep = command(svc, "janitor")
    expired = {r["id"]: r for r in rep["staging"]["expired"]}
    assert res["id"] in expired
    assert expired[res["id"]]["filesKept"] == "a registered table lies at, above or below the location"
    assert b.exists(delta_file(inner, 0))
    assert res["id"] not in [r["id"] for r in command(svc, "staging", "list")]


def test_expiry_zero_keeps_every_reservation(stg_service: Service) -> None:
    svc = stg_service
    w = Writer(svc).names()
    res = reserve(w, "kept")
    time.sleep(0.2)
    before = picture(svc, res["staging_location"])
    rep = command(svc, "staging", "clean", expiry=0)
    assert rep["expired"] == [] and picture(svc, res["staging_location"]) == before
    assert [r["expiresAt"] for r in command(svc, "staging", "list", expiry=0) if r["id"] == res["id"]] == [None]
