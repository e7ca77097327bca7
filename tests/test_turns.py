"""Commits of one table take turns inside the process; a stale proposal is answered from memory.

Whatever shortcut the service takes, the database still decides: these tests check that a stale proposal
changes nothing, that a keyed retry is still replayed, and that a crowd of racing writers ends with one
file per version, contiguous versions and no orphan files.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

from client import CommitOwnerClient
from tests.support import Service, actions, create_owned_table, db_commit_files, ndjson


def _post(service: Service, table_id: str, version: int, body: bytes, key: str | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(f"{service.endpoint}/api/v1/tables/{table_id}/commits?version={version}",
                                 data=body, method="POST", headers={"Content-Type": "application/x-ndjson"})
    if key:
        req.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_stale_proposal_is_a_conflict_that_changes_nothing(owner_service: Service) -> None:
    s = owner_service
    table_id, loc = create_owned_table(s)
    c = s.client()
    c.commit(table_id, 1, actions())
    c.commit(table_id, 2, actions())
    c.backfill_to_version(table_id, 2)
    files = s.backend.snapshot(loc)
    rows = db_commit_files(s.backend.database_url, table_id)
    cases = [(ndjson(actions()), None), (b"{not json", None),  # even a malformed body: the version comes first
             (ndjson(actions()), "0b7e6d1e-8d53-4a0c-9a57-3f1e2d4c5b6a")]  # a key nobody used: no replay
    for body, key in cases:
        status, reply = _post(s, table_id, 2, body, key)
        assert status == 409, reply
        err = reply["error"]
        assert (err["code"], err["retryable"], err["conflict"], err["latestTableVersion"]) == \
            ("COMMIT_VERSION_CONFLICT", True, True, 2)
        assert "Expected version: 3" in err["message"]
    assert s.backend.snapshot(loc) == files
    assert db_commit_files(s.backend.database_url, table_id) == rows
    assert c.get_commits(table_id).latest_table_version == 2


def test_a_keyed_retry_of_an_old_version_is_still_replayed(owner_service: Service) -> None:
    s = owner_service
    table_id, _ = create_owned_table(s)
    key = "6f1c4a52-0a8e-4c61-9f57-2d7f0c1b9e11"
    body = ndjson(actions())
    status, first = _post(s, table_id, 1, body, key)
    assert status == 200
    s.client().commit(table_id, 2, actions())
    status, again = _post(s, table_id, 1, body, key)  # version 1 is old now, but this is its own retry
    assert status == 200 and again == first
    status, reply = _post(s, table_id, 1, ndjson(actions()), key)
    assert status == 422 and reply["error"]["code"] == "IDEMPOTENCY_KEY_REUSED", reply
    assert s.client().get_commits(table_id).latest_table_version == 2


def test_racing_writers_leave_one_file_per_version_and_no_orphans(owner_service: Service) -> None:
    s = owner_service
    table_id, loc = create_owned_table(s)
    acked: list[tuple[int, str]] = []
    lock = threading.Lock()

    def writer() -> None:
        c = CommitOwnerClient(s.endpoint)
        known = 0
        for _ in range(6):
            while True:
                status, reply = _post(s, table_id, known + 1, ndjson(actions()))
                if status == 200:
                    with lock:
                        acked.append((reply["version"], reply["fileName"]))
                    known = reply["version"]
                    break
                assert status == 409 and reply["error"]["conflict"], reply
                known = reply["error"]["latestTableVersion"]
        c.close()

    threads = [threading.Thread(target=writer) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(v for v, _ in acked) == list(range(1, 73))
    assert db_commit_files(s.backend.database_url, table_id) == dict(acked)
    staged = s.backend.list(f"{loc}/_delta_log/_commits")
    assert sorted(staged) == sorted(name for _, name in acked)  # every loser's file was removed
