"""What an outside probe of the three APIs and the UI found (issue 45), kept found: a request carries one
credential; a table name the token may not see is answered exactly as a name that does not exist; the
permission is judged before the request's body; preview commits are judged on the registered location, not
the caller's ``table_uri``; reserved properties are refused. On SQLite and PostgreSQL, and every refusal
leaves every row and every file as it was."""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import make_backend
from tests.delta.conftest import PROTOCOL, SCHEMA, V1, V1Writer
from tests.security.conftest import store_token
from tests.support import Service, delta_file, ndjson, next_ict, version0
from tests.unity.conftest import UC, catalog_managed_version0, ok, picture


@dataclass
class Probe:
    """The probe's world: tables ``c.a.ta`` and ``c.b.tb``, an admin token over ``*``, ``t_a`` (commit on
    ta's location), ``ta_admin`` (admin there), ``r_b`` (read on tb's location) and an ops token."""

    svc: Service
    admin: str
    t_a: str
    ta_admin: str
    r_b: str
    ops: str
    ta: V1Writer
    tb: V1Writer

    def picture(self) -> tuple[Any, ...]:
        return picture(self.svc)

    def send(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes | None = None
             ) -> tuple[int, bytes, http.client.HTTPMessage]:
        """A request with exactly these header lines (repeated names included), as urllib cannot send."""
        conn = http.client.HTTPConnection("127.0.0.1", self.svc.port, timeout=30)
        try:
            conn.putrequest(method, path)
            for name, value in headers:
                conn.putheader(name, value)
            if body is not None:
                conn.putheader("Content-Type", "application/json")
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            r = conn.getresponse()
            return r.status, r.read(), r.headers
        finally:
            conn.close()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def probe(request: pytest.FixtureRequest) -> Iterator[Probe]:
    b = make_backend(request, request.param, "local", f"probe-{request.param}")
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens", "COMMIT_OWNER_BACKFILL": "false"}).start()
    try:
        admin = store_token(b, "*:admin")
        catalog = f"c_{uuid.uuid4().hex[:8]}"
        ta = V1Writer(svc, token=admin, catalog=catalog, schema="a", table="ta").names()
        ok(svc, "POST", "/schemas", {"name": "b", "catalog_name": catalog}, admin)
        tb = V1Writer(svc, token=admin, catalog=catalog, schema="b", table="tb")
        ta.create()
        tb.create()
        yield Probe(svc, admin, store_token(b, f"{ta.location}:commit"), store_token(b, f"{ta.location}:admin"),
                    store_token(b, f"{tb.location}:read"), store_token(b, "*:ops"), ta, tb)
    finally:
        svc.stop()


def bearer(token: str) -> tuple[str, str]:
    return "Authorization", f"Bearer {token}"


# -- 1. one credential per request --------------------------------------------------------------------------

TWO_CREDENTIALS = {
    "admin's header, then t_a's": lambda p: [bearer(p.admin), bearer(p.t_a)],
    "t_a's header, then junk": lambda p: [bearer(p.t_a), ("Authorization", "Bearer junk")],
    "two tokens in one header": lambda p: [("Authorization", f"Bearer {p.admin}, Bearer {p.t_a}")],
    "two tokens after one Bearer": lambda p: [("Authorization", f"Bearer {p.admin} {p.t_a}")],
}


@pytest.mark.parametrize("credentials", list(TWO_CREDENTIALS))
def test_a_request_with_two_credentials_is_unauthenticated_on_every_api_and_the_ui(probe: Probe,
                                                                                   credentials: str) -> None:
    p = probe
    headers = TWO_CREDENTIALS[credentials](p)
    update = json.dumps({"requirements": [{"type": "assert-table-uuid", "uuid": p.ta.table_id}],
                         "updates": [{"action": "set-table-comment", "comment": "written"}]}).encode()
    before = p.picture()
    for method, path, body in [
        ("GET", f"/api/v1/tables/{p.tb.table_id}", None),
        ("GET", f"{UC}/tables/{p.tb.full_name}", None),
        ("GET", V1 + p.tb.path, None),
        ("POST", V1 + p.ta.path, update),
        ("GET", f"/ui/tables/{p.tb.table_id}", None),
        ("GET", "/metrics", None),
        ("GET", "/api/v1/no-such-route", None),
    ]:
        status, raw, rh = p.send(method, path, headers, body)
        assert status == 401, (method, path, raw[:300])
        assert rh["WWW-Authenticate"].startswith("Bearer"), path
        assert not any(t.split("_", 2)[2].encode() in raw for t in (p.admin, p.t_a)), path  # no secret echoed
    assert p.picture() == before


