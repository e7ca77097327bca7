"""Handlers of the Delta REST Catalog API's credentials: a table's, a staging table's, a path's.

The checks and the vending are the Unity Catalog facade's (``api/unity/credentials.issue``): the location must
lie under an allowed root, the token must hold the operation's action there, and a path write credential never
reaches a registered table. Only the reply's shape is this API's.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from client.contract.errors import InvalidArgumentError, PermissionDeniedError
from coordinator.api.auth import named_table, require
from coordinator.api.errors import json_response, only_params
from coordinator.api.keys import CATALOG, SERVICE
from coordinator.api.parse import parse_uuid
from coordinator.api.unity.credentials import issue
from coordinator.core.vending import TABLE_OPERATIONS, Vended

# This API's operations for a path: READ, or READ_WRITE to create an external table there.
PATH_OPERATIONS = {"READ": ("read", "read"), "READ_WRITE": ("write", "commit")}
AWS_KEYS = {"access_key_id": "s3.access-key-id", "secret_access_key": "s3.secret-access-key",
            "session_token": "s3.session-token"}


def _reply(vended: Vended, operation: str) -> dict[str, Any]:
    config = {AWS_KEYS[k]: v for k, v in (vended.aws or {}).items() if k in AWS_KEYS}
    prefix = vended.url.rstrip("/") + "/"
    return {"storage-credentials": [{"prefix": prefix, "operation": operation,
                                     "expiration-time-ms": vended.expiration_ms, "config": config}]}


def _operation(request: web.Request, allowed: dict[str, Any]) -> str:
    op = request.query.get("operation")
    if op not in allowed:
        raise InvalidArgumentError(f"operation must be one of {', '.join(allowed)}")
    return op  # type: ignore[return-value]


async def table_credentials(request: web.Request) -> web.Response:
    only_params(request, {"operation"})
    operation = _operation(request, TABLE_OPERATIONS)
    access, action = TABLE_OPERATIONS[operation]
    table, _ = await named_table(request)
    request.app[SERVICE].registry.check_location(table.location)
    require(request, action, table.location, on_disk=True)
    return json_response(_reply(await issue(request, table.location, operation, access, table.table_id), operation))


async def staging_credentials(request: web.Request) -> web.Response:
    """READ_WRITE always: the writer writes version 0 of the table it is creating."""
    staging = await request.app[CATALOG].staging(parse_uuid(request.match_info["staging_id"], "table id"))
    require(request, "admin", staging.location, on_disk=True)
    only_params(request, set())
    return json_response(_reply(await issue(request, staging.location, "READ_WRITE", "write", staging.id),
                                "READ_WRITE"))


async def path_credentials(request: web.Request) -> web.Response:
    only_params(request, {"location", "operation"})
    operation = _operation(request, PATH_OPERATIONS)
    access, action = PATH_OPERATIONS[operation]
    raw = request.query.get("location")
    if not raw:
        raise InvalidArgumentError("location is required")
    location = request.app[SERVICE].registry.check_location(raw)
    require(request, action, location, on_disk=True)
    if access != "read" and await request.app[SERVICE].reads.tables_near(location):
        raise PermissionDeniedError(f"{operation} is refused: a registered table lies at, above or below this "
                                    "path; ask for the table's credentials")
    return json_response(_reply(await issue(request, location, operation, access, None), operation))  # type: ignore[arg-type]
