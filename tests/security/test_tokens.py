"""Bearer tokens: 401 without a valid one, 403 without the right scope, and nothing changes when refused."""

from __future__ import annotations

import json
import uuid

import pytest

from client import CommitOwnerClient
from client.contract.errors import PermissionDeniedError, UnauthenticatedError
from tests.security.conftest import State, call, cli, make_token, store_token
from tests.support import Service, actions, delta_file, ndjson, version0, wait_until

NDJSON = {"Content-Type": "application/x-ndjson"}


class World:
    def __init__(self, svc: Service) -> None:
        b = svc.backend
        self.svc, self.backend = svc, b
        self.wh = f"file://{b.tmp}/wh"
        self.admin = make_token(b, "*:admin")["token"]  # through the CLI
        self.a_admin = store_token(b, f"{self.wh}/team-a:admin")
        self.a_commit = store_token(b, f"{self.wh}/team-a:commit")
        self.a_read = store_token(b, f"{self.wh}/team-a:read")
        self.b_admin = store_token(b, f"{self.wh}/team-b:admin")
        self.a_table, self.a_loc = self.create(self.a_admin, f"{self.wh}/team-a/t1")
        self.b_table, self.b_loc = self.create(self.b_admin, f"{self.wh}/team-b/t1")
        # a table whose name starts like team-a's prefix but lies outside it
        self.ab_table, self.ab_loc = self.create(self.admin, f"{self.wh}/team-ab/t1")

    def client(self, token: str | None) -> CommitOwnerClient:
        return self.svc.client(token=token, deadline=10)

    def create(self, token: str, loc: str) -> tuple[str, str]:
        info = self.client(token).register_table(loc)
        self.backend.write(delta_file(loc, 0), ndjson(version0()))
        return info.table_id, loc

    def state(self) -> State:
        return State(self.backend, self.wh)


@pytest.fixture(scope="module")
def world(local_auth: Service) -> World:
    return World(local_auth)


def test_a_token_is_shown_once_and_only_its_hash_is_stored(world: World) -> None:
    made = make_token(world.backend, f"{world.wh}/x:read")
    token, token_id = made["token"], made["id"]
    secret = token.split("_", 2)[2]
    assert made["scopes"] == [{"prefix": f"{world.wh}/x", "actions": ["read"]}] and made["revoked"] is None
    text = cli(world.backend, "tokens", "list").stdout
    assert token_id in text and secret not in text
    db_file = world.backend.database_url.split("///", 1)[1]
    assert secret.encode() not in open(db_file, "rb").read()


@pytest.mark.parametrize("header", [
    None,
    "Bearer",
    "Basic dXNlcjpwYXNz",
    "Bearer not-a-token",
    "Bearer dco_0123456789abcdef_" + "A" * 43,  # well formed, unknown id
])
def test_requests_without_a_valid_token_are_unauthenticated_and_change_nothing(world: World, header: str | None) -> None:
    state = world.state()
    before = state.take()
    hdrs = {"Authorization": header} if header else {}
    attempts = [
        ("POST", "/api/v1/tables", json.dumps({"location": f"{world.wh}/team-a/new"}).encode(), {}),
        ("POST", f"/api/v1/tables/{world.a_table}/commits?version=1", ndjson(actions()), NDJSON),
        ("GET", f"/api/v1/tables/{world.a_table}/commits", None, {}),
        ("GET", "/api/v1/tables", None, {}),
        ("POST", f"/api/v1/tables/{world.a_table}/backfill", b'{"version": 0}', {}),
        ("DELETE", f"/api/v1/tables/{world.a_table}", None, {}),
        ("GET", "/api/v1/no-such-route", None, {}),
    ]
    for method, path, body, extra in attempts:
        status, payload, rh = call(world.svc.endpoint, method, path, body, headers={**hdrs, **extra})
        assert status == 401, (method, path, payload)
        assert payload["error"]["code"] == "UNAUTHENTICATED"
        assert rh.get("WWW-Authenticate", "").startswith("Bearer")
        if header and " " in header:
            assert header.split(" ", 1)[1] not in payload["error"]["message"]
    assert state.take() == before


def test_a_wrong_secret_for_a_real_token_id_is_unauthenticated(world: World) -> None:
    token_id = world.a_admin.split("_", 2)[1]
    forged = f"dco_{token_id}_" + "x" * 43
    with pytest.raises(UnauthenticatedError):
        world.client(forged).get_table(world.a_table)


