"""The commit-owner contract (the scenarios Delta's own coordinator suites check: A01-A19, K01, K02, K05, K06, K12) on every backend
(SQLite / PostgreSQL x local disk / S3) and backfill batch size (1, 2, 100)."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from client import (
    CommitFailedError,
    CommitVersionConflictError,
    InvalidArgumentError,
    InvalidCommitError,
)
from tests.support import Backend, Service, actions, db_commit_files, delta_file, ndjson, next_ict, wait_until


def new_table(service: Service) -> tuple[str, str]:
    """Register a new table (currentVersion -1) and write version 0 the way a client does."""
    b: Backend = service.backend
    loc = b.new_location()
    info = service.client().register_table(loc, current_version=-1)
    b.write(delta_file(loc, 0), ndjson(actions(0) + [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7}}]))
    return info.table_id, loc


def published(service: Service, loc: str, v: int) -> bool:
    return service.backend.exists(delta_file(loc, v))


def wait_policy(service: Service, table_id: str, v: int) -> None:
    """Backfill runs in the background: wait until the batch policy's versions (<= v - v mod B) are published."""
    b = service.batch_size  # type: ignore[attr-defined]
    target = v - v % b
    c = service.client()
    wait_until(lambda: c.get_table(table_id).latest_backfilled_version >= target, what=f"backfill through {target}")


def check_invariants(service: Service, table_id: str, loc: str) -> None:
    page = service.client().get_commits(table_id)
    versions = [c.version for c in page.commits]
    if versions:  # A07, A08
        assert versions[-1] == page.latest_table_version
        assert versions == list(range(versions[0], versions[-1] + 1))
    first = versions[0] if versions else page.latest_table_version + 1
    for v in range(0, first):  # A09: everything below the first tracked version is published
        data = service.backend.read(delta_file(loc, v))
        assert "commitInfo" in json.loads(data.split(b"\n")[0])


def test_commit_version_0_is_refused_as_fatal(service: Service) -> None:  # A01
    table_id, loc = new_table(service)
    with pytest.raises(InvalidCommitError) as e:
        service.client().commit(table_id, 0, actions())
    assert (e.value.retryable, e.value.conflict) == (False, False)
    assert e.value.message == "Commit version 0 must go via filesystem."
    assert service.backend.list(f"{loc}/_delta_log/_commits") == []


def test_new_table_reports_no_commits_and_latest_minus_one(service: Service) -> None:  # A02, A03, K05, K06
    c = service.client()
    loc = service.backend.new_location()
    info = c.register_table(loc, current_version=-1)
    assert info.table_conf == {"tableId": info.table_id}
    assert info.latest_table_version == -1
    service.backend.write(delta_file(loc, 0), ndjson(actions(0)))
    page = c.get_commits(info.table_id)
    assert page.commits == [] and page.latest_table_version == -1
    first = json.loads(service.backend.read(delta_file(loc, 0)).split(b"\n")[0])
    assert "inCommitTimestamp" in first["commitInfo"]


def test_sequential_commits_follow_the_batch_policy(service: Service) -> None:  # A04, A05, A07-A09
    c = service.client()
    table_id, loc = new_table(service)
    b = service.batch_size  # type: ignore[attr-defined]
    bodies = {}
    for v in range(1, 9):
        acts = actions(2)
        r = c.commit(table_id, v, acts)
        bodies[v] = ndjson(acts)
        assert r.version == v and r.commit_timestamp == acts[0]["commitInfo"]["inCommitTimestamp"]
        assert c.get_commits(table_id).latest_table_version == v
        wait_policy(service, table_id, v)
        tracked = [x.version for x in c.get_commits(table_id).commits]
        if b <= 8:
            assert tracked == list(range(v - v % b + 1, v + 1))
        for p in range(1, v - v % b + 1):
            assert service.backend.read(delta_file(loc, p)) == bodies[p]
        check_invariants(service, table_id, loc)
    # the staged files hold the exact bytes
    page = c.get_commits(table_id)
    for cm in page.commits:
        assert service.backend.read(cm.path) == bodies[cm.version]


def test_backfill_to_unratified_version_is_invalid_argument(service: Service) -> None:  # A06, A12
    c = service.client()
    table_id, loc = new_table(service)
    for v in range(1, 9):
        c.commit(table_id, v, actions())
    before = service.backend.snapshot(loc)
    with pytest.raises(InvalidArgumentError):
        c.backfill_to_version(table_id, 10)
    assert not published(service, loc, 9)
    assert set(service.backend.snapshot(loc)) <= set(before) | {f"/_delta_log/{v:020d}.json" for v in range(9)}


def test_get_commits_ranges_return_only_unbackfilled_commits_in_range(service: Service) -> None:  # A10
    c = service.client()
    table_id, _ = new_table(service)
    for v in range(1, 16):
        c.commit(table_id, v, actions())
    wait_policy(service, table_id, 15)
    tracked_all = [x.version for x in c.get_commits(table_id).commits]
    for start, end in [(None, None), (9, None), (11, 14), (12, 12), (None, 14)]:
        page = c.get_commits(table_id, start, end)
        assert page.latest_table_version == 15
        want = [v for v in tracked_all if (start is None or v >= start) and (end is None or v <= end)]
        assert [x.version for x in page.commits] == want


def test_backfill_to_version_publishes_and_is_idempotent(service: Service) -> None:  # A11, backfillToVersion
    c = service.client()
    table_id, loc = new_table(service)
    for v in range(1, 6):
        c.commit(table_id, v, actions())
    t = c.backfill_to_version(table_id, 5)
    assert t.latest_backfilled_version >= 5
    assert all(published(service, loc, v) for v in range(0, 6))
    assert c.get_commits(table_id).commits == []
    again = c.backfill_to_version(table_id, 3, last_known_backfilled_version=5)
    assert again.latest_backfilled_version == 5
    assert c.get_commits(table_id).latest_table_version == 5


