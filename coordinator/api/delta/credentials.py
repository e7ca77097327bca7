"""Handlers of the Delta REST Catalog API's credentials: a table's, a staging table's, a path's.

The checks and the vending are every API's (``api/vending.py``): the location must lie under an allowed root,
the token must hold the operation's action there, and a path write credential never reaches a registered
table. Only the operations' names and the reply's shape are this API's.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from coordinator.api.auth import named_table, staging_of
from coordinator.api.errors import json_response, only_params
from coordinator.api.vending import issue, path_location, table_location
from coordinator.core.vending import DELTA_PATH_OPERATIONS, TABLE_OPERATIONS, Vended

AWS_KEYS = {"access_key_id": "s3.access-key-id", "secret_access_key": "s3.secret-access-key",
            "session_token": "s3.session-token"}


def config_of(vended: Vended) -> dict[str, str]:
    """The credential as this API's ``config`` keys (strings, expiries in ms as text)."""
    config = {AWS_KEYS[k]: v for k, v in (vended.aws or {}).items() if k in AWS_KEYS}
    if vended.azure_sas is not None:
        config |= {"azure.sas-token": vended.azure_sas, "azure.sas-token-expires-at-ms": str(vended.expiration_ms)}
    if vended.gcs_token is not None:
        config |= {"gcs.oauth-token": vended.gcs_token, "gcs.oauth-token-expires-at-ms": str(vended.expiration_ms)}
    return config


def _reply(vended: Vended, operation: str) -> dict[str, Any]:
    config = config_of(vended)
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
    location = table_location(request, table, action)
    return json_response(_reply(await issue(request, location, operation, access, table.table_id), operation))


async def staging_credentials(request: web.Request) -> web.Response:
    """READ_WRITE always: the writer writes version 0 of the table it is creating. The auth middleware judged
    admin on the staging table's location (``Locate.STAGING_ID``)."""
    staging = await staging_of(request)
    only_params(request, set())
    return json_response(_reply(await issue(request, staging.location, "READ_WRITE", "write", staging.id),
                                "READ_WRITE"))


async def path_credentials(request: web.Request) -> web.Response:
    only_params(request, {"location", "operation"})
    operation = _operation(request, DELTA_PATH_OPERATIONS)
    access, action = DELTA_PATH_OPERATIONS[operation]
    raw = request.query.get("location")
    if not raw:
        raise InvalidArgumentError("location is required")
    location = await path_location(request, raw, operation, access, action)
    return json_response(_reply(await issue(request, location, operation, access, None), operation))
