"""Handlers of catalogs and schemas."""

from __future__ import annotations

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from coordinator.api.errors import json_body, json_response, only_params
from coordinator.api.keys import CATALOG
from coordinator.api.unity.shapes import Page, catalog_json, schema_json
from coordinator.core.catalog import check_comment, check_name, check_properties, split_full_name

NAME_FIELDS = {"name", "comment", "properties", "storage_root"}


def page(request: web.Request) -> Page:
    return Page.parse(request.query.get("max_results"), request.query.get("page_token"))


async def _body(request: web.Request, allowed: set[str]) -> dict:
    body = await json_body(request, allowed)
    if body.get("storage_root") is not None:
        raise InvalidArgumentError("storage_root is not supported: managed tables go under --managed-location")
    return body


async def create_catalog(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await _body(request, NAME_FIELDS)
    row = await request.app[CATALOG].create_catalog(check_name(body.get("name"), "name"), check_comment(body.get("comment")),
                                                    check_properties(body.get("properties")))
    return json_response(catalog_json(row))


async def list_catalogs(request: web.Request) -> web.Response:
    only_params(request, {"max_results", "page_token"})
    p = page(request)
    rows = await request.app[CATALOG].list_catalogs(p.after, p.limit)
    return json_response(p.reply("catalogs", [catalog_json(r) for r in rows], [r.name for r in rows]))


async def get_catalog(request: web.Request) -> web.Response:
    only_params(request, set())
    return json_response(catalog_json(await request.app[CATALOG].get_catalog(request.match_info["name"])))


async def delete_catalog(request: web.Request) -> web.Response:
    only_params(request, {"force"})
    await request.app[CATALOG].delete_catalog(request.match_info["name"])
    return json_response({})


async def create_schema(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await _body(request, NAME_FIELDS | {"catalog_name"})
    row = await request.app[CATALOG].create_schema(check_name(body.get("catalog_name"), "catalog_name"),
                                                   check_name(body.get("name"), "name"),
                                                   check_comment(body.get("comment")),
                                                   check_properties(body.get("properties")))
    return json_response(schema_json(row))


async def list_schemas(request: web.Request) -> web.Response:
    only_params(request, {"catalog_name", "max_results", "page_token"})
    p = page(request)
    rows = await request.app[CATALOG].list_schemas(check_name(request.query.get("catalog_name"), "catalog_name"), p.after, p.limit)
    return json_response(p.reply("schemas", [schema_json(r) for r in rows], [r.name for r in rows]))


async def get_schema(request: web.Request) -> web.Response:
    only_params(request, set())
    catalog, name = split_full_name(request.match_info["full_name"], 2)
    return json_response(schema_json(await request.app[CATALOG].get_schema(catalog, name)))


async def delete_schema(request: web.Request) -> web.Response:
    only_params(request, {"force"})
    catalog, name = split_full_name(request.match_info["full_name"], 2)
    await request.app[CATALOG].delete_schema(catalog, name)
    return json_response({})
