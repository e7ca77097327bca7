"""What a new user met: messages, help pages and documents that must say what the code does."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from client.contract.errors import CommitOwnerError
from tests.conftest import make_backend
from tests.ops.helpers import call
from tests.ops.test_cli import cli, cli_here
from tests.support import ROOT, Service, actions, create_owned_table, ndjson


def test_a_port_in_use_is_one_clear_line_and_nothing_claims_to_listen(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path}/owner.db"
    assert cli("migrate", "--create", "--database-url", db).returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        res = cli("serve", "--database-url", db, "--port", str(port), "--log-format", "text")
    assert res.returncode == 2
    assert "listening" not in res.stdout + res.stderr
    assert res.stderr.strip() == f"error: cannot listen on 127.0.0.1:{port}: address already in use"


def test_the_listening_line_comes_once_the_port_is_bound(request: pytest.FixtureRequest) -> None:
    svc = Service(make_backend(request, "sqlite", "local", "listen")).start()
    try:
        lines = [json.loads(line) for line in svc.log_text().splitlines() if line.startswith("{")]
        [listening] = [r for r in lines if "listening on" in r["msg"]]
        assert f"http://127.0.0.1:{svc.port}" in listening["msg"]
        # the start-up heap is out of the collector's passes before the first request (decision 60)
        frozen = re.search(r"; (\d+) start-up objects frozen", listening["msg"])
        assert frozen and int(frozen.group(1)) > 10_000, listening["msg"]
    finally:
        svc.stop()


def test_backfill_worker_help_lists_only_what_the_worker_uses() -> None:
    res = cli_here("backfill-worker", "--help")
    assert res.returncode == 0
    flags = set(re.findall(r"^\s+(--[a-z0-9-]+)", res.stdout, re.M))
    for unused in ("--host", "--port", "--auth", "--allow-location", "--allow-insecure-no-auth", "--event-loop",
                   "--max-body-bytes", "--max-line-bytes", "--commit-dir", "--janitor-interval-seconds"):
        assert unused not in flags, unused
    for used in ("--database-url", "--s3-endpoint-url", "--backfill-lease-seconds", "--backfill-batch-size",
                 "--log-level"):
        assert used in flags, used


# -- the commit body's Content-Type: code, OpenAPI document and docs/api.md agree -------------------------

def test_the_accepted_content_types_are_the_documented_ones() -> None:
    from coordinator.api.app import ROUTES
    from coordinator.api.commits import NDJSON
    from coordinator.api.openapi import build_document
    from coordinator.api.routes import RouteTable

    doc = build_document(RouteTable(ROUTES))
    body = doc["paths"]["/api/v1/tables/{table_id}/commits"]["post"]["requestBody"]["content"]
    assert set(body) == set(NDJSON)
    api = (ROOT / "docs" / "api.md").read_text()
    [row] = [line for line in api.splitlines() if line.startswith("| `POST /api/v1/tables/{id}/commits")]
    for content_type in NDJSON:
        assert f"`{content_type}`" in row, content_type


@pytest.mark.parametrize("content_type, accepted", [
    ("application/x-ndjson", True), ("application/json", True), ("text/plain; charset=utf-8", True),
    ("application/x-www-form-urlencoded", False), ("text/csv", False),
])
def test_a_commit_is_judged_by_its_content_type_and_a_refusal_names_the_accepted_ones(
        manual_service: Service, content_type: str, accepted: bool) -> None:
    svc = manual_service
    table_id, loc = create_owned_table(svc)
    before = svc.backend.snapshot(loc)
    status, _, body = call(svc, "POST", f"/api/v1/tables/{table_id}/commits?version=1", ndjson(actions()),
                           {"Content-Type": content_type})
    if accepted:
        assert status == 200, body
        return
    assert status == 400 and body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["error"]["message"] == (
        f"Content-Type {content_type} is not accepted for a commit body: send application/x-ndjson (also "
        "accepted: application/json, text/plain, application/octet-stream)")
    assert svc.backend.snapshot(loc) == before
    assert svc.client().get_commits(table_id).latest_table_version == -1


# -- docs/api.md's error table names every code the service answers with ----------------------------------

def _server_codes() -> set[str]:
    """Codes of every CommitOwnerError class the service's code raises, plus the routing ones."""
    import client.contract.errors as errors
    import coordinator.core.registration as lifecycle

    classes = {c.__name__: c for mod in (errors, lifecycle) for c in vars(mod).values()
               if isinstance(c, type) and issubclass(c, CommitOwnerError)}
    raised: set[str] = set()
    for folder in ("coordinator", "backfill"):
        for path in (ROOT / folder).rglob("*.py"):
            raised |= set(re.findall(r"raise (\w+Error)\(", path.read_text()))
    return {classes[name].code for name in raised if name in classes} | {"NOT_FOUND", "METHOD_NOT_ALLOWED"}


