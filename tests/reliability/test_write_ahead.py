"""The database as the staged file's write-ahead log (decision 43).

The owner writes an ``/api/v1`` commit's staged file while the ratifying transaction runs. A SIGKILL after the
transaction and before the file is written must lose nothing, and no reader may be handed the version before
its file is there. The window is made wide with the harness's storage faults (harness/storage_faults.py): every storage call
on a ``_commits/`` path waits 60 s first, so the row is ratified long before the file would be written, and
the service is killed in between. Then a service without the fault is started on the same database and
storage, and every way a version reaches a reader is tried.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from client import CommitOwnerClient
from client.contract.errors import CommitFailedError, CommitOwnerError
from client.contract.layout import delta_file, staged_file
from harness.faults import make_tables, start_services
from harness.storage_faults import STORAGE_FAULTS
from harness.workload import CLOCK, commit_body
from harness.world import Backend
from tests.conftest import make_backend
from tests.support import db_commit_files, wait_until

pytestmark = pytest.mark.slow  # process kills

SLOW_STAGED_WRITES = {STORAGE_FAULTS: "latency_ms=60000;match=_commits/"}


def _ratify_then_kill(backend: Backend, table_id: str, loc: str, version: int, data: bytes, key: str) -> str:
    """Start a service whose staged writes hang, send the commit, wait until the database ratified it, SIGKILL
    the service. Returns the ratified file name; asserts the file is not there (the state under test)."""
    (svc,) = start_services(backend, 1, SLOW_STAGED_WRITES)
    outcome: list[BaseException | None] = []

    def send() -> None:
        try:
            CommitOwnerClient(svc.endpoint, timeout=90, deadline=90).commit(table_id, version, data,
                                                                           idempotency_key=key)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - the kill cuts the request: any failure is expected
            outcome.append(e)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        wait_until(lambda: version in db_commit_files(backend.database_url, table_id), timeout=30,
                   what=f"version {version} ratified in the database")
    finally:
        svc.kill()
    sender.join(30)
    assert outcome and outcome[0] is not None, "the writer must not have been acknowledged: its file was unwritten"
    name = db_commit_files(backend.database_url, table_id)[version]
    assert not backend.exists(staged_file(loc, "_commits", name))
    assert not backend.exists(delta_file(loc, version))
    return name


@pytest.mark.parametrize("db,storage", [("postgres", "local"), ("sqlite", "s3")])
def test_a_kill_between_the_ratification_and_the_staged_write_loses_nothing_and_no_reader_sees_a_missing_file(
    request: pytest.FixtureRequest, db: str, storage: str,
) -> None:
    backend = make_backend(request, db, storage, f"wal-{db}-{storage}")
    (plain,) = start_services(backend, 1)
    (table,) = make_tables(plain, 1)
    plain.stop()
    tid, loc = table.table_id, table.location

    # 1. Readers first: a service without a background backfiller, so the repair is the readers' doing.
    data1, key1 = commit_body("wal-1", CLOCK.next()), str(uuid.uuid4())
    name1 = _ratify_then_kill(backend, tid, loc, 1, data1, key1)
    (reader,) = start_services(backend, 1, {"COMMIT_OWNER_BACKFILL": "false"})
    try:
        c = CommitOwnerClient(reader.endpoint, timeout=20, deadline=30)
        listed = c.get_commits(tid)
        assert listed.latest_table_version == 1
        assert [(x.version, x.file_name) for x in listed.commits] == [(1, name1)]
        assert backend.read(staged_file(loc, "_commits", name1)) == data1  # there before the answer
        # the writer's retry with its key hears the outcome: version 1, the same file
        assert c.commit(tid, 1, data1, idempotency_key=key1).file_name == name1
        # a writer that missed version 1 is told of it, with its file there
        with pytest.raises(CommitFailedError) as lost:
            c.commit(tid, 1, commit_body("wal-other", CLOCK.next()))
        assert lost.value.conflict and [u["fileName"] for u in lost.value.unseen_commits or []] == [name1]
        c.backfill_to_version(tid, 1)
        assert backend.read(delta_file(loc, 1)) == data1
    finally:
        reader.stop()

    # 2. Nobody reads: the restarted service's backfiller publishes the version from its row, staged file too.
    data2, key2 = commit_body("wal-2", CLOCK.next()), str(uuid.uuid4())
    name2 = _ratify_then_kill(backend, tid, loc, 2, data2, key2)
    (svc,) = start_services(backend, 1)
    try:
        wait_until(lambda: backend.exists(delta_file(loc, 2)), timeout=30, what="version 2 published")
        assert backend.read(delta_file(loc, 2)) == data2
        assert backend.read(staged_file(loc, "_commits", name2)) == data2
        c = CommitOwnerClient(svc.endpoint, timeout=20, deadline=30)
        assert c.get_commits(tid).latest_table_version == 2
        # every staged file of the table is a ratified one: the killed attempts left no second file
        staged = sorted(n for n in backend.list(f"{loc}/_delta_log/_commits") if n.endswith(".json"))
        assert staged == sorted([name1, name2])
        try:  # the next commit goes on from there
            assert c.commit(tid, 3, commit_body("wal-3", CLOCK.next())).version == 3
        except CommitOwnerError as e:  # pragma: no cover - the message says what broke
            pytest.fail(f"commit after recovery failed: {e}")
    finally:
        svc.stop()


@pytest.mark.parametrize("db,storage", [("postgres", "local"), ("sqlite", "s3")])
def test_a_kill_while_a_commit_publishes_itself_loses_nothing_and_its_staged_file_is_there(
    request: pytest.FixtureRequest, db: str, storage: str,
) -> None:
    """Decisions 61, 65 (``publish_with_commit``): a commit that its process publishes before answering has its staged
    file first. The service is killed while ``<v>.json`` is being written (the publication of version 2 hangs)."""
    backend = make_backend(request, db, storage, f"wal-own-{db}-{storage}")
    (plain,) = start_services(backend, 1)
    (table,) = make_tables(plain, 1)
    plain.stop()
    tid, loc = table.table_id, table.location
    hangs = {STORAGE_FAULTS: f"latency_ms=60000;match=_delta_log/{2:020d}.json",
             "COMMIT_OWNER_PUBLISH_WITH_COMMIT": "true",
             "COMMIT_OWNER_BACKFILL_LEASE_SECONDS": "10"}  # held surely for 5 s: version 2 publishes itself
    (svc,) = start_services(backend, 1, hangs)
    data1, data2, key2 = commit_body("own-1", CLOCK.next()), commit_body("own-2", CLOCK.next()), str(uuid.uuid4())
    outcome: list[BaseException | None] = []
    try:
        c = CommitOwnerClient(svc.endpoint, timeout=20, deadline=30)
        c.commit(tid, 1, data1)
        wait_until(lambda: c.get_table(tid).latest_backfilled_version == 1, timeout=30, what="version 1 published")

        def send() -> None:
            try:
                CommitOwnerClient(svc.endpoint, timeout=90, deadline=90).commit(tid, 2, data2, idempotency_key=key2)
                outcome.append(None)
            except BaseException as e:  # noqa: BLE001 - the kill cuts the request: any failure is expected
                outcome.append(e)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        wait_until(lambda: 2 in db_commit_files(backend.database_url, tid), timeout=30,
                   what="version 2 ratified in the database")
        name2 = db_commit_files(backend.database_url, tid)[2]
        wait_until(lambda: backend.exists(staged_file(loc, "_commits", name2)), timeout=30,
                   what="version 2's staged file, written before its publication")
    finally:
        svc.kill()
    sender.join(30)
    assert outcome and outcome[0] is not None, "the writer must not have been acknowledged: its publication hung"
    assert backend.read(staged_file(loc, "_commits", name2)) == data2
    assert not backend.exists(delta_file(loc, 2))

    (reader,) = start_services(backend, 1, {"COMMIT_OWNER_BACKFILL": "false"})
    try:
        c = CommitOwnerClient(reader.endpoint, timeout=20, deadline=30)
        listed = c.get_commits(tid)
        assert [(x.version, x.file_name) for x in listed.commits] == [(2, name2)]
        assert c.commit(tid, 2, data2, idempotency_key=key2).file_name == name2  # the retry hears the outcome
        c.backfill_to_version(tid, 2)
        assert backend.read(delta_file(loc, 2)) == data2
    finally:
        reader.stop()
