"""Faults met by stock delta-spark 4.4 + ``UCSingleCatalog`` (``deltaRestApi.enabled=true``) against the owner.

The real client, not a model of it: each test runs tests/spark/uc_sql.py (one JVM) against a real ``commit-owner
serve`` (SQLite + local disk, bearer tokens) and injects one fault on the path of a commit (``updateTable`` with
``add-commit``); delta-spark reacts the way it does (docs: /work/shared/tools/uc-spark/TRANSCRIPT.md, "Errors
and retries": UC's HTTP client resends the same request on 429/5xx/socket errors, then delta's coordinator
resends the same staged file up to 15 more times; 409 rebases with a new file; 400/404 fail the statement).

1. The owner's reply to a commit is lost after the owner ratified it (a TCP proxy closes the client's
   connection instead of delivering the reply): the client resends the same request, the owner replays its
   ratification (200), the INSERT succeeds, the version is ratified once, from the one staged file.
2. The same, but the owner is SIGKILLed between ratifying and replying and restarted on the same database,
   storage and port: the resend reaches the new process, which replays the ratification.
3. A full backlog: ``COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS=1``, no background backfill, and a version another
   writer committed but never published: the real client's commit gets 429, resends, and succeeds once the
   test asks the owner to publish (``POST /api/v1/tables/{id}/backfill``) while the client is still retrying.

Not reachable from the real client, so not here: a stale etag or a wrong table uuid (delta-spark sends only
``assert-table-uuid``, taken from its own log); tests/delta/test_rest_api.py covers both at the HTTP level.
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_backend
from tests.security.conftest import call
from tests.spark.uc_support import Scenario, SparkProcess, access_log, judge_owner, result_rows, wait_ready
from tests.support import ReplyDroppingProxy, wait_until
from tests.unity.sail import UC, Owner, local_path, start_owner

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CATALOG = "rest"
TABLE = f"{CATALOG}.s.t"
TABLE_PATH = f"{UC}/delta/v1/catalogs/{CATALOG}/schemas/s/tables/t"
CREATE = [f"CREATE SCHEMA {CATALOG}.s", f"CREATE TABLE {TABLE} (id INT, part STRING) USING delta PARTITIONED BY (part)"]


def is_commit(request: bytes) -> bool:
    """updateTable of the test's table carrying an ``add-commit`` (not its /metrics, not a load)."""
    return request.startswith(f"POST {TABLE_PATH} ".encode()) and b'"add-commit"' in request


def commit_body(request: bytes) -> dict[str, Any]:
    """The JSON body of a raw HTTP/1.1 request (Content-Length framed, as delta-spark's client sends it)."""
    body: dict[str, Any] = json.loads(request.split(b"\r\n\r\n", 1)[1])
    return body


def added(body: dict[str, Any]) -> dict[str, Any]:
    commit: dict[str, Any] = next(u["commit"] for u in body["updates"] if u["action"] == "add-commit")
    return commit


def commit_answers(log_text: str) -> list[int]:
    """The statuses the owner answered to commits of the test's table, in order (its access log)."""
    return [int(r["status"]) for r in access_log(log_text) if r.get("method") == "POST" and r.get("path") == TABLE_PATH]


@pytest.fixture
def started() -> Iterator[list[Any]]:
    """Everything a test starts (Spark processes, owners, proxies), stopped at its end whatever happened."""
    things: list[Any] = []
    yield things
    for t in reversed(things):
        if isinstance(t, SparkProcess):
            if t.proc.poll() is None:
                t.proc.kill()
                t.proc.wait(30)
        elif isinstance(t, Owner):
            t.service.stop()
        elif isinstance(t, ReplyDroppingProxy):
            t.close()


def _owner(request: pytest.FixtureRequest, name: str, started: list[Any], **env: str) -> Owner:
    owner = start_owner(make_backend(request, "sqlite", "local", name), CATALOG, **env)
    started.append(owner)
    return owner


def _staged(location: str, version: int) -> list[str]:
    folder = local_path(location) / "_delta_log" / "_staged_commits"
    return sorted(p.name for p in folder.glob(f"{version:020d}.*.json"))