def test_version_mismatches_are_classified(service: Service) -> None:  # A13-A18, K02
    c = service.client()
    table_id, loc = new_table(service)
    for v in range(1, 5):
        c.commit(table_id, v, actions())
    with pytest.raises(InvalidCommitError) as e0:  # A13
        c.commit(table_id, 0, actions())
    assert (e0.value.retryable, e0.value.conflict) == (False, False)
    with pytest.raises(CommitVersionConflictError) as e4:  # A14
        c.commit(table_id, 4, actions())
    assert (e4.value.retryable, e4.value.conflict) == (True, True)
    assert e4.value.message == "Commit version 4 is not valid. Expected version: 5."
    assert e4.value.latest_table_version == 4
    assert c.commit(table_id, 5, actions()).version == 5  # A15
    assert c.get_commits(table_id).latest_table_version == 5
    with pytest.raises(CommitVersionConflictError) as e3:  # A16
        c.commit(table_id, 3, actions())
    assert "Expected version: 6." in e3.value.message
    before = service.backend.snapshot(loc)
    with pytest.raises(InvalidCommitError) as e7:  # A17
        c.commit(table_id, 7, actions())
    assert (e7.value.retryable, e7.value.conflict) == (False, False)
    assert e7.value.message == "Commit version 7 is not valid. Expected version: 6."
    for err in (e4.value, e3.value, e7.value):  # A18
        assert err.retryable == err.conflict
    # a refused commit leaves no file behind (its orphan is removed at once)
    staged_before = {k for k in before if "/_commits/" in k}
    staged_after = {k for k in service.backend.snapshot(loc) if "/_commits/" in k}
    assert staged_after == staged_before
    assert c.get_commits(table_id).latest_table_version == 5


def test_concurrent_writers_lose_nothing_and_duplicate_nothing(service: Service) -> None:  # A19, K01
    table_id, loc = new_table(service)
    # 11 x 11 as Delta's suite does on local disk; 8 writers x 4 on S3, where every lost race costs
    # several round trips to the moto server and the race itself is the same.
    writers, per_writer = (11, 11) if service.backend.storage == "local" else (8, 4)
    results: dict[int, list] = {}
    rejections: list[CommitFailedError] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        c = service.client()
        done = 0
        while done < per_writer:
            latest = c.get_commits(table_id).latest_table_version
            v = max(latest + 1, 1)
            acts = actions(1, tag=f"w{w}-")
            try:
                r = c.commit(table_id, v, acts)
            except CommitFailedError as e:
                with lock:
                    rejections.append(e)
                continue
            assert r.version == v
            assert r.commit_timestamp == acts[0]["commitInfo"]["inCommitTimestamp"]
            with lock:
                results.setdefault(v, []).append((w, ndjson(acts)))
            done += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = writers * per_writer
    assert sorted(results) == list(range(1, total + 1))
    assert all(len(v) == 1 for v in results.values())
    for e in rejections:
        # losing the race is (true,true); an out-of-order timestamp is a fatal refusal of that attempt
        assert (e.retryable, e.conflict) == (True, True) or "inCommitTimestamp" in e.message, e
    c = service.client()
    c.backfill_to_version(table_id, total)
    check_invariants(service, table_id, loc)
    for v, [(_w, body)] in results.items():
        assert service.backend.read(delta_file(loc, v)) == body
    # at most one staged file per version, each the one the database names (every losing attempt's file was
    # removed); every version has its own (decision 67), and every version is published
    staged = service.backend.list(f"{loc}/_delta_log/_commits")
    versions = sorted(int(n.split(".")[0]) for n in staged)
    assert versions == list(range(1, total + 1))
    named = db_commit_files(service.backend.database_url, table_id)
    assert sorted(named) == list(range(1, total + 1))
    assert all(named[int(n.split(".")[0])] == n for n in staged), (staged, named)


def test_retry_with_same_idempotency_key_returns_the_same_version(service: Service) -> None:  # K12
    c = service.client()
    table_id, loc = new_table(service)
    key = str(uuid.uuid4())
    acts = actions()
    first = c.commit(table_id, 1, acts, idempotency_key=key)
    # the staged file is there, holding the bytes (the database is its write-ahead log: decision 43)
    assert service.backend.read(f"{loc}/_delta_log/_commits/{first.file_name}") == ndjson(acts)
    c.commit(table_id, 2, actions())
    again = c.commit(table_id, 1, acts, idempotency_key=key)
    assert again == first
    c.backfill_to_version(table_id, 2)
    assert c.commit(table_id, 1, acts, idempotency_key=key) == first  # even after backfill
    with pytest.raises(CommitFailedError) as e:
        c.commit(table_id, 1, actions(), idempotency_key=key)
    assert e.value.code == "IDEMPOTENCY_KEY_REUSED"
    assert c.get_commits(table_id).latest_table_version == 2
    assert service.backend.read(delta_file(loc, 1)) == ndjson(acts)


def test_non_increasing_in_commit_timestamp_is_refused(service: Service) -> None:
    c = service.client()
    table_id, loc = new_table(service)
    ict = next_ict()
    c.commit(table_id, 1, actions(ict=ict))
    before = service.backend.snapshot(loc)
    with pytest.raises(InvalidCommitError) as e:
        c.commit(table_id, 2, actions(ict=ict))
    assert "inCommitTimestamp" in e.value.message
    assert (e.value.retryable, e.value.conflict) == (False, False)
    assert {k for k in service.backend.snapshot(loc) if "_commits/" in k} == {k for k in before if "_commits/" in k}
    assert c.get_commits(table_id).latest_table_version == 1
