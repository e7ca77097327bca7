"""Input validation: size limits, malformed NDJSON, unknown parameters and fields, bad versions and ids.

Every refusal is a clear 4xx in the one error envelope, names what was wrong without echoing secrets or
the service's own paths, and leaves the database and storage unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.conftest import make_backend
from tests.security.conftest import State, call
from tests.support import Service, actions, delta_file, ndjson, version0, wait_until

MAX_BODY, MAX_LINE = 8192, 2048
NDJSON = {"Content-Type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def svc(request: pytest.FixtureRequest) -> Iterator[Service]:
    b = make_backend(request, "sqlite", "local", "sec-input")
    s = Service(b, extra_env={"COMMIT_OWNER_MAX_BODY_BYTES": str(MAX_BODY),
                              "COMMIT_OWNER_MAX_LINE_BYTES": str(MAX_LINE)}).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def table(svc: Service) -> tuple[str, str]:
    loc = svc.backend.new_location()
    info = svc.client().register_table(loc)
    svc.backend.write(delta_file(loc, 0), ndjson(version0()))
    svc.client().commit(info.table_id, 1, actions())
    # the backfill after the commit runs in the background: let it finish before pictures are taken
    wait_until(lambda: svc.client().get_table(info.table_id).latest_backfilled_version == 1, what="backfill of v1")
    return info.table_id, loc


def refused(svc: Service, method: str, path: str, body: bytes | None, headers: dict[str, str] | None,
            status: int, code: str, fragment: str = "") -> dict:
    state = State(svc.backend, "file://" + str(svc.backend.tmp))
    before = state.take()
    got, payload, _ = call(svc.endpoint, method, path, body, headers=headers)
    assert (got, payload["error"]["code"]) == (status, code), (path, payload)
    message = payload["error"]["message"]
    assert fragment in message, message
    assert str(svc.backend.tmp) not in message and "Traceback" not in message
    assert state.take() == before
    return payload


def test_an_oversized_commit_body_is_413(svc: Service, table: tuple[str, str]) -> None:
    tid, _ = table
    body = ndjson(actions(n_adds=200))
    assert len(body) > MAX_BODY
    refused(svc, "POST", f"/api/v1/tables/{tid}/commits?version=2", body, NDJSON, 413, "PAYLOAD_TOO_LARGE",
            str(MAX_BODY))


def test_an_oversized_registration_body_is_413(svc: Service) -> None:
    body = json.dumps({"location": svc.backend.new_location(), "commitDir": "x" * MAX_BODY}).encode()
    refused(svc, "POST", "/api/v1/tables", body, None, 413, "PAYLOAD_TOO_LARGE")


def test_an_oversized_line_is_refused_naming_it(svc: Service, table: tuple[str, str]) -> None:
    tid, _ = table
    acts = actions()
    acts[0]["commitInfo"]["operationParameters"] = {"note": "n" * (MAX_LINE + 10)}
    refused(svc, "POST", f"/api/v1/tables/{tid}/commits?version=2", ndjson(acts), NDJSON, 400, "INVALID_COMMIT",
            f"line 1 is longer than {MAX_LINE} bytes")


GOOD = json.dumps(actions()[0]).encode()


@pytest.mark.parametrize("body,fragment", [
    (GOOD + b'\n"add"\n', "line 2 must be a JSON object"),
    (GOOD + b"\n42\n", "line 2 must be a JSON object"),
    (GOOD + b'\n{"add":{"path":"a"}} trailing\n', "line 2 is not valid JSON"),
    (b"\xef\xbb\xbf" + GOOD + b"\n", "line 1 is not valid JSON"),  # a byte-order mark
    (GOOD + b'\n{"add":{"path":"a\x00"}}\n', "line 2 is not valid JSON"),
    (GOOD + b"\n" + GOOD + b"\n", "commitInfo must be the first action, and only once"),
    (GOOD + b'\n{"add":"path"}\n', "must be a JSON object"),
    (GOOD + b'\n{"metaData":{"configuration":[1]}}\n', "line 2: metaData.id is required"),
    (GOOD + b"\n" + json.dumps({"metaData": {**version0()[2]["metaData"], "configuration": [1]}}).encode() + b"\n",
     "line 2: metaData.configuration must be a map of string to string"),
    (b'{"commitInfo":{"inCommitTimestamp":"12"}}\n', "inCommitTimestamp"),
    (b'{"commitInfo":{"inCommitTimestamp":1.5}}\n', "inCommitTimestamp"),
    (b'{"commitInfo":{"inCommitTimestamp":true}}\n', "inCommitTimestamp"),
    (b'{"commitInfo":{"inCommitTimestamp":-3}}\n', "inCommitTimestamp"),
    (b"{}\n", "exactly one action key"),
    (b"\n", "line 1 is empty"),
])
def test_malformed_ndjson_is_refused_and_changes_nothing(svc: Service, table: tuple[str, str], body: bytes,
                                                         fragment: str) -> None:
    tid, _ = table
    refused(svc, "POST", f"/api/v1/tables/{tid}/commits?version=2", body, NDJSON, 400, "INVALID_COMMIT", fragment)


BAD_ID = "00000000-0000-0000-0000-00000000000g"


@pytest.mark.parametrize("method,path,body,headers,fragment", [
    ("POST", "/api/v1/tables/{tid}/commits?version=2&force=1", "commit", NDJSON, "'force'"),
    ("POST", "/api/v1/tables/{tid}/commits?version=2&version=3", "commit", NDJSON, "more than once"),
    ("POST", "/api/v1/tables/{tid}/commits?version=two", "commit", NDJSON, "version must be an integer"),
    ("POST", "/api/v1/tables/{tid}/commits?version=1.0", "commit", NDJSON, "version must be an integer"),
    ("POST", "/api/v1/tables/{tid}/commits?version=99999999999999999999", "commit", NDJSON, "out of range"),
    ("POST", "/api/v1/tables/{tid}/commits", "commit", NDJSON, "version is required"),
    ("POST", "/api/v1/tables/{tid}/commits?version=2", "commit", {**NDJSON, "Idempotency-Key": "k-1"},
     "Idempotency-Key must be a UUID"),
    ("POST", "/api/v1/tables/{tid}/commits?version=2", "commit", {"Content-Type": "image/png"}, "Content-Type"),
    ("POST", f"/api/v1/tables/{BAD_ID}/commits?version=2", "commit", NDJSON, "table id must be a UUID"),
    ("GET", "/api/v1/tables/{tid}/commits?startVersion=x", None, None, "startVersion must be an integer"),
    ("GET", "/api/v1/tables/{tid}/commits?startVersion=3&endVersion=1", None, None, "greater than"),
    ("GET", "/api/v1/tables/{tid}/commits?limit=5", None, None, "'limit'"),
    ("GET", "/api/v1/tables/{tid}?verbose=1", None, None, "'verbose'"),
    ("GET", "/api/v1/openapi.json?format=yaml", None, None, "'format'"),
    ("POST", "/api/v1/tables", b'{"location": "/x", "owner": "me"}', None, "'owner'"),
    ("POST", "/api/v1/tables", b'{"location": "/x", "' + b"k" * 500 + b'": 1}', None, "..."),
    ("POST", "/api/v1/tables", b'["/x"]', None, "must be a JSON object"),
    ("POST", "/api/v1/tables", b'{"location": 7}', None, "location is required and must be a string"),
    ("POST", "/api/v1/tables", b'{"location": "/x", "currentVersion": "3"}', None, "currentVersion must be an integer"),
    ("POST", "/api/v1/tables/{tid}/backfill", b'{"version": "1"}', None, "version must be an integer"),
    ("POST", "/api/v1/tables/{tid}/backfill", b'{"version": 1, "to": 2}', None, "'to'"),
    ("DELETE", "/api/v1/tables/{tid}?cascade=true", None, None, "'cascade'"),
])
def test_bad_parameters_and_fields_are_named_and_change_nothing(svc: Service, table: tuple[str, str], method: str,
                                                                path: str, body: bytes | str | None,
                                                                headers: dict | None, fragment: str) -> None:
    tid, _ = table
    data = ndjson(actions()) if body == "commit" else body
    payload = refused(svc, method, path.format(tid=tid), data, headers, 400, "INVALID_ARGUMENT", fragment)
    assert len(payload["error"]["message"]) < 400
