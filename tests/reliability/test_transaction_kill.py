"""SIGKILL of the owner in the middle of multi-table transactions: before, during and after the database commit,
and at random under a Jepsen-style workload mixing transactions with single commits. Every table then shows all
of a transaction or none of it; nothing acknowledged is lost, nothing is there twice."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from typing import Any

import pytest

from client.contract.errors import CommitOwnerError
from harness.checker import check, lister, ratified_transactions
from harness.faults import FaultLog, make_tables, report, start_services
from harness.storage_faults import STORAGE_FAULTS
from harness.workload import CLOCK, Workload, WorkloadTable, commit_body
from tests.conftest import make_backend
from tests.support import ReplyDroppingProxy, Service, db_commit_files, wait_until

pytestmark = pytest.mark.slow  # process kills


def _proposals(tables: list[WorkloadTable], version: int) -> list[tuple[str, int, bytes]]:
    return [(t.table_id, version, commit_body(uuid.uuid4().hex, CLOCK.next())) for t in tables]


def _keys(backend: Any, table_id: str) -> set[str]:
    """The idempotency keys of the table's commit rows, read straight from the ownership store."""
    from sqlalchemy import create_engine, text

    from coordinator.store.engine import sync_url

    engine = create_engine(sync_url(backend.database_url))
    try:
        with engine.connect() as conn:
            return {str(k) for k, in conn.execute(text("SELECT idempotency_key FROM commits WHERE table_id = :t"),
                                                   {"t": table_id})}
    finally:
        engine.dispose()


def _all_or_none(backend: Any, tables: list[WorkloadTable], key: str) -> bool:
    """Whether the transaction ``key`` is on every table (True) or on none (False); fails on a partial one."""
    holding = [t.table_id for t in tables if key in _keys(backend, t.table_id)]
    assert holding in ([], [t.table_id for t in tables]), f"a partial transaction: on {holding} only"
    assert (key in ratified_transactions(backend.database_url)) == bool(holding)
    return bool(holding)


def _send_in_background(svc: Service, proposals: list[tuple[str, int, bytes]], key: str) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def go() -> None:
        try:
            out.append(svc.client(deadline=2, timeout=30).commit_transaction(proposals, idempotency_key=key))
        except CommitOwnerError as e:
            out.append(e)

    th = threading.Thread(target=go, daemon=True)
    th.start()
    return th, out


def _replay_lands_once(svc: Service, backend: Any, tables: list[WorkloadTable], proposals: list[tuple[str, int, bytes]],
                       key: str) -> None:
    got = svc.client(deadline=30).commit_transaction(proposals, idempotency_key=key)
    assert sorted(c.version for c in got.commits.values()) == [1] * len(tables)
    assert _all_or_none(backend, tables, key)
    again = svc.client(deadline=30).commit_transaction(proposals, idempotency_key=key)
    assert again == got  # once, whatever the number of replays


@pytest.mark.parametrize("db,storage", [("sqlite", "local"), ("postgres", "s3")])
def test_a_kill_before_the_database_commit_leaves_no_table_with_the_transaction(
        request: pytest.FixtureRequest, db: str, storage: str) -> None:
    backend = make_backend(request, db, storage, f"txkill-before-{db}-{storage}")
    (svc,) = start_services(backend, 1)
    try:
        tables = make_tables(svc, 3)
        # the last table's staged file takes 3 s to write: the kill comes while the others' are written
        # (its staged files only: the check that its log is not ahead of the store reads beside them, quickly)
        staged_dir = f"{tables[-1].location}/_delta_log/_commits/"
        slow = Service(backend, extra_env={STORAGE_FAULTS: f"latency_ms=3000;match={staged_dir}",
                                           "COMMIT_OWNER_LOG_LEVEL": "WARNING"}, port=svc.port)
        svc.stop()
        slow.start()
        key, proposals = str(uuid.uuid4()), _proposals(tables, 1)
        th, _ = _send_in_background(slow, proposals, key)
        time.sleep(1.0)
        slow.kill()
        th.join(30)
        staged = [[n for n in backend.list(f"{t.location}/_delta_log/_commits") if n.startswith(f"{1:020d}.")]
                  for t in tables]
        assert all(staged[:2]) and not staged[2]  # the kill came after the first staged files were written
        svc.start()
        assert _all_or_none(backend, tables, key) is False
        _replay_lands_once(svc, backend, tables, proposals, key)
    finally:
        svc.stop()


