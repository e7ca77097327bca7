"""Handlers of ``/temporary-table-credentials`` and ``/temporary-path-credentials`` (credential vending).

Order of checks, so that a refusal issues nothing: for a table, the table and the token's read scope on its
registered location (unknown table 404, 403: the auth middleware, ``Locate.TABLE_ID_FIELD``), then the body;
for a path, the body and the path (outside every allowed root 403); then the token's scope for the
operation's action on that location (403), then the vendor (S3 without ``vend_role_arn``: 400). Only then is
STS asked, counted and logged.
"""

from __future__ import annotations

import logging

from aiohttp import web

from client.contract.errors import InvalidArgumentError, PermissionDeniedError
from coordinator.api.auth import require
from coordinator.api.errors import json_body, json_response, only_params
from coordinator.api.keys import METRICS, PRINCIPAL, SERVICE, VENDOR
from coordinator.api.parse import parse_uuid
from coordinator.core.vending import PATH_OPERATIONS, TABLE_OPERATIONS, Access, Vended
from coordinator.security.tokens import session_name

log = logging.getLogger("commit_owner.vending")


def _operation(body: dict, allowed: dict[str, tuple[Access, str]]) -> tuple[str, Access, str]:
    op = body.get("operation")
    if op not in allowed:
        raise InvalidArgumentError(f"operation must be one of {', '.join(allowed)}")
    access, action = allowed[op]
    return op, access, action


async def issue(request: web.Request, location: str, operation: str, access: Access,
                table_id: str | None) -> Vended:
    """Vend credentials for a location the request was already checked for; counted and logged."""
    principal = request.get(PRINCIPAL)
    token_id = principal.token_id if principal is not None else "-"
    session = session_name(token_id)
    vended: Vended = await request.app[VENDOR].vend(location, access, session_name=session, token_id=token_id,
                                                    operation=operation)
    kind = "s3" if vended.aws is not None else "local"
    request.app[METRICS].credentials_issued.labels(operation, kind).inc()
    log.info("issued %s credentials (%s) for %s %s, expiring at %d ms, token %s", operation, kind,
             "table" if table_id else "path", table_id or location, vended.expiration_ms, token_id)
    return vended


async def table_credentials(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, {"table_id", "operation"})
    raw_id = body.get("table_id")
    if not isinstance(raw_id, str):
        raise InvalidArgumentError("table_id is required and must be a string")
    operation, access, action = _operation(body, TABLE_OPERATIONS)
    table = await request.app[SERVICE].reads.table(parse_uuid(raw_id, "table_id"))
    request.app[SERVICE].registry.check_location(table.location)
    require(request, action, table.location, on_disk=True)
    return json_response((await issue(request, table.location, operation, access, table.table_id)).to_json())


async def path_credentials(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, {"url", "operation"})
    url = body.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidArgumentError("url is required and must be a string")
    operation, access, action = _operation(body, PATH_OPERATIONS)
    location = request.app[SERVICE].registry.check_location(url)
    require(request, action, location, on_disk=True)
    if access != "read":
        # A path write credential never reaches a registered table's files (its _delta_log included):
        # a table's writers ask for temporary-table-credentials.
        if await request.app[SERVICE].reads.tables_near(location):
            raise PermissionDeniedError(
                f"{operation} is refused: a registered table lies at, above or below this path; ask "
                "temporary-table-credentials with its table_id")
    return json_response((await issue(request, location, operation, access, None)).to_json())
