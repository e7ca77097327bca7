"""``GET /api/v1/openapi.json``: the OpenAPI document, built from the route table.

Each API with an OpenAPI file (``Api.openapi``) keeps there its operation objects keyed by operationId
(``x-operations``), its path parameters (``x-path-parameters``), the 401/403 responses each kind of
permission adds (``x-auth-responses``) and the ``components`` it needs. The root API's file (the project's,
coordinator/openapi.json) also gives the document's head (openapi, info, servers, security). ``paths`` is
built from the routes' (method, path, operationId) in the table's order: a route without an operation, an
operation without a route, a path parameter not described, or an operation that spells what the route's
permission decides (its security, its 401/403) fails the build, hence the app's creation.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from aiohttp import web

from coordinator.api.routes import Api, Permission, Route, RouteTable

BODY = web.AppKey("openapi_body", bytes)
_AUTH = ("401", "403")


@lru_cache(maxsize=8)
def _source(path: Path) -> str:
    return path.read_text()


def _load(api: Api) -> dict[str, Any]:
    assert api.openapi is not None
    return json.loads(_source(api.openapi))  # a fresh copy each time: the build may not alter the cache


def _auth_kind(permission: Permission) -> str | None:
    if permission is Permission.PUBLIC:
        return None
    return "scoped" if permission.action is not None else permission.value


def _operation(route: Route, source: dict[str, Any]) -> dict[str, Any]:
    where = f"{route.method} {route.path} ({route.api.name})"
    ops = source.get("x-operations", {})
    if route.operation_id not in ops:
        raise ValueError(f"{where}: no operation {route.operation_id!r} in {route.api.openapi}")
    op = ops[route.operation_id]
    if "operationId" in op or "security" in op or set(_AUTH) & set(op.get("responses", {})):
        raise ValueError(f"{where}: its operation spells operationId, security or 401/403 (the route decides)")
    out = {"operationId": route.operation_id, "summary": op.get("summary")}
    kind = _auth_kind(route.permission)
    if kind is None:
        out["security"] = []
    out.update((k, v) for k, v in op.items() if k != "summary")
    if kind is not None:
        added = source.get("x-auth-responses", {}).get(kind)
        if added is None or set(added) != set(_AUTH):
            raise ValueError(f"{where}: {route.api.openapi} has no x-auth-responses[{kind!r}] with 401 and 403")
        responses = {**op["responses"], **added}
        out["responses"] = {c: responses[c] for c in sorted(responses)}
    return out


def build_document(routes: RouteTable) -> dict[str, Any]:
    """The OpenAPI document of the routes that have an operationId. Raises ValueError on any mismatch."""
    sources = {api.name: _load(api) for api in routes.apis if api.openapi is not None}
    [root] = [api for api in routes.apis if api.prefix == "/"]
    if root.name not in sources:
        raise ValueError("the root API has no OpenAPI file (the document's head)")
    paths: dict[str, dict[str, Any]] = {}
    used: set[tuple[str, str]] = set()
    for route in routes.routes:
        if route.operation_id is None:
            continue
        source = sources[route.api.name]
        if (route.api.name, route.operation_id) in used:
            raise ValueError(f"operationId {route.operation_id!r} of API {route.api.name} serves two routes")
        used.add((route.api.name, route.operation_id))
        item = paths.get(route.path)
        if item is None:
            names = re.findall(r"{(\w+)}", route.path)
            described = source.get("x-path-parameters", {})
            missing = [n for n in names if n not in described]
            if missing:
                raise ValueError(f"{route.path}: path parameter(s) {missing} not in {route.api.openapi}")
            item = paths[route.path] = {"parameters": [described[n] for n in names]} if names else {}
        item[route.method.lower()] = _operation(route, source)
    components: dict[str, dict[str, Any]] = {}
    for name, source in sources.items():
        unused = set(source.get("x-operations", {})) - {op for api, op in used if api == name}
        if unused:
            raise ValueError(f"operations of API {name} that no route serves: {sorted(unused)}")
        for section, entries in source.get("components", {}).items():
            into = components.setdefault(section, {})
            for key, value in entries.items():
                if into.setdefault(key, value) != value:
                    raise ValueError(f"components.{section}.{key} differs between two APIs' OpenAPI files")
    doc: dict[str, Any] = {}
    for key, value in sources[root.name].items():
        if key == "components":
            doc["paths"] = paths
            doc[key] = components
        elif not key.startswith("x-"):
            doc[key] = value
    doc.setdefault("paths", paths)
    return doc


def document_body(routes: RouteTable) -> bytes:
    return (json.dumps(build_document(routes), indent=2) + "\n").encode()


async def document(request: web.Request) -> web.Response:
    from coordinator.api.errors import only_params

    only_params(request, set())
    return web.Response(body=request.app[BODY], content_type="application/json")