def _lost_reply(request: pytest.FixtureRequest, uc_jars: Path, tmp_path: Path, started: list[Any],
                kill: bool) -> None:
    """Tests 1 and 2: the reply to the first commit (version 1) never reaches delta-spark; with ``kill`` the
    owner is SIGKILLed once it has answered and restarted on the same port."""
    owner = _owner(request, "uc-fault-kill" if kill else "uc-fault-drop", started)
    killed = threading.Event()

    def kill_owner(_: bytes) -> None:
        owner.service.kill()
        killed.set()

    proxy = ReplyDroppingProxy(owner.service.port, drop=1, match=is_commit, before_drop=kill_owner if kill else None)
    started.append(proxy)
    s = Scenario(owner, uc_jars, tmp_path, True, uri=proxy.endpoint)
    p = s.start("spark", [*CREATE, f"INSERT INTO {TABLE} VALUES (1, 'a'), (2, 'b')",
                          f"INSERT INTO {TABLE} VALUES (3, 'c')", f"SELECT id, part FROM {TABLE}"])
    started.append(p)
    logs = ""
    if kill:
        wait_until(lambda: killed.is_set() or p.proc.poll() is not None, timeout=600, what="the commit's reply")
        assert killed.is_set(), f"delta-spark ended before its commit was answered: {p.results()}"
        dropped = commit_body(proxy.dropped_requests[0])
        table_id = dropped["requirements"][0]["uuid"]
        # The owner is down: it had ratified version 1 (the file named in the request) before it died.
        rows = owner.ratified(table_id)
        assert sorted(rows) == [1] and rows[1][:2] == (added(dropped)["file-name"], added(dropped)["file-size"]), rows
        logs = owner.service.log_text()
        owner.service.start()  # same database, storage and port: the proxy's next connection reaches it
    results = s.expect_ok(p, p.finish(), 5)
    logs += owner.service.log_text()

    assert proxy.dropped == 1 and len(proxy.dropped_requests) == 1
    dropped = commit_body(proxy.dropped_requests[0])
    assert added(dropped)["version"] == 1
    info = owner.uc("GET", f"/tables/{TABLE}")
    table_id, location = info["table_id"], info["storage_location"]
    assert dropped["requirements"] == [{"type": "assert-table-uuid", "uuid": table_id}]
    assert result_rows(results[-1], "id", "part") == [(1, "a"), (2, "b"), (3, "c")]
    judge_owner(s, table_id, location, 2)  # versions 1 and 2 ratified once each, published with those bytes
    # Version 1 is the file of the request whose reply was lost: the client resent it, wrote no second one.
    assert owner.ratified(table_id)[1][0] == added(dropped)["file-name"]
    assert _staged(location, 1) == [added(dropped)["file-name"]]
    answers = commit_answers(logs)
    # v1 answered 200 (lost), then 200 to the resend (a replay); v2 200. No 409 (no rebase), no 4xx.
    assert answers.count(200) >= 3 and all(a == 200 for a in answers), answers
    insert = results[2]
    print(f"\n[{'kill' if kill else 'drop'}] commit answers {answers}; connections refused while the owner was "
          f"down: {proxy.refused}; the INSERT whose reply was lost took {insert['seconds']} s")


def test_a_lost_reply_to_a_ratified_commit_is_resent_and_replayed(request: pytest.FixtureRequest, uc_jars: Path,
                                                                  tmp_path: Path, started: list[Any]) -> None:
    _lost_reply(request, uc_jars, tmp_path, started, kill=False)


def test_an_owner_killed_between_ratifying_and_replying_replays_after_restart(
        request: pytest.FixtureRequest, uc_jars: Path, tmp_path: Path, started: list[Any]) -> None:
    _lost_reply(request, uc_jars, tmp_path, started, kill=True)