def test_the_ui_takes_the_session_cookie_alone_never_beside_a_header_or_twice(probe: Probe) -> None:
    p = probe
    page = f"/ui/tables/{p.ta.table_id}"
    assert p.send("GET", page, [("Cookie", f"commit_owner_ui_token={p.admin}")])[0] == 200
    for headers in ([bearer(p.admin), ("Cookie", f"commit_owner_ui_token={p.admin}")],
                    [("Cookie", f"commit_owner_ui_token={p.t_a}; commit_owner_ui_token={p.admin}")],
                    [("Cookie", f"commit_owner_ui_token={p.t_a}"), ("Cookie", f"commit_owner_ui_token={p.admin}")]):
        status, raw, _ = p.send("GET", page, headers)
        assert status == 401, (headers, raw[:300])


# -- 2. a name the token may not see is a name that does not exist ------------------------------------------


def _by_name(p: Probe, name: str) -> list[tuple[str, str, Any]]:
    """Every request that names table ``c.b.<name>``, on the Delta REST Catalog API and Unity Catalog's."""
    path = f"/catalogs/{p.tb.catalog}/schemas/b/tables/{name}"
    update = {"requirements": [{"type": "assert-table-uuid", "uuid": p.tb.table_id}],
              "updates": [{"action": "set-table-comment", "comment": "probed"}]}
    return [("GET", V1 + path, None), ("HEAD", V1 + path, None), ("POST", V1 + path, update),
            ("POST", f"{V1}{path}/metrics", {"table-id": p.tb.table_id, "report": {}}),
            ("GET", f"{V1}{path}/credentials?operation=READ", None), ("DELETE", V1 + path, None),
            ("POST", f"{V1}{path}/rename", {"new-name": "renamed"}),
            ("GET", f"{UC}/tables/{p.tb.catalog}.b.{name}", None), ("DELETE", f"{UC}/tables/{p.tb.catalog}.b.{name}", None)]


def _answer(p: Probe, token: str, method: str, path: str, body: Any) -> tuple[int, bytes]:
    status, raw, _ = p.send(method, path, [bearer(token)], None if body is None else json.dumps(body).encode())
    return status, raw


def test_a_table_name_the_token_may_not_see_is_answered_exactly_as_a_name_that_does_not_exist(probe: Probe) -> None:
    p = probe
    before = p.picture()
    for (method, path, body), (_, missing, _) in zip(_by_name(p, "tb"), _by_name(p, "nosuch"), strict=True):
        hidden = _answer(p, p.t_a, method, path, body)
        absent = _answer(p, p.t_a, method, missing, body)
        assert hidden == (absent[0], absent[1].replace(b".nosuch ", b".tb ")), (method, path)
        # 404 where t_a holds the route's action on some table; dropping and renaming need admin, which it
        # holds nowhere: refused before any name is looked up, for both names alike
        assert hidden[0] == (403 if method == "DELETE" or path.endswith("/rename") else 404), (method, path, hidden)
        # the ops token reads no table through an API: refused before any lookup, whatever the name
        assert _answer(p, p.ops, method, path, body) == _answer(p, p.ops, method, missing, body), (method, path)
    # the UI: its lists hide schema b and tb from t_a; its pages and its search answer the same
    for hidden_path, missing_path in [(f"/ui/catalogs/{p.tb.catalog}/schemas/b", f"/ui/catalogs/{p.tb.catalog}/schemas/nosuch"),
                                      (f"/ui/tables?q={p.tb.full_name}", f"/ui/tables?q={p.tb.catalog}.b.nosuch")]:
        hidden = _answer(p, p.t_a, "GET", hidden_path, None)
        absent = _answer(p, p.t_a, "GET", missing_path, None)
        assert hidden[0] == absent[0] and hidden[1].count(b"<tr data-table-id") == 0, hidden_path
    assert _answer(p, p.t_a, "GET", f"/ui/catalogs/{p.tb.catalog}/schemas/b", None)[0] == 404
    # /api/v1 looks a table up by location: a location outside the token's scope is refused unlooked-up
    hidden = _answer(p, p.t_a, "GET", f"/api/v1/tables?location={p.tb.location}", None)
    absent = _answer(p, p.t_a, "GET", f"/api/v1/tables?location={p.tb.location}-nosuch", None)
    assert hidden == absent and hidden[0] == 403
    assert p.picture() == before