def test_probes_and_the_openapi_document_need_no_token(world: World) -> None:
    for path in ("/healthz", "/readyz", "/api/v1/openapi.json"):
        assert call(world.svc.endpoint, "GET", path)[0] == 200


def test_team_a_token_can_never_touch_team_b(world: World) -> None:
    state = world.state()
    before = state.take()
    c = world.client(world.a_admin)
    refused = [
        lambda: c.register_table(f"{world.wh}/team-b/new"),
        lambda: c.register_table(f"{world.wh}/team-a/../team-b/new"),  # traversal out of the token's prefix
        lambda: c.register_table(f"{world.wh}/team-ab/new"),  # a sibling sharing the prefix's spelling
        lambda: c.commit(world.b_table, 1, actions()),
        lambda: c.get_commits(world.b_table),
        lambda: c.get_table(world.b_table),
        lambda: c.get_table(location=world.b_loc),
        lambda: c.backfill_to_version(world.b_table, 0),
        lambda: c.forget_table(world.b_table),
        lambda: c.commit(world.ab_table, 1, actions()),
    ]
    for attempt in refused:
        with pytest.raises(PermissionDeniedError) as e:
            attempt()
        assert e.value.code == "PERMISSION_DENIED" and e.value.http_status == 403
    assert state.take() == before
    # listing shows team-a's tables only
    assert {t.location for t in c.list_tables()} == {world.a_loc}
    assert {t.location for t in world.client(world.admin).list_tables()} >= {world.a_loc, world.b_loc, world.ab_loc}


def test_scopes_grant_read_commit_and_admin_in_rising_order(world: World) -> None:
    tid, loc = world.create(world.a_admin, f"{world.wh}/team-a/scopes-{uuid.uuid4().hex[:6]}")
    reader, writer = world.client(world.a_read), world.client(world.a_commit)
    state = world.state()

    # read: table info, getCommits, lookup; nothing else
    assert reader.get_table(tid).location == loc
    assert reader.get_commits(tid).latest_table_version == -1
    assert reader.get_table(location=loc).table_id == tid
    before = state.take()
    for attempt in (lambda: reader.commit(tid, 1, actions()),
                    lambda: reader.register_table(f"{world.wh}/team-a/by-reader"),
                    lambda: reader.backfill_to_version(tid, 0),
                    lambda: reader.forget_table(tid)):
        with pytest.raises(PermissionDeniedError):
            attempt()
    assert state.take() == before

    # commit: commits and reads, but neither registers, backfills nor forgets
    assert writer.commit(tid, 1, actions()).version == 1
    assert writer.get_commits(tid).latest_table_version == 1
    wait_until(lambda: reader.get_table(tid).latest_backfilled_version == 1, what="the backfill of v1")
    before = state.take()
    for attempt in (lambda: writer.register_table(f"{world.wh}/team-a/by-writer"),
                    lambda: writer.backfill_to_version(tid, 1),
                    lambda: writer.forget_table(tid)):
        with pytest.raises(PermissionDeniedError):
            attempt()
    assert state.take() == before

    # admin: everything
    admin = world.client(world.a_admin)
    assert admin.backfill_to_version(tid, 1).latest_backfilled_version == 1
    doomed = admin.register_table(f"{world.wh}/team-a/forget-{uuid.uuid4().hex[:6]}")
    admin.forget_table(doomed.table_id)


def test_a_revoked_token_is_refused_at_once(world: World) -> None:
    made = make_token(world.backend, f"{world.wh}/team-a:commit")
    c = world.client(made["token"])
    assert c.get_table(world.a_table).table_id == world.a_table
    cli(world.backend, "tokens", "revoke", made["id"])
    state = world.state()
    before = state.take()
    with pytest.raises(UnauthenticatedError):
        c.commit(world.a_table, c.get_commits(world.a_table).latest_table_version + 2, actions())
    with pytest.raises(UnauthenticatedError):
        c.get_table(world.a_table)
    assert state.take() == before
    listed = json.loads(cli(world.backend, "tokens", "list", "--json").stdout)
    row = next(t for t in listed if t["id"] == made["id"])
    assert row["revoked"] is not None and row["scopes"] == made["scopes"]
    assert all(set(t) == {"id", "scopes", "created", "revoked"} for t in listed)  # never a hash or a secret
    assert cli(world.backend, "tokens", "revoke", "ffffffffffffffff", check=False).returncode == 1