@pytest.mark.parametrize("db,storage", [("sqlite", "s3"), ("postgres", "local")])
def test_a_kill_during_the_database_transaction_leaves_no_table_with_the_transaction(
        request: pytest.FixtureRequest, db: str, storage: str) -> None:
    """The database transaction is held open by a lock the test takes (PostgreSQL: the row of the last table in
    table-id order, so the earlier tables' rows are already updated; SQLite: the database's write lock), and the
    owner is killed inside it."""
    backend = make_backend(request, db, storage, f"txkill-during-{db}-{storage}")
    (svc,) = start_services(backend, 1)
    try:
        tables = sorted(make_tables(svc, 3), key=lambda t: t.table_id)
        key, proposals = str(uuid.uuid4()), _proposals(tables, 1)
        with _held(backend, tables[-1].table_id):
            th, _ = _send_in_background(svc, proposals, key)
            if db == "postgres":  # the owner's transaction updated the first rows and waits for the last
                wait_until(lambda: _pg_sessions_waiting(backend, "Lock"), timeout=20, what="the owner to wait")
            else:
                time.sleep(1.5)  # the owner's transaction waits for the write lock (busy_timeout 10 s)
            svc.kill()
        th.join(30)
        svc.start()
        if db == "postgres":  # the killed session's transaction is rolled back once PostgreSQL sees it gone
            wait_until(lambda: not _pg_sessions_waiting(backend), timeout=20, what="the killed session to end")
        assert _all_or_none(backend, tables, key) is False
        _replay_lands_once(svc, backend, tables, proposals, key)
    finally:
        svc.stop()


@pytest.mark.parametrize("db,storage", [("sqlite", "local"), ("postgres", "s3")])
def test_a_kill_after_the_database_commit_keeps_every_table_with_the_transaction(
        request: pytest.FixtureRequest, db: str, storage: str) -> None:
    """The reply is cut off and the owner killed as the answer leaves it (the database committed); the client's
    retry with the same key, once the owner is back, gets the first answer: every table has it, once."""
    backend = make_backend(request, db, storage, f"txkill-after-{db}-{storage}")
    (svc,) = start_services(backend, 1)
    try:
        tables = make_tables(svc, 3)
        killed = threading.Event()

        def kill(_request: bytes) -> None:
            svc.kill()
            killed.set()

        proxy = ReplyDroppingProxy(svc.port, drop=1, match=lambda req: b"POST /api/v1/transactions" in req,
                                   before_drop=kill)
        try:
            key, proposals = str(uuid.uuid4()), _proposals(tables, 1)
            restarted = threading.Thread(target=lambda: (killed.wait(30), svc.start()), daemon=True)
            restarted.start()
            from client import CommitOwnerClient

            got = CommitOwnerClient(proxy.endpoint, deadline=60).commit_transaction(proposals, idempotency_key=key)
            restarted.join(30)
            assert proxy.dropped == 1
            assert sorted(c.version for c in got.commits.values()) == [1, 1, 1]
            assert _all_or_none(backend, tables, key) is True
            for t, (_, _, data) in zip(tables, proposals, strict=True):
                rows = db_commit_files(backend.database_url, t.table_id)
                assert list(rows) == [1]  # once
                assert hashlib.sha256(backend.read(f"{t.location}/_delta_log/_commits/{rows[1]}")).digest() == \
                    hashlib.sha256(data).digest()
        finally:
            proxy.close()
    finally:
        svc.stop()


