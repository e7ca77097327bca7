"""Faults in log storage: injected write/read errors and latency (the harness's storage faults, harness/storage_faults.py)."""

from __future__ import annotations

import json
import time

import pytest

from client import CommitOwnerClient
from client.contract.errors import CommitStateUnknownError, UnavailableError
from harness.checker import check, lister
from harness.faults import FaultLog, make_tables, report, start_services
from harness.storage_faults import STORAGE_FAULTS
from harness.workload import CLOCK, Workload, commit_body
from tests.conftest import make_backend

pytestmark = pytest.mark.slow  # injected storage faults and latency


def _injected(log_text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in log_text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msg = rec.get("msg", "")
        if rec.get("logger") == "commit_owner.faults" and "injected fault:" in msg:
            kind = msg.split("injected fault:", 1)[1].split()[0]
            out[kind] = out.get(kind, 0) + 1
    return out


def test_no_acknowledged_commit_is_lost_when_storage_fails_writes_and_is_slow(request: pytest.FixtureRequest) -> None:
    backend = make_backend(request, "postgres", "local", "rel-faulty")
    spec = "put_error=0.15;put_lost_ack=0.15;read_error=0.05;latency_ms=0-1000;seed=7"
    (svc,) = start_services(backend, 1, {STORAGE_FAULTS: spec})
    faults = FaultLog()
    try:
        tables = make_tables(svc, 3)
        ev = faults.inject(f"storage faults {spec}")
        # Client timeout 1 s < the slowest storage call: replies are abandoned after the server committed.
        wl = Workload([svc.endpoint], tables, lister(backend), writers=6, timeout=1.0, deadline=4.0, seed=3).start()
        wl.wait_for_acks(20, timeout=60)
        history = wl.stop()
        faults.heal(ev)
        injected = _injected(svc.log_text())
        result = check(backend, tables, history, endpoints=[svc.endpoint])
        report("storage-faults", result, faults)
        print("injected:", injected)
        result.assert_ok()
        assert result.lost == 0 and result.duplicates == 0
        assert injected.get("put_error", 0) > 0 and injected.get("put_lost_ack", 0) > 0, injected
    finally:
        svc.stop()


def test_a_commit_whose_reply_times_out_after_the_server_committed_is_there_exactly_once(
    request: pytest.FixtureRequest,
) -> None:
    backend = make_backend(request, "sqlite", "local", "rel-lateack")
    (plain,) = start_services(backend, 1)
    (table,) = make_tables(plain, 1)
    plain.stop()
    # Every storage call of this table now takes 1.2 s; the client gives each request 0.4 s.
    (svc,) = start_services(backend, 1, {STORAGE_FAULTS: "latency_ms=1200"})
    try:
        data = commit_body("late-ack", CLOCK.next())
        impatient = CommitOwnerClient(svc.endpoint, timeout=0.4, deadline=2.0)
        try:
            # The first attempt times out; a retry that arrives once the server finished it is answered
            # from the key at once (no storage work), so the impatient client may still get its version.
            got = impatient.commit(table.table_id, 1, data, idempotency_key="6d1b3a3e-0000-4000-8000-000000000001")
            assert got.version == 1
        except (CommitStateUnknownError, UnavailableError):
            pass
        # The server finished the first attempt after the client gave up: version 1 is there.
        patient = CommitOwnerClient(svc.endpoint, timeout=20, deadline=30)
        deadline = time.monotonic() + 20
        while patient.get_commits(table.table_id).latest_table_version != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert patient.get_commits(table.table_id).latest_table_version == 1
        # Resending with the same key answers with that version, never a second one.
        again = patient.commit(table.table_id, 1, data, idempotency_key="6d1b3a3e-0000-4000-8000-000000000001")
        assert again.version == 1
        assert patient.get_commits(table.table_id).latest_table_version == 1
        patient.backfill_to_version(table.table_id, 1)
        assert backend.read(f"{table.location}/_delta_log/{1:020d}.json") == data
        # One staged file for version 1, the ratified one: a resend's own file (names are fresh for every attempt,
        # decision 43) is removed once the resend hears it replays the earlier attempt.
        staged = [n for n in backend.list(f"{table.location}/_delta_log/_commits") if n.startswith(f"{1:020d}.")]
        assert staged == [again.file_name]
    finally:
        svc.stop()
