"""The route table's rules with a tiny fake set of APIs (no database): the envelope of a request is its
route's API's, a request no route matched gets the API of the longest prefix it lies under (an API nested
inside another's prefix, as the Delta REST Catalog API will be inside Unity Catalog's), and the OpenAPI
build refuses a route without an operation, an operation without a route and an operation that spells
what the route's permission decides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from client.contract.errors import CommitOwnerError, NotFoundError
from coordinator.api.errors import error_middleware, json_response
from coordinator.api.openapi import build_document
from coordinator.api.routes import ROUTE_TABLE, Api, Locate, Permission, Route, RouteTable


def _envelope(tag: str) -> Any:
    def envelope(err: CommitOwnerError) -> tuple[int, dict[str, Any]]:
        return err.http_status, {"api": tag, "code": err.code}
    return envelope


ROOT = Api("root", "/", _envelope("root"))
OUTER = Api("outer", "/api/outer", _envelope("outer"))
INNER = Api("inner", "/api/outer/inner/v1", _envelope("inner"))


async def _ok(request: web.Request) -> web.Response:
    return json_response({"ok": True})


async def _missing(request: web.Request) -> web.Response:
    raise NotFoundError("nothing here")


def _routes() -> list[Route]:
    return [
        Route("GET", "/ping", _ok, Permission.PUBLIC, ROOT, None),
        Route("GET", "/api/outer/things", _missing, Permission.READ, OUTER, None, Locate.QUERY),
        # under the outer prefix, beside (not inside) the inner one: the route's own API answers
        Route("GET", "/api/outer/inner/things", _missing, Permission.READ, OUTER, None, Locate.QUERY),
        Route("GET", "/api/outer/inner/v1/things", _missing, Permission.READ, INNER, None, Locate.QUERY),
    ]


@pytest.mark.parametrize("path, api", [
    ("/", "root"), ("/nowhere", "root"), ("/api/outerwear", "root"), ("/api/outer", "outer"),
    ("/api/outer/x", "outer"), ("/api/outer/inner/v1", "inner"), ("/api/outer/inner/v1/x/y", "inner"),
    ("/api/outer/inner/v10", "outer"),
])
def test_the_longest_prefix_decides_where_no_route_matched(path: str, api: str) -> None:
    assert RouteTable(_routes()).api_for_path(path).name == api


async def test_each_reply_has_the_envelope_of_its_route_else_of_its_prefix() -> None:
    app = web.Application(middlewares=[error_middleware])
    table = RouteTable(_routes())
    table.add_to(app.router)
    app[ROUTE_TABLE] = table
    async with TestClient(TestServer(app)) as client:
        for method, path, status, api, code in [
            ("GET", "/ping", 200, None, None),
            ("GET", "/nowhere", 404, "root", "NOT_FOUND"),
            ("GET", "/api/outer/things", 404, "outer", "NOT_FOUND"),
            ("POST", "/api/outer/things", 405, "outer", "METHOD_NOT_ALLOWED"),
            ("GET", "/api/outer/inner/things", 404, "outer", "NOT_FOUND"),
            ("GET", "/api/outer/inner/v1/things", 404, "inner", "NOT_FOUND"),
            ("GET", "/api/outer/inner/v1/unknown", 404, "inner", "NOT_FOUND"),
            ("DELETE", "/api/outer/inner/v1/things", 405, "inner", "METHOD_NOT_ALLOWED"),
        ]:
            resp = await client.request(method, path)
            body = await resp.json()
            assert resp.status == status, (method, path)
            if api is not None:
                assert body == {"api": api, "code": code}, (method, path)


@pytest.mark.parametrize("routes, message", [
    ([Route("GET", "/ping", _ok, Permission.PUBLIC, OUTER, None)], "outside its API's prefix"),
    ([Route("GET", "/ping", _ok, Permission.PUBLIC, ROOT, None)] * 2, "declared twice"),
    ([Route("GET", "/ping", _ok, Permission.PUBLIC, ROOT, None),
      Route("GET", "/api/outer/inner/v1/y", _ok, Permission.PUBLIC, INNER, None),
      Route("GET", "/api/outer/inner/v1/x", _ok, Permission.PUBLIC, OUTER, None)], "lies under the prefix"),
    ([Route("GET", "/api/outer/x", _ok, Permission.PUBLIC, OUTER, None)], "root prefix"),
    ([Route("GET", "/x", _ok, Permission.READ, ROOT, None)], "a location source"),
    ([Route("GET", "/x", _ok, Permission.WATCH, ROOT, None, Locate.QUERY)], "a location source"),
    ([Route("GET", "/x/{table_id}", _ok, Permission.READ, ROOT, None, Locate.QUERY)], "Locate.TABLE_ID"),
    ([Route("GET", "/x", _ok, Permission.READ, ROOT, None, Locate.TABLE_ID)], "Locate.TABLE_ID"),
    ([Route("GET", "/c/{catalog}/s/{schema}/tables/{table}", _ok, Permission.READ, ROOT, None, Locate.HANDLER)],
     "Locate.NAME"),
    ([Route("GET", "/tables/{full_name}", _ok, Permission.READ, ROOT, None, Locate.QUERY)], "Locate.NAME"),
    ([Route("GET", "/x/{name}", _ok, Permission.READ, ROOT, None, Locate.NAME)], "Locate.NAME"),
    ([Route("GET", "/x", _ok, Permission.PUBLIC, ROOT, "x")], "an operationId exactly when"),
    ([Route("GET", "/x", _ok, Permission.PUBLIC, ROOT, None),
      Route("GET", "/api/outer/x", _ok, Permission.PUBLIC, Api("root", "/api/outer", _envelope("r")), None)],
     "two APIs named"),
])
def test_a_table_that_breaks_a_rule_is_refused(routes: list[Route], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RouteTable(routes)


def _spec(tmp_path: Path, operations: dict[str, Any]) -> Api:
    path = tmp_path / "openapi.json"
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/E"}}}}
    path.write_text(json.dumps({
        "openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "security": [{"b": []}],
        "components": {"schemas": {"E": {"type": "object"}}},
        "x-path-parameters": {"id": {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}},
        "x-auth-responses": {k: {"401": {"description": "who", **error}, "403": {"description": "no", **error}}
                             for k in ("watch", "scoped", "admin-everywhere")},
        "x-operations": operations,
    }))
    return Api("root", "/", _envelope("root"), openapi=path)


def _op(*codes: str) -> dict[str, Any]:
    return {"summary": "s", "responses": {c: {"description": c} for c in codes}}


def test_the_document_is_built_from_the_routes(tmp_path: Path) -> None:
    api = _spec(tmp_path, {"ping": _op("200", "400"), "get": _op("200", "404", "400")})
    doc = build_document(RouteTable([
        Route("GET", "/ping", _ok, Permission.PUBLIC, api, "ping"),
        Route("GET", "/x/{id}", _ok, Permission.READ, api, "get", Locate.QUERY),
    ]))
    assert list(doc) == ["openapi", "info", "security", "paths", "components"]
    assert doc["paths"]["/ping"]["get"] == {"operationId": "ping", "summary": "s", "security": [],
                                           "responses": {"200": {"description": "200"},
                                                         "400": {"description": "400"}}}
    item = doc["paths"]["/x/{id}"]
    assert [p["name"] for p in item["parameters"]] == ["id"]
    assert list(item["get"]["responses"]) == ["200", "400", "401", "403", "404"]
    assert "security" not in item["get"]


@pytest.mark.parametrize("operations, routes_of, message", [
    ({"ping": _op("200")}, lambda api: [Route("GET", "/ping", _ok, Permission.PUBLIC, api, "pong")],
     "no operation 'pong'"),
    ({"ping": _op("200"), "spare": _op("200")},
     lambda api: [Route("GET", "/ping", _ok, Permission.PUBLIC, api, "ping")], "no route serves"),
    ({"ping": _op("200", "401")}, lambda api: [Route("GET", "/ping", _ok, Permission.WATCH, api, "ping")],
     "the route decides"),
    ({"ping": {**_op("200"), "security": []}},
     lambda api: [Route("GET", "/ping", _ok, Permission.PUBLIC, api, "ping")], "the route decides"),
    ({"ping": _op("200")}, lambda api: [Route("GET", "/ping", _ok, Permission.PUBLIC, api, "ping"),
                                        Route("POST", "/ping", _ok, Permission.PUBLIC, api, "ping")],
     "serves two routes"),
    ({"ping": _op("200")}, lambda api: [Route("GET", "/ping/{name}", _ok, Permission.PUBLIC, api, "ping")],
     "not in"),
])
def test_the_build_refuses_a_mismatch(tmp_path: Path, operations: dict[str, Any], routes_of: Any,
                                      message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_document(RouteTable(routes_of(_spec(tmp_path, operations))))
