"""Handlers of ``/delta/preview/commits``: commit (POST) and getCommits (GET with a JSON body, or query)."""

from __future__ import annotations

from aiohttp import web

from client.contract.errors import InvalidArgumentError

from ..auth import require
from ..errors import json_body, json_response, only_params
from ..keys import UNITY

COMMIT_FIELDS = {"table_id", "table_uri", "commit_info", "latest_backfilled_version", "metadata", "uniform"}
GET_FIELDS = {"table_id", "table_uri", "start_version", "end_version"}


async def commit(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, COMMIT_FIELDS)
    if body.get("uniform") is not None:
        raise InvalidArgumentError("uniform (Iceberg conversion) is not supported")
    uc = request.app[UNITY]
    table = await uc.table_for(body)
    require(request, "commit", table.location)
    return json_response(await uc.commit(table, body))


async def get_commits(request: web.Request) -> web.Response:
    # Real clients send the request as a JSON body even on GET; the same fields as query parameters work too.
    only_params(request, GET_FIELDS)
    body = await json_body(request, GET_FIELDS)
    for key, raw in request.query.items():
        if key in body:
            raise InvalidArgumentError(f"{key} is given both in the query and in the body")
        if key in ("start_version", "end_version"):
            try:
                body[key] = int(raw)
            except ValueError:
                raise InvalidArgumentError(f"query parameter {key} must be an integer") from None
        else:
            body[key] = raw
    uc = request.app[UNITY]
    table = await uc.table_for(body)
    require(request, "read", table.location)
    return json_response(await uc.get_commits(table, body))
