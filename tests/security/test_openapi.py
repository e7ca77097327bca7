"""One route table (coordinator/api/routes.py): the router, the auth middleware and the OpenAPI document
agree with it, and the document describes exactly the routes that have an operationId (all but the Unity
Catalog facade's, which follow UC's own spec and are listed in docs/unity-catalog.md instead; docs/decisions.md,
"The Unity Catalog facade" and "One route table")."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from coordinator.api import create_app
from coordinator.api.app import ROUTES
from coordinator.api.delta.errors import PREFIX as DELTA_PREFIX
from coordinator.api.openapi import BODY, build_document
from coordinator.api.routes import ROUTE_TABLE, Locate, Permission, RouteTable
from coordinator.api.ui import UI
from coordinator.api.unity.errors import PREFIX as UC_PREFIX
from coordinator.runtime.settings import Settings
from tests.security.conftest import call
from tests.support import ROOT, Service

METHODS = {"get", "head", "post", "put", "patch", "delete"}
DECLARED = {r.key for r in ROUTES}


def facade(path: str) -> bool:
    """A route of the Unity Catalog 2.1 facade (UC's own spec documents it), not of the Delta REST Catalog API."""
    return path.startswith(UC_PREFIX + "/") and not path.startswith(DELTA_PREFIX + "/")


def _app() -> Any:
    return create_app(Settings.load({}, environ={}))  # routes only: no cleanup context runs


def router_routes() -> Counter[tuple[str, str]]:
    """Every (method, template) the router serves, counted (aiohttp adds HEAD to a GET unless HEAD is declared)."""
    out: Counter[tuple[str, str]] = Counter()
    for route in _app().router.routes():
        if route.resource is None or (route.method == "HEAD" and ("HEAD", route.resource.canonical) not in DECLARED):
            continue
        out[(route.method.upper(), route.resource.canonical)] += 1
    return out


def document() -> dict[str, Any]:
    return json.loads(_app()[BODY])


def documented_routes() -> set[tuple[str, str]]:
    return {(m.upper(), path) for path, item in document()["paths"].items() for m in item if m in METHODS}


def test_the_router_serves_each_route_of_the_table_exactly_once_and_nothing_else() -> None:
    app = _app()
    table = app[ROUTE_TABLE]
    assert table.routes == tuple(ROUTES)
    served = router_routes()
    assert set(served.values()) == {1}, "a route registered twice"
    assert set(served) == {r.key for r in ROUTES}
    handlers = {(r.method.upper(), r.resource.canonical): r.handler for r in app.router.routes()
                if r.resource is not None}
    for r in ROUTES:
        assert handlers[r.key] is r.handler, r.key
        if r.method == "GET" and ("HEAD", r.path) not in DECLARED:
            assert handlers[("HEAD", r.path)] is r.handler, r.key


def test_every_route_has_a_known_permission_and_a_consistent_location_source() -> None:
    assert {p.value for p in Permission} == {"public", "watch", "read", "commit", "admin", "admin-everywhere",
                                             "browse"}
    for r in ROUTES:
        assert isinstance(r.permission, Permission), r.key
        assert (r.locate is None) == (r.permission.action is None), r.key
        assert (r.locate is Locate.TABLE_ID) == ("{table_id}" in r.path and r.locate is not None), r.key
    # what auth.py listed before the table, unchanged
    by_permission: dict[str, set[tuple[str, str]]] = {}
    for r in ROUTES:
        by_permission.setdefault(r.permission.value, set()).add(r.key)
    assert by_permission["public"] == {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/api/v1/openapi.json"),
                                       ("GET", "/ui/static/ui.css"), ("GET", "/ui/login"), ("POST", "/ui/login"),
                                       ("POST", "/ui/logout")}
    # the browser UI: any valid token, each page showing what the token may read
    assert by_permission["browse"] == {r.key for r in ROUTES if r.api is UI and r.permission is not Permission.PUBLIC}
    assert by_permission["watch"] == {("GET", "/metrics"), ("GET", "/")}
    assert by_permission["admin-everywhere"] == {
        ("POST", f"{UC_PREFIX}/catalogs"), ("DELETE", f"{UC_PREFIX}/catalogs/{{name}}"),
        ("POST", f"{UC_PREFIX}/schemas"), ("DELETE", f"{UC_PREFIX}/schemas/{{full_name}}")}
    assert [r.key for r in ROUTES if r.locate is Locate.BODY] == [
        ("POST", "/api/v1/tables"), ("POST", f"{UC_PREFIX}/delta/v1/catalogs/{{catalog}}/schemas/{{schema}}/tables")]


def test_every_documented_operation_is_served_and_every_served_route_outside_the_facade_documented() -> None:
    documented = documented_routes()
    with_operation = {r.key for r in ROUTES if r.operation_id is not None}
    assert documented == with_operation
    assert {r.key for r in ROUTES if r.operation_id is None} == {
        k for k in router_routes() if facade(k[1]) or UI.covers(k[1])}  # (the browser UI has no OpenAPI document)
    ids = [op["operationId"] for item in document()["paths"].values() for m, op in item.items() if m in METHODS]
    assert sorted(ids) == sorted(r.operation_id for r in ROUTES if r.operation_id is not None)


def test_the_document_s_security_follows_each_route_s_permission() -> None:
    doc = document()
    assert doc["security"] == [{"bearerAuth": []}]
    for r in ROUTES:
        if r.operation_id is None:
            continue
        op = doc["paths"][r.path][r.method.lower()]
        if r.permission is Permission.PUBLIC:
            assert op["security"] == [] and not {"401", "403"} & set(op["responses"]), r.key
        else:
            assert "security" not in op, r.key  # the document's bearerAuth
            schema = "DeltaError" if r.path.startswith(DELTA_PREFIX + "/") else "Error"
            for code in ("401", "403"):
                assert op["responses"][code]["content"]["application/json"]["schema"] == {
                    "$ref": f"#/components/schemas/{schema}"}, (r.key, code)


def _concrete(path: str) -> str:
    return re.sub(r"{table_id}", "00000000-0000-0000-0000-000000000000", re.sub(r"{(?!table_id)\w+}", "x", path))


def test_public_routes_are_exactly_those_answered_without_a_token(local_auth: Service) -> None:
    for r in ROUTES:
        status, payload, headers = call(local_auth.endpoint, r.method, _concrete(r.path),
                                        body=b"{}" if r.method in ("POST", "PUT") else None)
        if r.key == ("POST", "/ui/login"):  # public, and a sign-in form without a token is bad input
            assert status == 400 and "enter a token" in payload.decode(), r.key
        elif r.permission is Permission.PUBLIC:
            assert status == 200, r.key
        else:
            assert status == 401 and headers.get("WWW-Authenticate", "").startswith("Bearer"), r.key
            if r.method == "HEAD":
                continue  # (no body)
            if r.path.startswith(DELTA_PREFIX + "/"):
                assert payload["error"]["type"] == "NotAuthorizedException", r.key
                continue
            if UI.covers(r.path):  # the browser UI's envelope: its sign-in form
                assert b'class="login"' in payload, r.key
                continue
            code = payload["error_code"] if r.path.startswith(UC_PREFIX + "/") else payload["error"]["code"]
            assert code == "UNAUTHENTICATED", r.key


def test_every_operation_documents_its_errors_with_the_envelope() -> None:
    doc = document()
    for path, item in doc["paths"].items():
        params = {p["name"] for p in item.get("parameters", [])}
        assert set(re.findall(r"{(\w+)}", path)) == params, path
        for method, op in item.items():
            if method not in METHODS:
                continue
            assert op.get("operationId") and op.get("summary"), (method, path)
            assert "400" in op["responses"], (method, path)
            if path.startswith("/api/v1/tables"):
                assert {"401", "403"} <= set(op["responses"]), (method, path)
                assert op["responses"]["401"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"}


def test_the_api_reference_page_lists_every_documented_operation() -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    rows = re.findall(r"^\| `(GET|HEAD|POST|PUT|PATCH|DELETE) (/\S*)`", page, re.M)
    listed = {(m, p.split("?")[0].replace("{id}", "{table_id}")) for m, p in rows}
    assert documented_routes() - listed == set(), "operations of the OpenAPI document missing from docs/api.md"
    assert listed - documented_routes() == set(), "docs/api.md lists operations the OpenAPI document does not have"


def test_the_document_is_served_as_built_without_a_token(local_auth: Service) -> None:
    status, payload, headers = call(local_auth.endpoint, "GET", "/api/v1/openapi.json")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert payload == document() == build_document(RouteTable(ROUTES))
    assert not any(k.startswith("x-") for k in payload)


def test_every_unity_catalog_route_is_listed_in_its_page_and_nowhere_in_the_document() -> None:
    served = {(m, p[len(UC_PREFIX):]) for m, p in router_routes() if facade(p)}
    page = (ROOT / "docs" / "unity-catalog.md").read_text()
    section = page.split("## Endpoints", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/\S*)`", section, re.M)
    listed = {(m, re.sub(r"{[^}]*}", "{}", p)) for m, p in rows}
    assert {(m, re.sub(r"{[^}]*}", "{}", p)) for m, p in served} == listed
    assert not any(facade(p) for _, p in documented_routes())

