"""What a route is, and the one table of them that the router, the auth middleware, the error envelope and
the OpenAPI document all read.

Each API declares itself once (an ``Api``: its path prefix, its error envelope, the file of its OpenAPI
operations) beside its envelope, and its routes once, as a list of ``Route`` (``v1.ROUTES``,
``unity/routes.py`` ``ROUTES``). ``app.py`` concatenates the lists into a ``RouteTable``, which registers
them on the router; nothing else lists routes. This module imports no handler, so every package may
import it.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from client.contract.errors import CommitOwnerError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# An API's error reply: the error -> (HTTP status, JSON body).
Envelope = Callable[[CommitOwnerError], tuple[int, dict[str, Any]]]
# How an API writes its envelope: (HTTP status, envelope) -> the reply (JSON unless the API says otherwise).
Reply = Callable[[int, dict[str, Any]], web.Response]


class Permission(enum.Enum):
    """What a request needs (``--auth tokens``; ``--auth none`` serves everyone)."""

    PUBLIC = "public"  # no token at all
    WATCH = "watch"  # the ops scope (*:ops) or admin over every location: what a monitoring system reads
    READ = "read"  # a token holding the action on the request's location (see Locate)
    COMMIT = "commit"
    ADMIN = "admin"
    ADMIN_EVERYWHERE = "admin-everywhere"  # admin over every location ("*")
    # any valid token: the handler shows only what the token may read (the browser UI: every table for the
    # ops scope or admin over "*", else the tables its read scopes cover)
    BROWSE = "browse"

    @property
    def action(self) -> str | None:
        """The scope action checked against a location (read, commit, admin), None for the others."""
        return self.value if self in (Permission.READ, Permission.COMMIT, Permission.ADMIN) else None


class Locate(enum.Enum):
    """Where the auth middleware finds the location a READ / COMMIT / ADMIN route acts on. For the kinds that
    name a place (TABLE_ID, NAME, TABLE_ID_FIELD, BODY, MANAGED, STAGING_ID) it finds it and judges the
    permission before the handler runs, so no handler can judge a request's body or query first. HANDLER
    routes fail closed: their handler's answer is refused unless it ran ``auth.require`` (``LOCATION_CHECKED``)."""

    TABLE_ID = "table_id"  # the registered table named by the path's {table_id}
    # the table the path names: {catalog}/{schema}/{table}, or a {full_name} under /tables/; a table the token
    # may not read is answered as a name that names no table (the handler gets it from ``auth.named_table``)
    NAME = "name"
    # the registered table whose id the request's ``table_id`` field gives (the JSON body's, else the query's):
    # judged on the location the owner registered, never on a location the caller claims beside the id
    TABLE_ID_FIELD = "table_id_field"
    BODY = "body"  # the JSON body's ``location`` (a registration, a create); a local path's real path is checked too
    # the ``location`` query parameter; without one, holding the action anywhere suffices and a listing shows
    # only the tables the token may read
    QUERY = "query"
    # a location under the managed root (``Catalog.managed_scope``): where a staging reservation is made
    MANAGED = "managed"
    # the staging reservation the path's {staging_id} names: judged on the location the owner allocated
    STAGING_ID = "staging_id"
    # as QUERY in the middleware; the handler calls ``auth.require(...)`` itself once it has resolved the
    # location (several tables of a body, a body's location that may be left out, a path whose operation
    # decides the action). The middleware refuses a handler's success without that call (fails closed).
    HANDLER = "handler"


@dataclass(frozen=True)
class Api:
    """One HTTP API: its prefix (a request no route matched falls back to the API of the longest prefix it
    lies under; "/" is the root, the fallback of everything), its error envelope, and the JSON file of its
    OpenAPI operations (None: an outside spec documents it). ``reply`` writes the envelope (None: as JSON);
    ``session_cookie`` names a cookie that may carry the bearer token instead of the Authorization header
    (the browser UI's; no other API reads a cookie, so no API call rides on a browser's session)."""

    name: str
    prefix: str
    envelope: Envelope
    openapi: Path | None = None
    reply: Reply | None = None
    session_cookie: str | None = None

    def covers(self, path: str) -> bool:
        base = self.prefix.rstrip("/")
        return path == self.prefix or path.startswith(base + "/")


@dataclass(frozen=True)
class Route:
    """One route: ``method`` and ``path`` (an aiohttp template; GET also answers HEAD), its handler, the
    permission it needs, the API it belongs to (its error envelope), its OpenAPI operationId (None exactly
    when its API has no OpenAPI file) and, for READ / COMMIT / ADMIN, where its location comes from."""

    method: str
    path: str
    handler: Handler
    permission: Permission
    api: Api
    operation_id: str | None
    locate: Locate | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.method, self.path


