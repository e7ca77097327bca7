"""Handlers of staging tables and tables."""

from __future__ import annotations

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from client.contract.layout import normalize_location

from ..auth import require
from ..errors import json_body, json_response, only_params
from ..keys import UNITY, VISIBLE
from .names import page

TABLE_FIELDS = {"name", "catalog_name", "schema_name", "table_type", "data_source_format", "columns",
                "storage_location", "comment", "properties", "view_definition", "view_dependencies"}


async def create_staging_table(request: web.Request) -> web.Response:
    only_params(request, set())
    uc = request.app[UNITY]
    body = await json_body(request, {"name", "catalog_name", "schema_name"})
    require(request, "admin", uc.managed_root() + "/x")
    return json_response(await uc.create_staging_table(body))


async def create_table(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, TABLE_FIELDS)
    location = body.get("storage_location")
    if not isinstance(location, str) or not location:
        raise InvalidArgumentError("storage_location is required and must be a string")
    require(request, "admin", normalize_location(location), on_disk=True)
    return json_response(await request.app[UNITY].create_table(body))


async def get_table(request: web.Request) -> web.Response:
    # Polars 2.1 repeats the name as a query parameter (?full_name=...): accepted when it is the same name.
    only_params(request, {"full_name", "read_streaming_table_as_managed", "read_materialized_view_as_managed"})
    from ...unity import table_json

    full_name = request.match_info["full_name"]
    if request.query.get("full_name", full_name) != full_name:
        raise InvalidArgumentError("the full_name query parameter names another table than the path")
    table, name = await request.app[UNITY].named_table(full_name)
    require(request, "read", table.location)
    return json_response(table_json(table, name))


async def list_tables(request: web.Request) -> web.Response:
    only_params(request, {"catalog_name", "schema_name", "max_results", "page_token"})
    q = request.query
    return json_response(await request.app[UNITY].list_tables(q.get("catalog_name"), q.get("schema_name"),
                                                              page(request), request.get(VISIBLE)))


async def delete_table(request: web.Request) -> web.Response:
    only_params(request, set())
    uc = request.app[UNITY]
    table, _ = await uc.named_table(request.match_info["full_name"])
    require(request, "admin", table.location)
    await uc.delete_table(table)
    return json_response({})
