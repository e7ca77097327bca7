"""A writer's clock that runs ahead cannot brick a table; one that lags still makes progress.

Once an ``inCommitTimestamp`` is ratified, every later commit of the table must be stamped after it (Delta's rule:
new timestamp = max(now, previous + 1)). A commit stamped years ahead would make every writer with a correct clock
fail; the owner refuses a timestamp more than ``max_clock_skew_seconds`` ahead of its own clock.
"""

from __future__ import annotations

import json
import time

from client.spark.actions import next_in_commit_timestamp
from tests.support import Service, data_commit, next_ict
from tests.validation.helpers import delta_rs_reads, post_commit, published, ready_table, state

YEAR_2033 = 1_999_999_999_000


def body(ict: int) -> bytes:
    return (json.dumps({"commitInfo": {"inCommitTimestamp": ict, "operation": "WRITE"}}) + "\n").encode()


def test_a_far_future_timestamp_is_refused_naming_the_writers_clock_and_changes_nothing(svc: Service) -> None:
    table_id, loc = ready_table(svc)
    picture = state(svc)
    before = picture.take()
    status, payload = post_commit(svc, table_id, 2, body(YEAR_2033))
    assert (status, payload["error"]["code"]) == (400, "INVALID_COMMIT"), payload
    message = payload["error"]["message"]
    assert "inCommitTimestamp 1999999999000 (2033-05-18T03:33:19.000Z)" in message, message
    assert "ahead of the owner's clock" in message and "The writer's clock is off" in message, message
    assert "max_clock_skew_seconds" in message and "5.0 minutes" in message, message
    assert picture.take() == before
    # afterwards a writer with a real clock commits, and the table reads
    commit = data_commit(svc.backend, loc, [4])
    assert svc.client().commit(table_id, 2, commit).version == 2
    published(svc, table_id, 2)
    delta_rs_reads(svc, loc, 2)


def test_a_timestamp_within_the_allowed_skew_is_accepted_and_a_lagging_writer_still_progresses(
        svc: Service) -> None:
    table_id, loc = ready_table(svc)
    ahead = int(time.time() * 1000) + 60_000  # one minute fast: inside the 5-minute default
    assert post_commit(svc, table_id, 2, body(ahead))[0] == 200
    # A writer whose clock says "now" would stamp a timestamp below the previous one: refused ...
    lagging = next_ict()
    status, payload = post_commit(svc, table_id, 3, body(lagging))
    assert (status, payload["error"]["code"]) == (400, "INVALID_COMMIT"), payload
    assert f"inCommitTimestamp {lagging} must be greater than the previous commit's {ahead}" in \
        payload["error"]["message"]
    # ... so it follows Delta's rule, max(now, previous + 1), and makes progress.
    stamped = next_in_commit_timestamp(ahead)
    assert stamped == ahead + 1
    assert post_commit(svc, table_id, 3, body(stamped))[0] == 200
    published(svc, table_id, 3)
    delta_rs_reads(svc, loc, 3)


def test_the_allowed_skew_is_a_setting(request) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import make_backend

    b = make_backend(request, "sqlite", "local", "validation-skew")
    s = Service(b, extra_env={"COMMIT_OWNER_MAX_CLOCK_SKEW_SECONDS": "2"}).start()
    try:
        table_id, _ = ready_table(s)
        status, payload = post_commit(s, table_id, 2, body(int(time.time() * 1000) + 30_000))
        assert (status, payload["error"]["code"]) == (400, "INVALID_COMMIT"), payload
        assert "at most 2.000 s is allowed" in payload["error"]["message"], payload
    finally:
        s.stop()


def test_the_allowed_skew_must_be_positive() -> None:
    import pytest

    from coordinator.runtime.settings import Settings

    for bad in ("0", "-5"):
        with pytest.raises(ValueError, match="max_clock_skew_seconds must be > 0"):
            Settings.load(environ={"COMMIT_OWNER_MAX_CLOCK_SKEW_SECONDS": bad})
