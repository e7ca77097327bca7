"""The core behaviour suites on Azure (azurite) and Google Cloud Storage (fake-gcs-server), over SQLite and
PostgreSQL: the contract (commits in order, racing writers losing nothing and duplicating nothing, a retry with
the same idempotency key, backfill), a commit whose reply is lost and retried, the loser of a race told exactly
what it missed, Python writers racing through the client, and a foreign ``<v>.json`` fencing the table.

The suites are the very functions the local-disk and S3 runs collect; this folder's conftest.py gives them the
cloud backends (one behaviour suite over every backend).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from client.contract.layout import split_cloud
from tests.conftest import make_backend
from tests.inprocess import InProcess
from tests.lifecycle.matrix import QUIET
from tests.security.conftest import db_state
from tests.support import Backend, actions, delta_file, ndjson
from tests.test_conflicts import (  # noqa: F401  (collected here, on the cloud backends)
    test_racing_python_writers_rebase_on_the_carried_commits_and_land_once_each,
    test_the_loser_of_a_race_is_told_exactly_the_commits_it_has_not_seen,
)
from tests.test_contract import (  # noqa: F401
    test_backfill_to_unratified_version_is_invalid_argument,
    test_backfill_to_version_publishes_and_is_idempotent,
    test_commit_version_0_is_refused_as_fatal,
    test_concurrent_writers_lose_nothing_and_duplicate_nothing,
    test_get_commits_ranges_return_only_unbackfilled_commits_in_range,
    test_new_table_reports_no_commits_and_latest_minus_one,
    test_non_increasing_in_commit_timestamp_is_refused,
    test_retry_with_same_idempotency_key_returns_the_same_version,
    test_sequential_commits_follow_the_batch_policy,
    test_version_mismatches_are_classified,
)
from tests.test_idempotency import test_commit_retried_after_a_dropped_reply_yields_one_version  # noqa: F401


async def test_a_foreign_delta_file_fences_the_table_and_is_never_overwritten(
        request: pytest.FixtureRequest, cloud_backend: Backend) -> None:
    db, storage = cloud_backend.name.removeprefix("cloud-").split("-")
    app = await InProcess.start(make_backend(request, db, storage, f"{cloud_backend.name}-fence"), QUIET)
    try:
        table_id, loc = await app.create_table()
        for v in (1, 2):
            await app.commit_ok(table_id, v)
        await app.backfill_to(table_id, 1)
        foreign = ndjson(actions()) + (b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,'
                                       b'"dataChange":true}}\n')
        await asyncio.to_thread(app.backend.write, delta_file(loc, 2), foreign)  # someone bypassed the owner
        status, reply = await app.post_json(f"/api/v1/tables/{table_id}/backfill", {"version": 2})
        assert status >= 400, reply
        assert await asyncio.to_thread(app.backend.read, delta_file(loc, 2)) == foreign  # never overwritten
        status, table = await app.call("GET", f"/api/v1/tables/{table_id}")
        assert status == 200 and table["status"] == "FENCED", table
        before = (await asyncio.to_thread(db_state, app.backend.database_url),
                  await asyncio.to_thread(app.backend.snapshot, loc))
        status, reply = await app.commit(table_id, 3, ndjson(actions()), key=str(uuid.uuid4()))
        assert status == 409 and reply["error"]["code"] == "TABLE_NOT_ACCEPTING_COMMITS", reply
        after = (await asyncio.to_thread(db_state, app.backend.database_url),
                 await asyncio.to_thread(app.backend.snapshot, loc))
        assert after == before
    finally:
        await app.stop()


async def test_two_spellings_of_one_location_are_one_table_and_bad_ones_change_nothing(inproc: InProcess) -> None:
    s = inproc
    loc = s.backend.new_location()
    p = split_cloud(loc)
    if p.scheme == "abfss":  # the Blob host, the https:// form: the same table as the canonical spelling
        other = [f"wasbs://{p.bucket}@{p.account}.blob.core.windows.net/{p.key}/",
                 f"https://{p.account}.blob.core.windows.net/{p.bucket}/{p.key}"]
        bad = [f"az://{p.bucket}/{p.key}-x",  # no account
               f"abfss://{p.bucket}@otheraccount1.dfs.core.windows.net/{p.key}-x"]  # not the owner's account
    else:
        other = [f"gcs://{p.bucket}/{p.key}/"]
        bad = [f"gs://{p.bucket}-missing/{p.key}-x"]  # no such bucket
    status, first = await s.register(loc)
    assert status == 201, first
    before = (await asyncio.to_thread(db_state, s.backend.database_url),
              await asyncio.to_thread(s.backend.snapshot, loc))
    for spelling in other:
        status, reply = await s.register(spelling)
        assert status == 409 and reply["error"]["code"] == "TABLE_ALREADY_EXISTS", (spelling, reply)
    for spelling in bad:
        status, reply = await s.register(spelling)
        # spelled wrong: 400; another account or bucket than the allowed root's: 403 (tests/clouds/test_storage_seam.py
        # refuses an unknown container or bucket below an allowed root)
        assert (status, reply["error"]["code"]) in {(400, "INVALID_ARGUMENT"), (403, "LOCATION_NOT_ALLOWED")}, \
            (spelling, reply)
        assert reply["error"]["message"], reply
    after = (await asyncio.to_thread(db_state, s.backend.database_url),
             await asyncio.to_thread(s.backend.snapshot, loc))
    assert after == before