class RouteTable:
    """The routes of every API, checked once: no route twice, every permission complete, every route inside
    its API's prefix and answered with the envelope a request the router did not match would get there."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes: tuple[Route, ...] = tuple(routes)
        # A GET route answers HEAD too, unless its path declares a HEAD route (an API where HEAD means more).
        self._by_key: dict[tuple[str, str], Route] = {}
        apis: dict[str, Api] = {}
        for r in self.routes:
            if r.key in self._by_key:
                raise ValueError(f"route declared twice: {r.method} {r.path}")
            self._by_key[r.key] = r
            known = apis.setdefault(r.api.name, r.api)
            if known is not r.api:
                raise ValueError(f"two APIs named {r.api.name!r}")
            _check(r)
        self.apis: tuple[Api, ...] = tuple(apis.values())
        # longest prefix first: an API nested inside another's prefix wins there
        self._by_prefix = sorted(self.apis, key=lambda a: len(a.prefix.rstrip("/")), reverse=True)
        prefixes = [a.prefix for a in self.apis]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError(f"two APIs share a prefix: {prefixes}")
        if not any(a.prefix == "/" for a in self.apis):
            raise ValueError("no API has the root prefix '/' (the envelope of requests outside every prefix)")
        for r in self.routes:
            if self.api_for_path(r.path) is not r.api:
                raise ValueError(f"{r.method} {r.path} of API {r.api.name!r} lies under the prefix of API "
                                 f"{self.api_for_path(r.path).name!r}")

    def add_to(self, router: web.UrlDispatcher) -> None:
        for r in self.routes:
            if r.method == "GET":  # and HEAD, unless the path declares a HEAD route of its own
                router.add_get(r.path, r.handler, allow_head=("HEAD", r.path) not in self._by_key)
            else:
                router.add_route(r.method, r.path, r.handler)

    def find(self, method: str, template: str) -> Route | None:
        hit = self._by_key.get((method, template))
        return hit if hit is not None or method != "HEAD" else self._by_key.get(("GET", template))

    def key_of(self, request: web.Request) -> tuple[str, str]:
        """(method, route template), HEAD read as GET unless the path declares HEAD; a request the router did not
        match gives its path."""
        resource = request.match_info.route.resource
        template = resource.canonical if resource is not None else request.path
        method = request.method
        if method == "HEAD" and ("HEAD", template) not in self._by_key:
            method = "GET"
        return method, template

    def route_of(self, request: web.Request) -> Route | None:
        return self.find(*self.key_of(request))

    def api_for_path(self, path: str) -> Api:
        return next((a for a in self._by_prefix if a.covers(path)), self._by_prefix[-1])  # (the root: "/")

    def api_of(self, request: web.Request) -> Api:
        """The API whose envelope answers the request: its route's, else the longest prefix's."""
        route = self.route_of(request)
        return route.api if route is not None else self.api_for_path(request.path)


ROUTE_TABLE = web.AppKey("route_table", RouteTable)


def _check(r: Route) -> None:
    where = f"{r.method} {r.path}"
    if r.method != r.method.upper():
        raise ValueError(f"{where}: the method is upper case")
    if not r.api.covers(r.path):
        raise ValueError(f"{where} lies outside its API's prefix {r.api.prefix}")
    if (r.operation_id is None) != (r.api.openapi is None):
        raise ValueError(f"{where}: an operationId exactly when its API ({r.api.name}) has an OpenAPI file")
    if (r.permission.action is None) != (r.locate is None):
        raise ValueError(f"{where}: a location source exactly for the read, commit and admin permissions")
    if r.locate is not None and ((r.locate is Locate.TABLE_ID) != ("{table_id}" in r.path)):
        raise ValueError(f"{where}: Locate.TABLE_ID exactly when the path names a {{table_id}}")
    if r.locate is not None and ((r.locate is Locate.NAME) != _names_a_table(r.path)):
        raise ValueError(f"{where}: Locate.NAME exactly when the path names a table by its name")
    if r.locate is not None and ((r.locate is Locate.STAGING_ID) != ("{staging_id}" in r.path)):
        raise ValueError(f"{where}: Locate.STAGING_ID exactly when the path names a {{staging_id}}")


def _names_a_table(path: str) -> bool:
    """Whether a route's path names one table by its name: ``.../tables/{table}`` under ``{catalog}`` and
    ``{schema}``, or ``.../tables/{full_name}``."""
    return "/tables/{table}" in path or "/tables/{full_name}" in path
