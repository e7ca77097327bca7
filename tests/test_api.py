"""The HTTP surface: one error envelope for every error source, readiness, schema checks, client imports."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.support import ROOT, Service, create_owned_table

ENVELOPE_KEYS = {"code", "message", "retryable", "conflict", "latestTableVersion"}


def call(svc: Service, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(svc.endpoint + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


@pytest.mark.parametrize(
    "method,path,body,status,code",
    [
        ("GET", "/api/v1/nowhere", None, 404, "NOT_FOUND"),
        ("DELETE", "/api/v1/tables", None, 405, "METHOD_NOT_ALLOWED"),
        ("POST", "/api/v1/tables", b"{not json", 400, "INVALID_ARGUMENT"),
        ("POST", "/api/v1/tables", b'{"location": "/x", "bogus": 1}', 400, "INVALID_ARGUMENT"),
        ("POST", "/api/v1/tables", b'{"location": "ftp://x/y"}', 400, "INVALID_ARGUMENT"),
        ("POST", "/api/v1/tables", b'{"location": "/x", "currentVersion": -5}', 400, "INVALID_ARGUMENT"),
        ("POST", "/api/v1/tables", b'{"location": "/x", "commitDir": "_elsewhere"}', 400, "INVALID_ARGUMENT"),
        ("GET", "/api/v1/tables/not-a-uuid", None, 400, "INVALID_ARGUMENT"),
        ("GET", "/api/v1/tables/00000000-0000-0000-0000-000000000000", None, 404, "TABLE_NOT_FOUND"),
        ("GET", "/api/v1/tables?location=/no/such/table", None, 404, "TABLE_NOT_FOUND"),
        ("GET", "/api/v1/tables?colour=blue", None, 400, "INVALID_ARGUMENT"),
        ("POST", "/api/v1/tables/00000000-0000-0000-0000-000000000000/commits?version=1",
         b'{"commitInfo":{"inCommitTimestamp":1}}\n', 404, "TABLE_NOT_FOUND"),
    ],
)
def test_every_error_source_answers_with_the_one_envelope(
    owner_service: Service, method: str, path: str, body: bytes | None, status: int, code: str
) -> None:
    def state() -> list[tuple[str, str, int]]:  # what a refusal must not change (backfill may still run)
        return [(t.table_id, t.location, t.latest_table_version) for t in owner_service.client().list_tables()]

    before = state()
    got, payload = call(owner_service, method, path, body,
                        {"Content-Type": "application/x-ndjson"} if body and b"commitInfo" in body else {})
    assert got == status
    assert set(payload) == {"error"} and set(payload["error"]) == ENVELOPE_KEYS
    assert payload["error"]["code"] == code
    assert isinstance(payload["error"]["message"], str) and payload["error"]["message"]
    assert "Traceback" not in payload["error"]["message"]
    assert state() == before


@pytest.mark.parametrize(
    "body,fragment",
    [
        (b"", "empty"),
        (b"not json\n", "line 1 is not valid JSON"),
        (b'{"commitInfo":{"inCommitTimestamp":5}}\n[1,2]\n', "line 2 must be a JSON object"),
        (b'{"commitInfo":{"inCommitTimestamp":5}}\n{"add":{},"remove":{}}\n', "exactly one action"),
        (b'{"commitInfo":{"inCommitTimestamp":5}}\n{"frobnicate":{}}\n', "unknown action"),
        (b'{"add":{"path":"a"}}\n', "first action must be commitInfo"),
        (b'{"commitInfo":{"timestamp":5}}\n', "inCommitTimestamp"),
        (b'{"commitInfo":{"inCommitTimestamp":5}}\n\n{"add":{}}\n', "line 2 is empty"),
        (b'\xff\xfe\n', "not UTF-8"),
    ],
)
def test_malformed_commit_bodies_are_refused_and_change_nothing(owner_service: Service, body: bytes,
                                                                fragment: str) -> None:
    table_id, loc = create_owned_table(owner_service)
    before = owner_service.backend.snapshot(loc)
    status, payload = call(owner_service, "POST", f"/api/v1/tables/{table_id}/commits?version=1", body,
                           {"Content-Type": "application/x-ndjson"})
    assert status == 400 and payload["error"]["code"] == "INVALID_COMMIT"
    assert fragment in payload["error"]["message"]
    assert (payload["error"]["retryable"], payload["error"]["conflict"]) == (False, False)
    assert owner_service.backend.snapshot(loc) == before
    assert owner_service.client().get_table(table_id).latest_table_version == -1


def test_registering_a_location_twice_is_table_already_exists(owner_service: Service) -> None:
    loc = owner_service.backend.new_location()
    c = owner_service.client()
    first = c.register_table(loc)
    status, payload = call(owner_service, "POST", "/api/v1/tables",
                           json.dumps({"location": loc.replace("file://", "") + "/./"}).encode())
    assert status == 409 and payload["error"]["code"] == "TABLE_ALREADY_EXISTS"
    assert [t.table_id for t in c.list_tables() if t.location == loc] == [first.table_id]


def test_health_and_readiness(owner_service: Service) -> None:
    assert call(owner_service, "GET", "/healthz")[0] == 200
    status, payload = call(owner_service, "GET", "/readyz")
    assert status == 200 and payload["checks"] == {"database": "ok", "storage": "ok"}


def test_serve_refuses_an_unmigrated_database(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite+aiosqlite:///{tmp_path}/empty.db"
    res = subprocess.run([sys.executable, "-m", "coordinator", "serve", "--database-url", url, "--port", "1"],
                         cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert res.returncode == 3
    assert "commit-owner migrate" in res.stderr and "schema" in res.stderr


def test_serve_refuses_a_database_at_an_older_revision(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from coordinator.store import migrate

    url = f"sqlite+aiosqlite:///{tmp_path}/old.db"
    migrate(url, revision="0001")  # the schema before the tokens migration
    res = subprocess.run([sys.executable, "-m", "coordinator", "serve", "--database-url", url, "--port", "1"],
                         cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert res.returncode == 3
    assert "revision 0001" in res.stderr and "commit-owner migrate" in res.stderr


def test_client_imports_without_the_servers_dependencies() -> None:
    code = (
        "import sys\n"
        "for m in ('aiohttp', 'sqlalchemy', 'psycopg', 'fsspec', 's3fs', 'orjson', 'alembic'):\n"
        "    sys.modules[m] = None\n"
        "import client\n"
        "c = client.CommitOwnerClient('http://127.0.0.1:1')\n"
        "print(client.CommitFailedError.__mro__[1].__name__)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "CommitOwnerError"