def test_a_table_the_token_sees_but_may_not_change_is_forbidden(probe: Probe) -> None:
    p = probe
    before = p.picture()
    assert _answer(p, p.r_b, "GET", V1 + p.tb.path, None)[0] == 200
    for method, path, body in _by_name(p, "tb"):
        if method in ("GET", "HEAD"):
            continue
        status, raw = _answer(p, p.r_b, method, path, body)
        assert status == 403, (method, path, raw[:300])
    assert _answer(p, p.r_b, "GET", f"{V1}{p.tb.path}/credentials?operation=READ_WRITE", None)[0] == 403
    assert p.picture() == before


# -- 3. the permission before the body -----------------------------------------------------------------------

BAD_BODIES = {"an unknown field": b'{"bogus": 1}', "not JSON": b"{", "empty": b""}


@pytest.mark.parametrize("bad", list(BAD_BODIES))
def test_the_permission_is_judged_before_the_body_and_the_query(probe: Probe, bad: str) -> None:
    p = probe
    raw = BAD_BODIES[bad]
    before = p.picture()
    for path in (V1 + p.tb.path, f"{V1}{p.tb.path}/metrics", f"{V1}{p.tb.path}?bogus=1"):
        # the reader of tb sees it and may not commit to it; t_a may not even see it
        assert p.send("POST", path, [bearer(p.r_b)], raw)[0] == 403, path
        assert p.send("POST", path, [bearer(p.t_a)], raw)[0] == 404, path
    preview = json.dumps({"table_id": p.tb.table_id, "table_uri": p.tb.location, "bogus": 1}).encode()
    assert p.send("POST", f"{UC}/delta/preview/commits", [bearer(p.r_b)], preview)[0] == 403
    assert p.send("POST", f"{UC}/temporary-table-credentials", [bearer(p.t_a)],
                  json.dumps({"table_id": p.tb.table_id, "operation": "NOPE"}).encode())[0] == 403
    assert p.send("POST", f"/api/v1/tables/{p.tb.table_id}/commits?bogus=1", [bearer(p.r_b)], raw)[0] == 403
    assert p.send("GET", f"/ui/tables/{p.tb.table_id}/commits/x?bogus=1", [bearer(p.t_a)])[0] == 403
    register = json.dumps({"location": f"{p.tb.location}-next", "bogus": 1}).encode()
    assert p.send("POST", "/api/v1/tables", [bearer(p.ta_admin)], register)[0] == 403
    assert p.picture() == before


# -- 4. preview commits are judged on the registered location ---------------------------------------------


def test_preview_commits_are_judged_on_the_registered_location_never_on_the_callers_table_uri(probe: Probe) -> None:
    p = probe
    name = p.ta.stage(1)
    before = p.picture()
    for method, body in [("GET", {"table_id": p.tb.table_id, "table_uri": p.ta.location, "start_version": 0}),
                         ("GET", {"table_id": p.tb.table_id, "table_uri": p.tb.location, "start_version": 0}),
                         ("POST", {**p.ta.commit_body(1, name), "table_id": p.tb.table_id}),
                         ("POST", {**p.ta.commit_body(1, name), "table_id": p.tb.table_id, "table_uri": p.tb.location})]:
        status, raw = _answer(p, p.t_a, method, f"{UC}/delta/preview/commits", body)
        assert status == 403 and json.loads(raw)["error_code"] == "PERMISSION_DENIED", (method, body, raw)
    # on its own table, the claim is validated once the permission is granted
    status, raw = _answer(p, p.t_a, "POST", f"{UC}/delta/preview/commits", p.ta.commit_body(1, name, uri=p.tb.location))
    assert status == 400 and b"is not the registered location" in raw, raw
    nosuch = {"table_id": str(uuid.uuid4()), "table_uri": p.ta.location, "start_version": 0}
    assert _answer(p, p.t_a, "GET", f"{UC}/delta/preview/commits", nosuch)[0] == 404
    assert p.picture() == before


# -- 5. reserved properties --------------------------------------------------------------------------------


def _recorded(p: Probe, table_id: str) -> dict[str, str]:
    """The catalog's record of a table's properties, as the database holds it."""
    from sqlalchemy import create_engine, select

    from coordinator.store.engine import sync_url
    from coordinator.store.schema import table_names

    engine = create_engine(sync_url(p.svc.backend.database_url))
    try:
        with engine.connect() as conn:
            return dict(conn.execute(select(table_names.c.properties).where(
                table_names.c.table_id == table_id)).scalar_one())
    finally:
        engine.dispose()


def _set(p: Probe, *updates: dict[str, Any]) -> dict[str, Any]:
    return {"requirements": [{"type": "assert-table-uuid", "uuid": p.ta.table_id}], "updates": list(updates)}


