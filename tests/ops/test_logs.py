"""The access log: one JSON line per request with request id, table id, version, outcome and duration;
credentials never written."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.runtime.logs import _PATTERNS, redact
from tests.ops.helpers import access_lines, call, post_commit
from tests.support import Service, actions, create_owned_table, wait_until

SECRETS = ("s3cr3t-bearer-value", "qwerty-query-token", "dbpass-123")


def line_for(svc: Service, request_id: str) -> dict[str, Any]:
    wait_until(lambda: any(r.get("request_id") == request_id for r in access_lines(svc)), timeout=5,
               what=f"the access log line of {request_id}")
    [rec] = [r for r in access_lines(svc) if r.get("request_id") == request_id]
    return rec


def test_a_commit_gets_one_access_line_with_its_request_id_table_version_and_outcome(manual_service: Service) -> None:
    svc = manual_service
    table_id, _ = create_owned_table(svc)
    status, headers, _ = post_commit(svc, table_id, 1, actions(),
                                     headers={"X-Request-Id": "ops-log-1", "Authorization": f"Bearer {SECRETS[0]}"})
    assert status == 200 and headers["X-Request-Id"] == "ops-log-1"
    rec = line_for(svc, "ops-log-1")
    assert rec["table_id"] == table_id and int(rec["version"]) == 1
    assert rec["outcome"] == "ok" and rec["status"] == 200 and rec["method"] == "POST"
    assert isinstance(rec["duration_ms"], float) and rec["duration_ms"] > 0
    assert rec["path"] == f"/api/v1/tables/{table_id}/commits"

    # a refused commit: the error code is the outcome
    status, headers, body = post_commit(svc, table_id, 1, actions(), headers={"X-Request-Id": "ops-log-2"})
    assert status == 409 and headers["X-Request-Id"] == "ops-log-2"
    rec = line_for(svc, "ops-log-2")
    assert rec["outcome"] == "COMMIT_VERSION_CONFLICT" and rec["status"] == 409 and rec["table_id"] == table_id


def test_a_request_without_an_id_gets_one_that_is_logged(manual_service: Service) -> None:
    status, headers, _ = call(manual_service, "GET", "/api/v1/tables")
    assert status == 200
    rid = headers["X-Request-Id"]
    assert len(rid) >= 16
    assert line_for(manual_service, rid)["path"] == "/api/v1/tables"


def test_tokens_never_reach_the_log(manual_service: Service) -> None:
    svc = manual_service
    table_id, _ = create_owned_table(svc)
    status, _, body = post_commit(svc, table_id, 1, actions(), query=f"&token={SECRETS[1]}",
                                  headers={"X-Request-Id": "ops-log-3", "Authorization": f"Bearer {SECRETS[0]}"})
    assert status == 400 and body["error"]["code"] == "INVALID_ARGUMENT"  # unknown query parameter
    rec = line_for(svc, "ops-log-3")
    assert rec["outcome"] == "INVALID_ARGUMENT" and "token=***" in rec["msg"]
    text = svc.log_text()
    for secret in SECRETS[:2]:
        assert secret not in text


def test_redaction_covers_headers_queries_and_urls() -> None:
    assert redact("Authorization: Bearer abc.def") == "Authorization: Bearer ***"
    assert redact("got bearer abc123 from x") == "got bearer *** from x"
    assert redact("/x?version=1&token=abc&access_token=def") == "/x?version=1&token=***&access_token=***"
    assert redact(f"postgresql+psycopg://owner:{SECRETS[2]}@db/x") == "postgresql+psycopg://owner:***@db/x"
    assert redact("version=3 outcome=ok") == "version=3 outcome=ok"


def _redact_by_patterns(text: str) -> str:
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


_PIECES = ["Authorization", "AUTHORIZATION: ", "bearer ", "Bearer\t", "token=", "Access_Token=", "secret=",
           "SECRET=", "password=", "api_key=", "apikey=", "signature=", "postgresql://", "u:p@", "://x:y@h/",
           "ſecret=", "to\u212aen=", "version=3", "&", "?", " ", "/", "abc", "dco_1.xyz", ":", "=", "@", "\n", "é"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12))
def test_redaction_markers_never_let_a_credential_through(pieces: list[str]) -> None:
    """The quick marker test in redact() skips the patterns only where none of them could match."""
    text = "".join(pieces)
    assert redact(text) == _redact_by_patterns(text)


def test_a_unity_catalog_commit_is_logged_with_its_table_id(manual_service: Service) -> None:
    """The table of a Unity Catalog commit is named in its body, not its path: the access line still names it
    (here a refused one: the table is not a MANAGED table of the catalog)."""
    svc = manual_service
    table_id, location = create_owned_table(svc)
    body = {"table_id": table_id, "table_uri": location,
            "commit_info": {"version": 1, "file_name": "x.json", "file_size": 1, "timestamp": 1,
                            "file_modification_timestamp": 1}}
    status, _, reply = call(svc, "POST", "/api/2.1/unity-catalog/delta/preview/commits", json.dumps(body).encode(),
                            {"Content-Type": "application/json", "X-Request-Id": "ops-log-uc"})
    assert status == 400 and "not a MANAGED table" in str(reply), reply
    rec = line_for(svc, "ops-log-uc")
    assert rec["table_id"] == table_id and rec["outcome"] == "INVALID_ARGUMENT", rec
