"""Handlers of staging tables and tables."""

from __future__ import annotations

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from client.contract.layout import normalize_location
from coordinator.api.auth import named_table, require
from coordinator.api.errors import json_body, json_object, json_response, only_fields, only_params
from coordinator.api.keys import CATALOG, VISIBLE
from coordinator.api.unity.names import page
from coordinator.api.unity.shapes import check_columns, table_json
from coordinator.core.catalog import MANAGED, check_comment, check_name, check_properties, check_table_type, new_name

TABLE_FIELDS = {"name", "catalog_name", "schema_name", "table_type", "data_source_format", "columns",
                "storage_location", "comment", "properties", "view_definition", "view_dependencies"}


async def create_staging_table(request: web.Request) -> web.Response:
    """The auth middleware judged admin under the managed root (``Locate.MANAGED``)."""
    catalog = request.app[CATALOG]
    only_params(request, set())
    body = await json_body(request, {"name", "catalog_name", "schema_name"})
    row = await catalog.reserve(check_name(body.get("catalog_name"), "catalog_name"),
                                check_name(body.get("schema_name"), "schema_name"), check_name(body.get("name"), "name"))
    return json_response({"id": row.id, "name": row.name, "catalog_name": row.catalog_name,
                          "schema_name": row.schema_name, "staging_location": row.location})


async def create_table(request: web.Request) -> web.Response:
    """MANAGED + DELTA at a staging location (or, without one, at a location allocated under the managed root),
    or EXTERNAL + DELTA at an allowed storage location."""
    body = await json_object(request)
    catalog = request.app[CATALOG]
    table_type = body.get("table_type")
    location = body.get("storage_location")
    if location is None and table_type == MANAGED:  # allocated under the managed root, as Unity Catalog does
        require(request, "admin", catalog.managed_scope())
    elif not isinstance(location, str) or not location:
        raise InvalidArgumentError("storage_location is required and must be a string (only a MANAGED table may "
                                   "leave it out: the catalog then allocates one under its managed root)")
    else:
        require(request, "admin", normalize_location(location), on_disk=True)
    only_params(request, set())
    only_fields(body, TABLE_FIELDS)
    table_type = check_table_type(table_type, "table_type")
    if body.get("data_source_format") != "DELTA":
        raise InvalidArgumentError("data_source_format must be DELTA")
    if body.get("view_definition") is not None or body.get("view_dependencies") is not None:
        raise InvalidArgumentError("view_definition and view_dependencies are only for views")
    named = new_name(check_name(body.get("catalog_name"), "catalog_name"),
                     check_name(body.get("schema_name"), "schema_name"), check_name(body.get("name"), "name"),
                     table_type,
                     columns=check_columns(body.get("columns")), properties=check_properties(body.get("properties")),
                     comment=check_comment(body.get("comment")))
    if location is None:
        table, name = await catalog.create_managed(named)
    else:
        table, name = await catalog.create_table(named, location)
    return json_response(table_json(table, name))


async def get_table(request: web.Request) -> web.Response:
    # Polars 2.1 repeats the name as a query parameter (?full_name=...): accepted when it is the same name.
    only_params(request, {"full_name", "read_streaming_table_as_managed", "read_materialized_view_as_managed"})
    full_name = request.match_info["full_name"]
    if request.query.get("full_name", full_name) != full_name:
        raise InvalidArgumentError("the full_name query parameter names another table than the path")
    table, name = await named_table(request)
    return json_response(table_json(table, name))


async def list_tables(request: web.Request) -> web.Response:
    only_params(request, {"catalog_name", "schema_name", "max_results", "page_token"})
    q, p = request.query, page(request)
    rows = await request.app[CATALOG].list_tables(check_name(q.get("catalog_name"), "catalog_name"),
                                                  check_name(q.get("schema_name"), "schema_name"), p.after, p.limit)
    visible = request.get(VISIBLE)
    shown = [table_json(t, n) for t, n in rows if visible is None or visible(t.location)]
    return json_response(p.reply("tables", shown, [n.name for _, n in rows]))


async def delete_table(request: web.Request) -> web.Response:
    only_params(request, set())
    table, _ = await named_table(request)
    await request.app[CATALOG].drop(table)
    return json_response({})