@pytest.mark.parametrize("scope", ["s3://bucket/team-a", "ftp://x/y:read", "s3://bucket/x:write"])
def test_tokens_create_refuses_malformed_scopes(world: World, scope: str) -> None:
    before = world.state().take()
    res = cli(world.backend, "tokens", "create", "--scope", scope, check=False)
    assert res.returncode == 2 and "scope" in res.stderr.lower()
    assert world.state().take() == before


def test_the_service_log_never_holds_a_token(world: World) -> None:
    c = world.client(world.a_commit)
    c.get_table(world.a_table)
    call(world.svc.endpoint, "GET", "/api/v1/tables", token=world.a_read + "tampered")
    log = world.svc.log_text()
    for token in (world.admin, world.a_admin, world.a_commit, world.a_read, world.b_admin):
        assert token.split("_", 2)[2] not in log


def test_client_maps_401_and_403_without_an_envelope(world: World) -> None:
    from client.contract.errors import error_from_envelope

    assert isinstance(error_from_envelope(401, None), UnauthenticatedError)
    assert isinstance(error_from_envelope(403, {"unexpected": 1}), PermissionDeniedError)
    assert isinstance(error_from_envelope(403, {"error": {"code": "SOMETHING_NEW", "message": "m"}}),
                      PermissionDeniedError)




def test_a_symlink_cannot_carry_a_registration_out_of_the_tokens_prefix(world: World) -> None:
    import os

    team_a = world.wh[len("file://"):] + "/team-a"
    os.makedirs(world.wh[len("file://"):] + "/team-b", exist_ok=True)
    os.symlink(world.wh[len("file://"):] + "/team-b", team_a + "/to-b")
    state = world.state()
    before = state.take()
    with pytest.raises(PermissionDeniedError):
        world.client(world.a_admin).register_table(f"file://{team_a}/to-b/sneaky")
    assert state.take() == before


def test_the_log_filter_redacts_bearer_tokens(world: World) -> None:
    import logging

    from coordinator.security.tokens import RedactTokens

    record = logging.LogRecord("x", logging.INFO, __file__, 1, "got %s and Authorization: Bearer %s",
                               (world.a_read, "opaque-secret-value"), None)
    assert RedactTokens().filter(record)
    text = record.getMessage()
    assert world.a_read.split("_", 2)[2] not in text and "opaque-secret-value" not in text
    assert text.count("***") == 2


@pytest.mark.postgres
def test_tokens_on_postgresql(request: pytest.FixtureRequest) -> None:
    from tests.conftest import make_backend

    b = make_backend(request, "postgres", "local", "sec-pg")
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens"}).start()
    try:
        token = store_token(b, f"file://{b.tmp}:admin")
        c = svc.client(token=token, deadline=10)
        info = c.register_table(b.new_location())
        with pytest.raises(PermissionDeniedError):
            c.register_table("file://" + str(b.tmp.parent) + "/elsewhere/t")
        cli(b, "tokens", "revoke", token.split("_", 2)[1])
        with pytest.raises(UnauthenticatedError):
            c.get_table(info.table_id)
    finally:
        svc.stop()


def test_a_commit_only_token_rides_out_a_backlog_without_the_backfill_right(request: pytest.FixtureRequest) -> None:
    """At the unbackfilled cap the client would force a backfill, which needs admin: with a commit-only token it
    waits for the owner's own backfiller instead, and the commit lands."""
    from tests.conftest import make_backend

    b = make_backend(request, "sqlite", "local", "sec-backlog")
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens", "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": "2",
                                "COMMIT_OWNER_BACKFILL_BATCH_SIZE": "100",
                                "COMMIT_OWNER_BACKFILL_INTERVAL_MS": "1500"}).start()
    try:
        admin = store_token(b, f"file://{b.tmp}:admin")
        loc = b.new_location()
        info = svc.client(token=admin, deadline=10).register_table(loc)
        b.write(delta_file(loc, 0), ndjson(version0()))
        writer = svc.client(token=store_token(b, f"file://{b.tmp}:commit"), deadline=30)
        with pytest.raises(PermissionDeniedError):
            writer.backfill_to_version(info.table_id, 0)
        for v in range(1, 6):  # v = 3 and 5 meet the cap of 2 unbackfilled commits
            assert writer.commit(info.table_id, v, actions()).version == v
        page = writer.get_commits(info.table_id)
        assert page.latest_table_version == 5 and len(page.commits) <= 2
        log = svc.log_text()
        assert "TOO_MANY_UNBACKFILLED_COMMITS" in log  # the cap was met: the client got a 429 ...
        assert log.count("PERMISSION_DENIED") >= 2  # ... and its own backfill attempt was refused, like ours above
    finally:
        svc.stop()