@pytest.mark.parametrize("db,storage", [("sqlite", "s3"), ("postgres", "local")])
def test_no_transaction_is_partial_lost_or_duplicated_when_the_owner_is_killed_under_load(
        request: pytest.FixtureRequest, db: str, storage: str) -> None:
    backend = make_backend(request, db, storage, f"txkill-load-{db}-{storage}")
    (svc,) = start_services(backend, 1)
    faults = FaultLog()
    try:
        tables = make_tables(svc, 4)
        wl = Workload([svc.endpoint], tables, lister(backend), writers=4, timeout=2.0, deadline=8.0, seed=28,
                      transactions=0.5, tx_tables=3).start()
        wl.wait_for_acks(10)
        for _ in range(2):
            time.sleep(0.7)
            ev = faults.inject("service SIGKILL + restart")
            svc.kill()
            svc.start()
            faults.heal(ev)
            wl.wait_for_acks(5, since=ev.healed)
        history = wl.stop()
        faults.fill_recovery(history.ack_times())
        result = check(backend, tables, history, endpoints=[svc.endpoint])
        report(f"tx-kill-{db}-{storage}", result, faults)
        result.assert_ok()
        assert result.transactions_acknowledged >= 3
        assert result.partial_transactions == 0 and result.lost == 0 and result.duplicates == 0
    finally:
        svc.stop()


# -- holding the database inside the owner's transaction ----------------------------------------------------------

class _held:
    """A lock the owner's ratifying transaction must wait for, held by the test while the block runs."""

    def __init__(self, backend: Any, table_id: str) -> None:
        self.backend, self.table_id = backend, table_id
        self.conn: Any = None

    def __enter__(self) -> None:
        url = self.backend.database_url
        if url.startswith("sqlite"):
            import sqlite3

            self.conn = sqlite3.connect(url.split("///", 1)[1], isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")  # the database's write lock
        else:
            import psycopg
            from sqlalchemy.engine import make_url

            u = make_url(url)
            self.conn = psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database)
            self.conn.execute("SELECT 1 FROM owned_tables WHERE table_id = %s FOR UPDATE", (self.table_id,))

    def __exit__(self, *exc: object) -> None:
        self.conn.rollback() if not self.backend.database_url.startswith("sqlite") else self.conn.execute("ROLLBACK")
        self.conn.close()


def _pg_sessions_waiting(backend: Any, on: str = "") -> bool:
    """Whether a session of the owner's database waits for a lock (``on="Lock"``), or else sits inside a
    transaction (a killed client's session, until PostgreSQL notices)."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(backend.database_url)
    with psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database) as conn:
        if on:
            q, args = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = %s", (u.database, on)
        else:
            q, args = ("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() AND "
                       "(state LIKE 'idle in transaction%%' OR wait_event_type = 'Lock')"), (u.database,)
        n = conn.execute(q, args).fetchone()
    return bool(n and n[0])


def test_transactions_racing_through_two_owner_processes_on_one_database_stay_whole(
        request: pytest.FixtureRequest) -> None:
    """No fault: writers spread over two services on one PostgreSQL database race single commits and
    transactions over the same tables; the checker finds every transaction whole or absent."""
    backend = make_backend(request, "postgres", "s3", "tx-two-services")
    svcs = start_services(backend, 2)
    try:
        tables = make_tables(svcs[0], 3)
        wl = Workload([s.endpoint for s in svcs], tables, lister(backend), writers=4, timeout=2.0, deadline=8.0,
                      seed=7, transactions=0.6, tx_tables=2).start()
        wl.wait_for_acks(30)
        history = wl.stop()
        result = check(backend, tables, history, endpoints=[s.endpoint for s in svcs])
        report("tx-two-services", result)
        result.assert_ok()
        assert result.transactions_acknowledged >= 3 and result.rejected > 0  # they did race
        assert result.partial_transactions == 0 and result.lost == 0 and result.duplicates == 0
    finally:
        for s in svcs:
            s.stop()
