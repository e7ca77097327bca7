"""Handlers of ``/temporary-table-credentials`` and ``/temporary-path-credentials`` (credential vending).

Order of checks, so that a refusal issues nothing: for a table, the table and the token's read scope on its
registered location (unknown table 404, 403: the auth middleware, ``Locate.TABLE_ID_FIELD``), then the body;
for a path, the body; then the location's rules (``api/vending.py``: an allowed root, the token's scope for
the operation's action there, no registered table near a path write), then the vendor. Only then is STS
asked, counted and logged.
"""

from __future__ import annotations

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from coordinator.api.errors import json_body, json_response, only_params
from coordinator.api.keys import SERVICE
from coordinator.api.parse import parse_uuid
from coordinator.api.vending import issue, path_location, table_location
from coordinator.core.vending import PATH_OPERATIONS, TABLE_OPERATIONS, Access


def _operation(body: dict, allowed: dict[str, tuple[Access, str]]) -> tuple[str, Access, str]:
    op = body.get("operation")
    if op not in allowed:
        raise InvalidArgumentError(f"operation must be one of {', '.join(allowed)}")
    access, action = allowed[op]
    return op, access, action


async def table_credentials(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, {"table_id", "operation"})
    raw_id = body.get("table_id")
    if not isinstance(raw_id, str):
        raise InvalidArgumentError("table_id is required and must be a string")
    operation, access, action = _operation(body, TABLE_OPERATIONS)
    table = await request.app[SERVICE].reads.table(parse_uuid(raw_id, "table_id"))
    location = table_location(request, table, action)
    return json_response((await issue(request, location, operation, access, table.table_id)).to_json())


async def path_credentials(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, {"url", "operation"})
    url = body.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidArgumentError("url is required and must be a string")
    operation, access, action = _operation(body, PATH_OPERATIONS)
    location = await path_location(request, url, operation, access, action)
    return json_response((await issue(request, location, operation, access, None)).to_json())
