"""Bounded resources: body size limit, database pool limit, deadlines so one stuck table stalls no other."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest

from client import CommitOwnerClient
from client.contract.errors import CommitStateUnknownError, PayloadTooLargeError, UnavailableError
from harness.checker import check, db_rows, lister
from harness.faults import make_tables, start_services
from harness.storage_faults import STORAGE_FAULTS
from harness.workload import CLOCK, Workload, commit_body
from tests.conftest import make_backend
from tests.support import Service, actions, create_owned_table, delta_file, ndjson, wait_until


def test_a_body_over_the_limit_is_refused_with_413_and_changes_nothing(request: pytest.FixtureRequest) -> None:
    backend = make_backend(request, "sqlite", "local", "rel-413")
    svc = Service(backend, extra_env={"COMMIT_OWNER_MAX_BODY_BYTES": "4096"}).start()
    try:
        table_id, loc = create_owned_table(svc)
        before = backend.snapshot(loc)
        big = ndjson(actions(n_adds=60))
        assert len(big) > 4096
        with pytest.raises(PayloadTooLargeError) as e:
            svc.client().commit(table_id, 1, big)
        assert e.value.http_status == 413 and e.value.code == "PAYLOAD_TOO_LARGE"
        assert backend.snapshot(loc) == before
        assert db_rows(backend.database_url, table_id)[1] == []
        assert svc.client().get_commits(table_id).latest_table_version == -1
        assert svc.client().commit(table_id, 1, actions()).version == 1  # the refusal consumed nothing
    finally:
        svc.stop()


def _connections(admin_url: str, database: str) -> int:
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(admin_url)
    with psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database or "postgres") as conn:
        return int(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                                (database,)).fetchone()[0])


def test_a_service_never_opens_more_database_connections_than_its_pool_allows(request: pytest.FixtureRequest) -> None:
    from sqlalchemy.engine import make_url

    backend = make_backend(request, "postgres", "local", "rel-pool")
    admin = request.getfixturevalue("pg_admin_url")
    dbname = make_url(backend.database_url).database
    (svc,) = start_services(backend, 1, {"COMMIT_OWNER_DB_POOL_SIZE": "2"})
    try:
        tables = make_tables(svc, 4)
        seen: list[int] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                seen.append(_connections(admin, dbname))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        wl = Workload([svc.endpoint], tables, lister(backend), writers=10, timeout=10, deadline=20, seed=11).start()
        wl.wait_for_acks(25, timeout=60)
        history = wl.stop()
        stop.set()
        sampler.join(5)
        # A pool of 2 and no overflow (coordinator/store/engine.py): 2 at most, under 10 writers.
        assert seen and 1 <= max(seen) <= 2, max(seen)
        result = check(backend, tables, history, endpoints=[svc.endpoint])
        result.assert_ok()
        assert result.acknowledged >= 25
    finally:
        svc.stop()


def test_a_stuck_table_does_not_stall_commits_to_other_tables(request: pytest.FixtureRequest) -> None:
    import psycopg
    from sqlalchemy.engine import make_url

    backend = make_backend(request, "postgres", "local", "rel-stuck")
    (plain,) = start_services(backend, 1)
    normal = make_tables(plain, 2)
    slow_id, slow_loc = create_owned_table(plain, backend.new_location("stuck-storage"))
    locked_id, _ = create_owned_table(plain, backend.new_location("locked-row"))
    plain.stop()
    # Storage of one table hangs for 60 s per call; the service gives each storage call and each SQL
    # statement 2 s (request_timeout_seconds).
    (svc,) = start_services(backend, 1, {STORAGE_FAULTS: "latency_ms=60000;match=stuck-storage",
                                         "COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS": "2"})
    u = make_url(backend.database_url)
    blocker = psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database)
    try:
        # Another table's row stays locked by a transaction that never ends (a stuck writer, a DBA...).
        blocker.execute("SELECT * FROM owned_tables WHERE table_id = %s FOR UPDATE", (locked_id,))
        wl = Workload([svc.endpoint], normal, lister(backend), writers=3, timeout=5, deadline=10, seed=13).start()
        wl.wait_for_acks(3)
        outcomes: dict[str, BaseException | None] = {}

        def stuck_commit(table_id: str) -> None:
            c = CommitOwnerClient(svc.endpoint, timeout=30, deadline=1.0)
            try:
                c.commit(table_id, 1, commit_body("stuck", CLOCK.next()))
                outcomes[table_id] = None
            except BaseException as e:  # noqa: BLE001 - recorded and asserted below
                outcomes[table_id] = e

        started = time.time()
        threads = [threading.Thread(target=stuck_commit, args=(t,)) for t in (slow_id, locked_id)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        ended = time.time()
        acks_meanwhile = len([t for t in wl.history.ack_times() if started <= t <= ended])
        history = wl.stop()
        # Both stuck commits ended with "unavailable" at the deadline instead of hanging.
        for tid in (slow_id, locked_id):
            err = outcomes[tid]
            assert isinstance(err, (UnavailableError, CommitStateUnknownError)), repr(err)
        assert ended - started < 15
        assert "TimeoutError" in outcomes[slow_id].message  # type: ignore[union-attr]
        # The server's statement timeout and the owner's own deadline (decision 46) are both 2 s: either ends it.
        assert any(why in outcomes[locked_id].message  # type: ignore[union-attr]
                   for why in ("QueryCanceled", "no answer within 2s")), outcomes[locked_id]
        # ... while the other tables kept committing.
        assert acks_meanwhile >= 5, acks_meanwhile
        # The stuck table's file write hung while the database ratified version 1 (decision 43: the two run at
        # once): its writer heard "unavailable", never an ack, and the row keeps the bytes the file will get.
        slow_rows = db_rows(backend.database_url, slow_id)[1]
        assert [r["version"] for r in slow_rows] in ([], [1]), slow_rows
        assert backend.list(f"{slow_loc}/_delta_log/_commits") == []  # the write never happened
        blocker.rollback()
        assert db_rows(backend.database_url, locked_id)[1] == []  # the statement timed out; nothing ratified
        result = check(backend, normal, history, endpoints=[svc.endpoint])
        result.assert_ok()
    finally:
        blocker.close()
        svc.stop()
    if slow_rows:  # once the storage answers again, the ratified version is written from its row and published
        (healed,) = start_services(backend, 1)
        try:
            wait_until(lambda: backend.exists(delta_file(slow_loc, 1)), timeout=30, what="version 1 published")
            staged = backend.read(f"{slow_loc}/_delta_log/_commits/{slow_rows[0]['file_name']}")
            assert hashlib.sha256(staged).hexdigest() == slow_rows[0]["content_sha256"]
            assert backend.read(delta_file(slow_loc, 1)) == staged
        finally:
            healed.stop()
