"""Handlers of catalogs and schemas."""

from __future__ import annotations

from aiohttp import web

from ...unity import Page
from ..errors import json_body, json_response, only_params
from ..keys import UNITY

NAME_FIELDS = {"name", "comment", "properties", "storage_root"}


def page(request: web.Request) -> Page:
    return Page.parse(request.query.get("max_results"), request.query.get("page_token"))


async def _body(request: web.Request, allowed: set[str]) -> dict:
    body = await json_body(request, allowed)
    if body.get("storage_root") is not None:
        from client.contract.errors import InvalidArgumentError

        raise InvalidArgumentError("storage_root is not supported: managed tables go under --managed-location")
    return body


async def create_catalog(request: web.Request) -> web.Response:
    only_params(request, set())
    return json_response(await request.app[UNITY].create_catalog(await _body(request, NAME_FIELDS)))


async def list_catalogs(request: web.Request) -> web.Response:
    only_params(request, {"max_results", "page_token"})
    return json_response(await request.app[UNITY].list_catalogs(page(request)))


async def get_catalog(request: web.Request) -> web.Response:
    only_params(request, set())
    return json_response(await request.app[UNITY].get_catalog(request.match_info["name"]))


async def delete_catalog(request: web.Request) -> web.Response:
    only_params(request, {"force"})
    await request.app[UNITY].delete_catalog(request.match_info["name"])
    return json_response({})


async def create_schema(request: web.Request) -> web.Response:
    only_params(request, set())
    return json_response(await request.app[UNITY].create_schema(await _body(request, NAME_FIELDS | {"catalog_name"})))


async def list_schemas(request: web.Request) -> web.Response:
    only_params(request, {"catalog_name", "max_results", "page_token"})
    return json_response(await request.app[UNITY].list_schemas(request.query.get("catalog_name"), page(request)))


async def get_schema(request: web.Request) -> web.Response:
    only_params(request, set())
    return json_response(await request.app[UNITY].get_schema(request.match_info["full_name"]))


async def delete_schema(request: web.Request) -> web.Response:
    only_params(request, {"force"})
    await request.app[UNITY].delete_schema(request.match_info["full_name"])
    return json_response({})
