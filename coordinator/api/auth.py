"""Authentication and authorization of the HTTP API.

``--auth tokens``: every request except the public routes (the probes and the OpenAPI document) needs
``Authorization: Bearer <token>``, one credential (``authenticate``). Missing, malformed, unknown, revoked or
more than one -> 401 UNAUTHENTICATED; a valid token whose scopes do not grant the route's permission on the
table's location -> 403 PERMISSION_DENIED. Each route's permission and where its location comes from
(``Locate``: the table of the path's id or name, the table of the request's ``table_id``, the JSON body of a
registration, the managed root, the staging reservation of the path, the ``location`` query parameter, or
the handler) are fields of its ``Route`` (routes.py); a request no route matched gets 404/405 once
authenticated. The permission is judged before anything else of the request: the middleware reads only what
locates the table, the handler judges the rest. A ``Locate.HANDLER`` route fails closed: whatever the auth
mode, its handler's success is refused (403, logged as the server's fault) unless the handler called
``require`` (``_fails_closed``). Listing shows
only the tables the token may read, and a table named by a name the token may not read is answered as a
name that names no table (``_named``); a table named by its id is 403 (an id is not guessed: it is given).

``--auth none`` serves everyone and is refused on a non-loopback address unless
``--allow-insecure-no-auth`` is given.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from client.contract.errors import PermissionDeniedError, UnauthenticatedError
from client.contract.layout import local_path, normalize_location
from coordinator.api.errors import api_of, error_response, json_object
from coordinator.api.keys import (
    CATALOG,
    LOCATION_CHECKED,
    NAMED,
    OUTCOME,
    PRINCIPAL,
    REQUEST_ID,
    SERVICE,
    SETTINGS,
    STAGING,
    STORE,
    VISIBLE,
)
from coordinator.api.parse import location_field, parse_uuid
from coordinator.api.routes import ROUTE_TABLE, Handler, Locate, Permission, Route
from coordinator.core.catalog import check_name, split_full_name
from coordinator.runtime.settings import Settings
from coordinator.security.tokens import Principal, secret_matches, split_token
from coordinator.store.rows import NameRow, StagingRow, TableRow
from coordinator.store.tokens import TokenStore

log = logging.getLogger("commit_owner.auth")

TOKENS = web.AppKey("tokens", TokenStore)

def require(request: web.Request, action: str, location: str, *, on_disk: bool = False) -> None:
    """Raise PermissionDeniedError unless the request's token may ``action`` on ``location`` (a no-op with
    ``--auth none``). ``on_disk``: also check the real path of a local location (symlinks). Records that the
    check ran (``LOCATION_CHECKED``): a ``Locate.HANDLER`` route may answer only then."""
    principal: Principal | None = request.get(PRINCIPAL)
    if principal is not None:
        if not principal.may(action, location):
            raise _denied(principal, action)
        if on_disk and location.startswith("file://"):
            if not principal.may_on_disk(action, os.path.realpath(local_path(location))):
                raise _denied(principal, action)
    request[LOCATION_CHECKED] = True


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


async def authenticate(request: web.Request, *, cookie: str | None = None) -> Principal:
    """The principal of the request's one credential: the bearer token of its Authorization header or, when
    ``cookie`` names one (the browser UI's session), of that cookie. Raises UnauthenticatedError.

    A request carries exactly one credential. Two Authorization headers, two credentials in one, a header beside
    the session cookie or the cookie twice are refused, whichever tokens they hold: which of them would count
    is a guess a proxy, a framework and this owner may each make differently, so the owner makes none."""
    headers = request.headers.getall("Authorization", [])
    cookies = _session_cookies(request, cookie) if cookie is not None else []
    if len(headers) + len(cookies) > 1:
        raise UnauthenticatedError("send one credential: a single Authorization header reading Bearer <token> "
                                   "(or, in the browser UI, the session cookie alone)")
    if cookies:
        return await principal_of(request.app, cookies[0])
    if not headers:
        raise UnauthenticatedError("authentication required: send Authorization: Bearer <token>")
    words = headers[0].split()
    if len(words) != 2 or words[0].lower() != "bearer" or "," in words[1]:
        raise UnauthenticatedError("the Authorization header must read: Bearer <token> (one token)")
    return await principal_of(request.app, words[1])


def _session_cookies(request: web.Request, name: str) -> list[str]:
    """Every non-empty value of the cookie ``name`` the request sends, over all its Cookie headers (aiohttp's
    ``request.cookies`` keeps one of them, which hides a second)."""
    values = []
    for header in request.headers.getall("Cookie", []):
        for pair in header.split(";"):
            key, _, value = pair.strip().partition("=")
            value = value.strip().strip('"')
            if key == name and value:
                values.append(value)
    return values


async def principal_of(app: web.Application, credential: str) -> Principal:
    """The principal of a bearer token. Raises UnauthenticatedError (malformed, unknown or revoked)."""
    parts = split_token(credential.strip())
    row = await app[TOKENS].get(parts[0]) if parts else None
    ok = secret_matches(parts[1] if parts else "", row.hash if row is not None else None)
    if not ok or row is None or row.revoked is not None:
        raise UnauthenticatedError("the bearer token is invalid or revoked")
    return Principal.from_scopes(row.id, row.scopes)


def _denied(principal: Principal, action: str) -> PermissionDeniedError:
    return PermissionDeniedError(f"token {principal.token_id} has no {action} scope covering this table")


async def _body_location(request: web.Request) -> list[str]:
    # The same parser and normaliser as the handler, so both see the same location; the handler judges the
    # rest of the body once the permission is granted.
    return [normalize_location(location_field(await json_object(request)))]


async def named_table(request: web.Request) -> tuple[TableRow, NameRow]:
    """The table the path of a ``Locate.NAME`` route names. The auth middleware found it, and judged the token's
    permission on it, before the handler ran; with ``--auth none`` it is looked up here."""
    hit = request.get(NAMED)
    return hit if hit is not None else await _named(request, None)


async def staging_of(request: web.Request) -> StagingRow:
    """The staging reservation the path of a ``Locate.STAGING_ID`` route names (found and judged by the auth
    middleware; with ``--auth none`` looked up here). Raises TableNotFoundError."""
    hit = request.get(STAGING)
    return hit if hit is not None else await _staging(request)


async def _staging(request: web.Request) -> StagingRow:
    return await request.app[CATALOG].staging(parse_uuid(request.match_info["staging_id"], "table id"))


async def _named(request: web.Request, principal: Principal | None) -> tuple[TableRow, NameRow]:
    """The table the path names, as the token sees it: a table it may not read (it holds no scope over its
    location) is answered exactly as a name that names no table. Raises TableNotFoundError."""
    m = request.match_info
    if "full_name" in m:
        catalog, schema, name = split_full_name(m["full_name"], 3)
    else:
        catalog, schema, name = (check_name(m[part], part) for part in ("catalog", "schema", "table"))
    visible = None if principal is None else functools.partial(principal.may, "read")
    return await request.app[CATALOG].named(catalog, schema, name, visible=visible)


async def _locations(request: web.Request, route: Route, principal: Principal) -> list[str] | None:
    """The locations a request acts on (None: a listing, filtered afterwards)."""
    if route.locate is Locate.TABLE_ID:
        table_id = parse_uuid(request.match_info["table_id"], "table id")
        return [await request.app[SERVICE].reads.location_of(table_id)]
    if route.locate is Locate.NAME:
        request[NAMED] = await _named(request, principal)
        return [request[NAMED][0].location]
    if route.locate is Locate.TABLE_ID_FIELD:
        body = await json_object(request)
        table_id = parse_uuid(body.get("table_id", request.query.get("table_id")), "table_id")
        return [await request.app[SERVICE].reads.location_of(table_id)]
    if route.locate is Locate.BODY:
        return await _body_location(request)
    if route.locate is Locate.MANAGED:
        return [request.app[CATALOG].managed_scope()]
    if route.locate is Locate.STAGING_ID:
        request[STAGING] = await _staging(request)
        return [request[STAGING].location]
    location = request.query.get("location")  # Locate.QUERY, and Locate.HANDLER before its handler's check
    return None if location is None else [normalize_location(location)]


async def _fails_closed(handler: Handler, route: Route, request: web.Request) -> web.StreamResponse:
    """The answer of a ``Locate.HANDLER`` route's handler, refused when it succeeded without checking the
    token's permission on its location (``require``): a handler that forgets its check answers 403, never
    what the check would have guarded."""
    response = await handler(request)
    if response.status < 400 and not request.get(LOCATION_CHECKED):
        log.error("%s %s answered without checking the permission on its location (auth.require): refused",
                  route.method, route.path)
        raise PermissionDeniedError("refused: the server answered this request without checking its permission "
                                    "on the location (a fault of the server, logged)")
    return response


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    route = request.app[ROUTE_TABLE].route_of(request)
    if route is not None and route.locate is Locate.HANDLER:
        handler = functools.partial(_fails_closed, handler, route)
    if request.app[SETTINGS].auth == "none":
        return await handler(request)
    info = request.match_info
    # A route outside the table cannot be matched; were it, it would need admin over every location.
    permission = route.permission if route is not None else Permission.ADMIN_EVERYWHERE
    if permission is Permission.PUBLIC:
        return await handler(request)
    try:
        principal = await authenticate(request, cookie=api_of(request).session_cookie)
    except UnauthenticatedError as e:
        request[OUTCOME] = e.code
        resp = error_response(e, request.get(REQUEST_ID), api=api_of(request))
        resp.headers["WWW-Authenticate"] = 'Bearer realm="commit-owner"'
        return resp
    request[PRINCIPAL] = principal
    if info.http_exception is not None:
        return await handler(request)  # 404 / 405, answered to authenticated callers only
    if permission is Permission.BROWSE:
        return await handler(request)  # the handler shows what the principal may read
    if permission is Permission.WATCH:
        if not principal.may_watch():
            raise PermissionDeniedError(f"token {principal.token_id} needs the ops scope (*:ops) or admin over "
                                        "every location (*) here")
        return await handler(request)
    action = permission.action
    if action is None:  # Permission.ADMIN_EVERYWHERE
        if not principal.may_everywhere("admin"):
            raise PermissionDeniedError(f"token {principal.token_id} needs admin over every location (*) here")
        return await handler(request)
    if not principal.may(action):
        raise _denied(principal, action)
    assert route is not None  # (a scoped permission is a route's)
    locations = await _locations(request, route, principal)
    if locations is None:
        visible: Callable[[str], bool] = lambda loc: principal.may(action, loc)  # noqa: E731
        request[VISIBLE] = visible
    elif not all(principal.may(action, loc) for loc in locations):
        raise _denied(principal, action)
    elif route.locate in (Locate.BODY, Locate.STAGING_ID) and locations[0].startswith("file://"):
        # On local disk a symlink must not carry a registration or a staging table out of the token's prefix.
        if not principal.may_on_disk(action, os.path.realpath(local_path(locations[0]))):
            raise _denied(principal, action)
    return await handler(request)
