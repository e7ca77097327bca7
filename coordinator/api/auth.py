"""Authentication and authorization of the HTTP API.

``--auth tokens``: every request except the probes and the OpenAPI document needs
``Authorization: Bearer <token>``. Missing, malformed, unknown or revoked -> 401 UNAUTHENTICATED; a
valid token whose scopes do not grant the route's action on the table's location -> 403
PERMISSION_DENIED. The location comes from the table row (routes with a table id), the JSON body
(register) or the ``location`` query parameter (lookup); listing shows only the tables the token may read.

``--auth none`` serves everyone and is refused on a non-loopback address unless
``--allow-insecure-no-auth`` is given.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from client.contract.errors import InvalidArgumentError, PermissionDeniedError, UnauthenticatedError
from client.contract.layout import local_path, normalize_location
from coordinator.security.tokens import Principal, secret_matches, split_token

from ..settings import Settings
from ..store.tokens import TokenStore
from .errors import Handler, error_response, json_body
from .keys import OUTCOME, PRINCIPAL, REQUEST_ID, SERVICE, SETTINGS, STORE, VISIBLE
from .parse import parse_uuid

log = logging.getLogger("commit_owner.auth")

TOKENS = web.AppKey("tokens", TokenStore)

API = "/api/v1"
PUBLIC = frozenset({("GET", "/healthz"), ("GET", "/readyz"), ("GET", f"{API}/openapi.json")})
# (method, route template) -> the action it needs. Routes not listed need admin over every location ("*").
ROUTE_ACTIONS = {
    ("POST", f"{API}/tables"): "admin",
    ("GET", f"{API}/tables"): "read",
    ("GET", f"{API}/tables/{{table_id}}"): "read",
    ("DELETE", f"{API}/tables/{{table_id}}"): "admin",
    ("POST", f"{API}/tables/{{table_id}}/commits"): "commit",
    ("GET", f"{API}/tables/{{table_id}}/commits"): "read",
    ("POST", f"{API}/tables/{{table_id}}/backfill"): "admin",
}
# What a monitoring system reads: open to an ops token (and to admin over "*"), never to table scopes.
WATCH = frozenset({("GET", "/metrics"), ("GET", "/")})
REGISTER_FIELDS = {"location", "currentVersion", "commitDir", "name"}

# The Unity Catalog facade: the middleware checks that the token holds the action somewhere; the handler,
# once it knows the table's location, calls ``require`` for that location. Creating and dropping catalogs
# and schemas is left out on purpose: it needs admin over every location ("*").
UC = "/api/2.1/unity-catalog"
ROUTE_ACTIONS.update({
    ("GET", f"{UC}/catalogs"): "read",
    ("GET", f"{UC}/catalogs/{{name}}"): "read",
    ("GET", f"{UC}/schemas"): "read",
    ("GET", f"{UC}/schemas/{{full_name}}"): "read",
    ("POST", f"{UC}/staging-tables"): "admin",
    ("POST", f"{UC}/tables"): "admin",
    ("GET", f"{UC}/tables"): "read",
    ("GET", f"{UC}/tables/{{full_name}}"): "read",
    ("DELETE", f"{UC}/tables/{{full_name}}"): "admin",
    ("POST", f"{UC}/delta/preview/commits"): "commit",
    ("GET", f"{UC}/delta/preview/commits"): "read",
    # the handler asks READ_WRITE / PATH_READ_WRITE for commit and PATH_CREATE_TABLE for admin
    ("POST", f"{UC}/temporary-table-credentials"): "read",
    ("POST", f"{UC}/temporary-path-credentials"): "read",
})


def require(request: web.Request, action: str, location: str, *, on_disk: bool = False) -> None:
    """Raise PermissionDeniedError unless the request's token may ``action`` on ``location`` (a no-op with
    ``--auth none``). ``on_disk``: also check the real path of a local location (symlinks)."""
    principal: Principal | None = request.get(PRINCIPAL)
    if principal is None:
        return
    if not principal.may(action, location):
        raise _denied(principal, action)
    if on_disk and location.startswith("file://"):
        if not principal.may_on_disk(action, os.path.realpath(local_path(location))):
            raise _denied(principal, action)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_auth_mode(settings: Settings, *, warn: bool = True) -> None:
    """Refuse ``auth = none`` on a non-loopback address unless forced. Raises ValueError with the remedy."""
    if settings.auth != "none" or is_loopback(settings.host):
        return
    if not settings.allow_insecure_no_auth:
        raise ValueError(
            f"refusing to listen on {settings.host or 'every address'} without authentication: "
            "use --auth tokens (create tokens with `commit-owner tokens create --scope ...`), "
            "or --allow-insecure-no-auth to accept that anyone who reaches the port may commit")
    if warn:
        log.warning("authentication is OFF on non-loopback address %s (--allow-insecure-no-auth): anyone who "
                    "reaches this port can register tables and commit", settings.host)


async def tokens_ctx(app: web.Application) -> AsyncIterator[None]:
    app[TOKENS] = TokenStore(app[STORE].engine)
    yield


async def authenticate(request: web.Request) -> Principal:
    header = request.headers.get("Authorization", "")
    if not header:
        raise UnauthenticatedError("authentication required: send Authorization: Bearer <token>")
    scheme, _, credential = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise UnauthenticatedError("the Authorization header must read: Bearer <token>")
    parts = split_token(credential.strip())
    row = await request.app[TOKENS].get(parts[0]) if parts else None
    ok = secret_matches(parts[1] if parts else "", row.hash if row is not None else None)
    if not ok or row is None or row.revoked is not None:
        raise UnauthenticatedError("the bearer token is invalid or revoked")
    return Principal.from_scopes(row.id, row.scopes)


def _denied(principal: Principal, action: str) -> PermissionDeniedError:
    return PermissionDeniedError(f"token {principal.token_id} has no {action} scope covering this table")


async def _register_location(request: web.Request) -> list[str]:
    # The same parser and normaliser as the handler, so both see the same location.
    body = await json_body(request, REGISTER_FIELDS)
    loc = body.get("location")
    if not isinstance(loc, str):
        raise InvalidArgumentError("location is required and must be a string")
    return [normalize_location(loc)]


async def _locations(request: web.Request, route: tuple[str, str]) -> list[str] | None:
    """The locations a request acts on (None: a listing, filtered afterwards)."""
    if "{table_id}" in route[1]:
        table_id = parse_uuid(request.match_info["table_id"], "table id")
        return [(await request.app[SERVICE].place(table_id)).location]
    if route == ("POST", f"{API}/tables"):
        return await _register_location(request)
    location = request.query.get("location")
    return None if location is None else [normalize_location(location)]


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.app[SETTINGS].auth == "none":
        return await handler(request)
    info = request.match_info
    method = "GET" if request.method == "HEAD" else request.method
    template = info.route.resource.canonical if info.route.resource is not None else request.path
    route = (method, template)
    if route in PUBLIC:
        return await handler(request)
    try:
        principal = await authenticate(request)
    except UnauthenticatedError as e:
        request[OUTCOME] = e.code
        resp = error_response(e, request.get(REQUEST_ID), path=request.path)
        resp.headers["WWW-Authenticate"] = 'Bearer realm="commit-owner"'
        return resp
    request[PRINCIPAL] = principal
    if info.http_exception is not None:
        return await handler(request)  # 404 / 405, answered to authenticated callers only
    if route in WATCH:
        if not principal.may_watch():
            raise PermissionDeniedError(f"token {principal.token_id} needs the ops scope (*:ops) or admin over "
                                        "every location (*) here")
        return await handler(request)
    action = ROUTE_ACTIONS.get(route)
    if action is None:
        if not principal.may_everywhere("admin"):
            raise PermissionDeniedError(f"token {principal.token_id} needs admin over every location (*) here")
        return await handler(request)
    if not principal.may(action):
        raise _denied(principal, action)
    locations = await _locations(request, route)
    if locations is None:
        visible: Callable[[str], bool] = lambda loc: principal.may(action, loc)  # noqa: E731
        request[VISIBLE] = visible
    elif not all(principal.may(action, loc) for loc in locations):
        raise _denied(principal, action)
    elif route == ("POST", f"{API}/tables") and locations[0].startswith("file://"):
        # On local disk a symlink must not carry a registration out of the token's prefix either.
        if not principal.may_on_disk(action, os.path.realpath(local_path(locations[0]))):
            raise _denied(principal, action)
    return await handler(request)
