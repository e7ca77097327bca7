"""What every API's credential routes share (the Unity Catalog facade's and the Delta REST Catalog API's):
which location a credential may open, checked in the order that lets a refusal issue nothing, and the
vending itself, counted and logged. Only the operation names and the reply's shape are an API's own.

The order: the location lies under an allowed root (403), the token holds the operation's action there, its
real path on local disk included (403), a path write credential reaches no registered table (403); then the
vendor (S3 without ``vend_role_arn``, Azure without a key or an identity, GCS without credentials: 400). Only
then is a cloud's token service asked (or, for an Azure service SAS, the key used).
"""

from __future__ import annotations

import logging

from aiohttp import web

from client.contract.errors import PermissionDeniedError
from coordinator.api.auth import require
from coordinator.api.keys import METRICS, PRINCIPAL, SERVICE, VENDOR
from coordinator.core.vending import Access, Vended
from coordinator.security.tokens import session_name
from coordinator.store.rows import TableRow

log = logging.getLogger("commit_owner.vending")


def table_location(request: web.Request, table: TableRow, action: str) -> str:
    """The location a table credential opens: the table's, under an allowed root, the token holding ``action``
    there."""
    request.app[SERVICE].registry.check_location(table.location)
    require(request, action, table.location, on_disk=True)
    return table.location


async def path_location(request: web.Request, raw: str, operation: str, access: Access, action: str) -> str:
    """The location a path credential opens: ``raw`` normalized, under an allowed root, the token holding
    ``action`` there; a write credential never reaches a registered table's files (its ``_delta_log``
    included): a table's writers ask for the table's credentials."""
    location = request.app[SERVICE].registry.check_location(raw)
    require(request, action, location, on_disk=True)
    if access != "read" and await request.app[SERVICE].reads.tables_near(location):
        raise PermissionDeniedError(f"{operation} is refused: a registered table lies at, above or below this "
                                    "path; ask for that table's credentials (by its table id)")
    return location


async def issue(request: web.Request, location: str, operation: str, access: Access,
                table_id: str | None) -> Vended:
    """Vend credentials for a location the request was already checked for; counted and logged."""
    principal = request.get(PRINCIPAL)
    token_id = principal.token_id if principal is not None else "-"
    session = session_name(token_id)
    vended: Vended = await request.app[VENDOR].vend(location, access, session_name=session, token_id=token_id,
                                                    operation=operation)
    kind = vended.kind
    request.app[METRICS].credentials_issued.labels(operation, kind).inc()
    log.info("issued %s credentials (%s) for %s %s, expiring at %d ms, token %s", operation, kind,
             "table" if table_id else "path", table_id or location, vended.expiration_ms, token_id)
    return vended
