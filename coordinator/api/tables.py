"""Handlers of ``/api/v1/tables``: register, look up, list, backfill."""

from __future__ import annotations

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from client.contract.tables import table_json
from coordinator.api.errors import json_body, json_response, only_params
from coordinator.api.keys import SERVICE, VISIBLE
from coordinator.api.parse import int_field, location_field, parse_uuid
from coordinator.core.catalog import owned_name

REGISTER_FIELDS = {"location", "currentVersion", "commitDir", "name", "tableType"}  # the body of registerTable


async def register_table(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, REGISTER_FIELDS)
    location = location_field(body)
    current = int_field(body, "currentVersion", default=-1, minimum=-1)
    commit_dir = body.get("commitDir")
    if commit_dir is not None and not isinstance(commit_dir, str):
        raise InvalidArgumentError("commitDir must be a string")
    if body.get("name") is not None:
        name = owned_name(body["name"], body.get("tableType"), commit_dir)
    elif body.get("tableType") is not None:
        raise InvalidArgumentError("tableType is only for a table registered with a name")
    else:
        name = None
    table = await request.app[SERVICE].registry.register_table(location, current, commit_dir,  # type: ignore[arg-type]
                                                               name=name)
    return json_response(table_json(table), status=201)


async def forget_table(request: web.Request) -> web.Response:
    only_params(request, set())
    table_id = parse_uuid(request.match_info["table_id"], "table id")
    await request.app[SERVICE].registry.forget_table(table_id)
    return web.Response(status=204)


async def get_table(request: web.Request) -> web.Response:
    only_params(request, set())
    table_id = parse_uuid(request.match_info["table_id"], "table id")
    return json_response(table_json(await request.app[SERVICE].reads.table(table_id)))


async def list_tables(request: web.Request) -> web.Response:
    only_params(request, {"location"})
    location = request.query.get("location")
    if location is not None:
        table = await request.app[SERVICE].reads.find_table(location)
        return json_response(table_json(table))
    tables = await request.app[SERVICE].reads.tables()
    visible = request.get(VISIBLE)  # set by the auth middleware: only tables the token may read
    return json_response({"tables": [table_json(t) for t in tables if visible is None or visible(t.location)]})


async def backfill(request: web.Request) -> web.Response:
    only_params(request, set())
    table_id = parse_uuid(request.match_info["table_id"], "table id")
    body = await json_body(request, {"version", "lastKnownBackfilledVersion"})
    version = int_field(body, "version", minimum=0)
    last_known = int_field(body, "lastKnownBackfilledVersion", minimum=-1)
    table = await request.app[SERVICE].registry.backfill(table_id, version, last_known)
    return json_response(table_json(table))
