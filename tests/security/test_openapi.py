"""The OpenAPI document describes exactly the routes the service serves outside the Unity Catalog facade,
and is served as shipped. The facade's routes follow UC's own spec and are listed in docs/unity-catalog.md
instead (docs/decisions.md, "The Unity Catalog facade")."""

from __future__ import annotations

import json
import re

from coordinator.api import create_app
from coordinator.api.openapi import DOCUMENT
from coordinator.settings import Settings
from tests.security.conftest import call
from tests.support import ROOT, Service

METHODS = {"get", "post", "put", "patch", "delete"}


UC_PREFIX = "/api/2.1/unity-catalog"


def all_served_routes() -> set[tuple[str, str]]:
    app = create_app(Settings.load({}, environ={}))  # routes only: no cleanup context runs
    out = set()
    for route in app.router.routes():
        if route.method == "HEAD" or route.resource is None:  # aiohttp adds HEAD to every GET
            continue
        out.add((route.method.upper(), route.resource.canonical))
    return out


def served_routes() -> set[tuple[str, str]]:
    """The routes the OpenAPI document covers: all but the Unity Catalog facade's."""
    return {r for r in all_served_routes() if not r[1].startswith(UC_PREFIX + "/")}


def documented_routes() -> set[tuple[str, str]]:
    doc = json.loads(DOCUMENT.read_text())
    return {(m.upper(), path) for path, item in doc["paths"].items() for m in item if m in METHODS}


def test_every_route_is_documented_and_every_documented_route_exists() -> None:
    served, documented = served_routes(), documented_routes()
    assert served - documented == set(), "routes missing from coordinator/openapi.json"
    assert documented - served == set(), "documented routes the service does not serve"


def test_every_operation_documents_its_errors_with_the_envelope() -> None:
    doc = json.loads(DOCUMENT.read_text())
    for path, item in doc["paths"].items():
        params = {p["name"] for p in item.get("parameters", [])}
        assert set(re.findall(r"{(\w+)}", path)) <= params, path
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
    rows = re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/\S*)`", page, re.M)
    listed = {(m, p.split("?")[0].replace("{id}", "{table_id}")) for m, p in rows}
    assert documented_routes() - listed == set(), "operations of coordinator/openapi.json missing from docs/api.md"
    assert listed - documented_routes() == set(), "docs/api.md lists operations the OpenAPI document does not have"


def test_the_document_is_served_as_shipped_without_a_token(local_auth: Service) -> None:
    status, payload, headers = call(local_auth.endpoint, "GET", "/api/v1/openapi.json")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert payload == json.loads(DOCUMENT.read_text())


def test_every_unity_catalog_route_is_listed_in_its_page_and_nowhere_in_the_document() -> None:
    served = {(m, p[len(UC_PREFIX):]) for m, p in all_served_routes() if p.startswith(UC_PREFIX + "/")}
    page = (ROOT / "docs" / "unity-catalog.md").read_text()
    section = page.split("## Endpoints", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/\S*)`", section, re.M)
    listed = {(m, re.sub(r"{[^}]*}", "{}", p)) for m, p in rows}
    assert {(m, re.sub(r"{[^}]*}", "{}", p)) for m, p in served} == listed
    assert not any(p.startswith(UC_PREFIX) for _, p in documented_routes())