def test_the_error_table_of_docs_api_lists_every_code_the_service_sends() -> None:
    api = (ROOT / "docs" / "api.md").read_text()
    table = {code for line in api.splitlines() if line.startswith("| `") for code in re.findall(r"`([A-Z_]+)`",
                                                                                                line.split("|")[1])}
    codes = _server_codes()
    assert "LOCATION_NOT_ALLOWED" in codes
    assert codes - table == set(), "codes missing from the error table of docs/api.md"


# -- the access log as documented -------------------------------------------------------------------------

def test_security_doc_describes_the_access_lines_the_service_writes(manual_service: Service) -> None:
    text = (ROOT / "docs" / "security.md").read_text()
    assert "the access log is off" not in text
    assert "`commit_owner.access`" in text and "INFO" in text
    call(manual_service, "GET", "/api/v1/tables?token=dco_0123456789abcdef_secretsecretsecretsecret")
    lines = [json.loads(line) for line in manual_service.log_text().splitlines() if line.startswith("{")]
    access = [r for r in lines if r.get("logger") == "commit_owner.access" and "/api/v1/tables" in r["msg"]]
    assert access and all(r["level"] == "INFO" for r in access)
    assert not any("secretsecret" in r["msg"] for r in access)


# -- aiohttp's typed keys -----------------------------------------------------------------------------------

def test_no_request_or_app_key_is_a_plain_string(request: pytest.FixtureRequest) -> None:
    """aiohttp warns (NotAppKeyWarning) the first time a plain string keys an app or a request: serve
    requests that pass every middleware (tokens on, a listing filtered per token, a commit, a refusal)
    and look for the warning in the service's output."""
    from tests.security.conftest import store_token

    b = make_backend(request, "sqlite", "local", "appkeys")
    admin = store_token(b, "*:admin")
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens", "PYTHONWARNINGS": "always"}).start()
    try:
        c = svc.client(token=admin)
        loc = b.new_location()
        table_id = c.register_table(loc).table_id
        from tests.support import delta_file, version0

        b.write(delta_file(loc, 0), ndjson(version0()))
        c.commit(table_id, 1, actions())
        c.list_tables()
        auth = {"Authorization": f"Bearer {admin}"}
        assert call(svc, "GET", "/api/v1/tables/not-a-uuid", headers=auth)[0] == 400
        assert call(svc, "GET", "/api/v1/tables")[0] == 401
    finally:
        svc.stop()
    log = svc.log_text()
    assert "NotAppKeyWarning" not in log and "RequestKey" not in log, log[-2000:]



# -- a newcomer's commands ----------------------------------------------------------------------------------

def test_install_hints_are_commands_that_work_from_a_clone() -> None:
    """The package is not on PyPI: no hint may tell a user to pip install it by name."""
    found = []
    for folder in ("coordinator", "client", "backfill", "docs", "tests"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md") and path.name != "test_usability.py":
                found += [f"{path.relative_to(ROOT)}" for line in path.read_text().splitlines()
                          if "install 'delta-commit-owner[" in line or 'install "delta-commit-owner[' in line]
    assert found == []


def test_make_run_takes_its_port_address_and_database_from_the_environment() -> None:
    import os
    import subprocess

    env = {**os.environ, "COMMIT_OWNER_PORT": "9123", "COMMIT_OWNER_HOST": "127.0.0.2",
           "COMMIT_OWNER_DATABASE_URL": "sqlite+aiosqlite:///./elsewhere.db"}
    plan = subprocess.run(["make", "-n", "run"], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          check=True).stdout
    serve = [line for line in plan.splitlines() if " serve " in line]
    assert serve and "--port 9123" in serve[0] and "--host 127.0.0.2" in serve[0], plan
    assert "sqlite+aiosqlite:///./elsewhere.db" in serve[0], plan
    plan = subprocess.run(["make", "-n", "run", "PORT=9124"], cwd=str(ROOT), env=env, capture_output=True,
                          text=True, check=True).stdout
    assert "--port 9124" in plan  # the make variable wins over the environment