def _commit_unpublished(owner: Owner, table_id: str, location: str, version: int, ids: list[int]) -> None:
    """Another writer's commit through /delta/v1 the way delta-spark makes one (a parquet file of partition
    ``part=z``, a staged commit file, ``add-commit``), never published by it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = local_path(location)
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int32())}), buf)
    data = f"part=z/part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    (root / data).parent.mkdir(parents=True, exist_ok=True)
    (root / data).write_bytes(buf.getvalue())
    ict = int(time.time() * 1000)
    stats = {"numRecords": len(ids), "minValues": {"id": min(ids)}, "maxValues": {"id": max(ids)},
             "nullCount": {"id": 0}}
    acts = [{"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "WRITE",
                            "operationParameters": {"mode": "Append", "partitionBy": "[]"}, "isBlindAppend": True}},
            {"add": {"path": data, "partitionValues": {"part": "z"}, "size": len(buf.getvalue()),
                     "modificationTime": ict, "dataChange": True, "stats": json.dumps(stats)}}]
    name = f"{version:020d}.{uuid.uuid4()}.json"
    staged = root / "_delta_log" / "_staged_commits" / name
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_text("".join(json.dumps(a, separators=(",", ":")) + "\n" for a in acts))
    owner.uc("POST", "/delta/v1/catalogs/rest/schemas/s/tables/t", {
        "requirements": [{"type": "assert-table-uuid", "uuid": table_id}],
        "updates": [{"action": "add-commit", "commit": {
            "version": version, "timestamp": ict, "file-name": name, "file-size": staged.stat().st_size,
            "file-modification-timestamp": int(staged.stat().st_mtime * 1000)}}]})


def test_a_full_backlog_is_429_and_the_resent_commit_succeeds_once_publication_catches_up(
        request: pytest.FixtureRequest, uc_jars: Path, tmp_path: Path, started: list[Any]) -> None:
    owner = _owner(request, "uc-fault-backlog", started, COMMIT_OWNER_BACKFILL="false",
                   COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS="1")
    s = Scenario(owner, uc_jars, tmp_path, True)
    gate = tmp_path / "committed"
    p = s.start("spark", [*CREATE, {"wait": str(gate)}, f"INSERT INTO {TABLE} VALUES (1, 'a'), (2, 'b')",
                          f"SELECT id, part FROM {TABLE}"])
    started.append(p)
    wait_ready(gate, 1, [p], s)
    info = owner.uc("GET", f"/tables/{TABLE}")
    table_id, location = info["table_id"], info["storage_location"]
    # Version 1 by a writer that never publishes it: the backlog (1 unpublished commit) is full.
    _commit_unpublished(owner, table_id, location, 1, [10])
    gate.touch()

    # Four 429s: UC's HTTP client resent the request twice, handed the third 429 to delta's commit coordinator,
    # which took it as retryable and sent the same staged file again (not a rebase, not a failure).
    wait_until(lambda: commit_answers(owner.service.log_text()).count(429) >= 4 or p.proc.poll() is not None,
               timeout=600, what="the owner to answer delta-spark's commit with 429 four times")
    assert commit_answers(owner.service.log_text()).count(429) >= 4, f"{p.results()} {s.refused()}"
    assert sorted(owner.ratified(table_id)) == [1]  # refused: nothing ratified for version 2
    # While delta-spark resends the same request, the owner publishes version 1.
    status, reply, _ = call(owner.service.endpoint, "POST", f"/api/v1/tables/{table_id}/backfill", b"{}",
                            token=owner.token)
    assert status == 200 and reply["latestBackfilledVersion"] == 1, reply
    results = s.expect_ok(p, p.finish(), 4)

    assert result_rows(results[-1], "id", "part") == sorted([(1, "a"), (2, "b"), (10, "z")], key=repr)
    judge_owner(s, table_id, location, 2)
    assert len(_staged(location, 2)) == 1, _staged(location, 2)  # every resend carried the same staged file
    answers = commit_answers(owner.service.log_text())
    # The other writer's 200, then 429 until publication caught up, then 200: no 409 (no rebase), nothing else.
    assert answers[0] == 200 and answers[-1] == 200 and set(answers[1:-1]) == {429}, answers
    print(f"\n[backlog] commit answers {answers}; the INSERT took {results[2]['seconds']} s")
