"""Handlers of ``/api/v1/tables/{id}/commits``: commit and getCommits."""

from __future__ import annotations

from aiohttp import web

from client.errors import InvalidArgumentError

from .errors import json_response, only_params, query_int
from .keys import SERVICE
from ..service import parse_uuid

NDJSON = ("application/x-ndjson", "application/json", "text/plain", "application/octet-stream")


async def commit(request: web.Request) -> web.Response:
    only_params(request, {"version"})
    table_id = parse_uuid(request.match_info["table_id"], "table id")
    version = query_int(request, "version", required=True)
    if request.content_type not in NDJSON:
        raise InvalidArgumentError("Content-Type must be application/x-ndjson")
    data = await request.read()
    key = request.headers.get("Idempotency-Key")
    request["table_id"], request["version"] = table_id, version
    result = await request.app[SERVICE].commit(table_id, version, data, key)  # type: ignore[arg-type]
    return json_response(result)


async def get_commits(request: web.Request) -> web.Response:
    only_params(request, {"startVersion", "endVersion"})
    table_id = parse_uuid(request.match_info["table_id"], "table id")
    start = query_int(request, "startVersion")
    end = query_int(request, "endVersion")
    return json_response(await request.app[SERVICE].get_commits(table_id, start, end))