def test_reserved_properties_are_refused_on_every_api_and_an_echo_changes_nothing(probe: Probe) -> None:
    p = probe
    other = p.tb.table_id
    refused = [
        (V1 + p.ta.path, _set(p, {"action": "set-properties", "updates": {"io.unitycatalog.tableId": other}})),
        (V1 + p.ta.path, _set(p, {"action": "set-properties", "updates": {"ucTableId": other, "team": "a"}})),
        (V1 + p.ta.path, _set(p, {"action": "remove-properties", "removals": ["io.unitycatalog.tableId"]})),
        (V1 + p.ta.path, _set(p, {"action": "set-properties", "updates": {"delta.feature.catalogManaged": "no"}})),
        (V1 + p.ta.path, _set(p, {"action": "set-properties", "updates": {"delta.lastUpdateVersion": "999"}})),
        (V1 + p.ta.path, _set(p, {"action": "set-properties", "updates": {"delta.clusteringColumns": "[]"}})),
        (V1 + p.ta.path, _set(p, {"action": "set-properties",
                                  "updates": {"delta.managedCommit.commitOwner": "someone-else"}})),
        (f"{UC}/delta/preview/commits",
         {**p.ta.commit_body(1, p.ta.stage(1)), "metadata": {"properties": {"properties": {
             "io.unitycatalog.tableId": other}}}}),
    ]
    before = p.picture()
    for path, body in refused:
        status, raw = _answer(p, p.t_a, "POST", path, body)
        assert status == 400 and b"reserved" in raw, (path, body, raw)
    assert p.picture() == before  # no property, no commit, no file
    # creating: the id is the catalog's to give
    staging = ok(p.svc, "POST", "/staging-tables", {"name": "tc", "catalog_name": p.ta.catalog, "schema_name": "a"},
                 p.admin)
    p.svc.backend.write(delta_file(staging["staging_location"], 0),
                        ndjson(catalog_managed_version0(staging["id"])))
    before = p.picture()
    create = {"name": "tc", "catalog_name": p.ta.catalog, "schema_name": "a", "table_type": "MANAGED",
              "data_source_format": "DELTA", "storage_location": staging["staging_location"],
              "properties": {"io.unitycatalog.tableId": other}}
    status, raw = _answer(p, p.admin, "POST", f"{UC}/tables", create)
    assert status == 400 and b"reserved" in raw, raw
    status, raw = _answer(p, p.admin, "POST", f"{V1}/catalogs/{p.ta.catalog}/schemas/a/tables", {
        "name": "tc", "location": staging["staging_location"], "table-type": "MANAGED", "columns": SCHEMA,
        "protocol": PROTOCOL, "last-commit-timestamp-ms": next_ict(), "properties": {"delta.lastUpdateVersion": "7"}})
    assert status == 400 and b"reserved" in raw, raw
    assert p.picture() == before
    # repeating what the table holds is no change of it: the record and every answer keep ta's own id
    status, reply = _answer(p, p.t_a, "POST", V1 + p.ta.path, _set(p, {"action": "set-properties", "updates": {
        "io.unitycatalog.tableId": p.ta.table_id, "delta.feature.catalogManaged": "supported", "team": "a"}}))
    assert status == 200, reply
    assert json.loads(reply)["metadata"]["properties"]["io.unitycatalog.tableId"] == p.ta.table_id
    assert ok(p.svc, "GET", f"/tables/{p.ta.full_name}", token=p.t_a)["properties"]["team"] == "a"
    assert _recorded(p, p.ta.table_id).get("io.unitycatalog.tableId", p.ta.table_id) == p.ta.table_id


def test_a_logs_table_id_naming_another_table_is_never_recorded(probe: Probe) -> None:
    """/api/v1: a writer's log is its own, but the catalog's record of the table keeps no other table's id."""
    p = probe
    loc = f"{p.ta.location}-v1"
    c = p.svc.client(token=p.admin, deadline=10)
    table_id = c.register_table(loc, name=f"{p.ta.catalog}.a.tv").table_id
    p.svc.backend.write(delta_file(loc, 0), ndjson(version0()))
    metadata = version0()[2]
    metadata["metaData"]["configuration"]["io.unitycatalog.tableId"] = p.tb.table_id
    c.commit(table_id, 1, [{"commitInfo": {"inCommitTimestamp": next_ict(), "operation": "SET TBLPROPERTIES"}},
                           metadata])
    answered = ok(p.svc, "GET", f"/tables/{p.ta.catalog}.a.tv", token=p.admin)
    assert answered["properties"]["io.unitycatalog.tableId"] == table_id
    assert "io.unitycatalog.tableId" not in _recorded(p, table_id)
    assert answered["properties"]["delta.managedCommit.commitOwner"] == "commit-owner"
