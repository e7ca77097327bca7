"""A route that acts on a location cannot answer without judging the token's permission there (issue 40).

Every route of the app's own route table whose permission is scoped to a location (read, commit, admin) is
served, in the real app, by a handler that answers 200 and checks nothing. A route whose place the middleware
finds (a table by id or name, the table of a ``table_id`` field, a registration's location, the managed root,
a staging table) is judged before that handler runs: a token scoped elsewhere never reaches it. A route whose
handler judges the location itself (``Locate.HANDLER``) fails closed: the handler's success is refused, with
any token and with ``--auth none``. The routes are read from the table, so a route added later is held to
the same. (Listings, ``Locate.QUERY``, filter what they show instead: their handlers are the real ones here.)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from coordinator.api import app as app_module
from coordinator.api.app import ROUTES, create_app
from coordinator.api.auth import TOKENS
from coordinator.api.errors import json_response
from coordinator.api.keys import CATALOG, SERVICE
from coordinator.api.routes import Locate, Route
from coordinator.core.catalog import owned_name
from coordinator.security.tokens import new_token, parse_scope
from tests.conftest import make_backend
from tests.inprocess import backend_settings

# Every route that acts on a location, and how it finds it.
LOCATED = [r for r in ROUTES if r.locate is not None and r.locate is not Locate.QUERY]
JUDGED_FIRST = [r for r in LOCATED if r.locate is not Locate.HANDLER]
HANDLER_JUDGED = [r for r in LOCATED if r.locate is Locate.HANDLER]


@dataclass
class World:
    """The app with every located route's handler replaced by one that checks nothing (``ran`` records which
    answered), a named table ``c.s.t`` (id ``table_id``), a staging table ``staging_id``, and two tokens: one
    holding admin over everything, one holding admin over a prefix where nothing lives."""

    auth: str
    server: TestServer
    session: aiohttp.ClientSession
    ran: list[tuple[str, str]]
    table_id: str = ""
    location: str = ""
    staging_id: str = ""
    everything: str | None = None
    elsewhere: str | None = None

    async def send(self, route: Route, token: str | None) -> int:
        """``route`` asked with every place filled in: the path's, a ``table_id`` in the query, a ``table_id`` and a
        ``location`` in a JSON body. Returns the status."""
        path = route.path.format(table_id=self.table_id, catalog="c", schema="s", table="t", full_name="c.s.t",
                                 staging_id=self.staging_id)
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        body = json.dumps({"table_id": self.table_id, "location": self.location}).encode()
        url = f"http://127.0.0.1:{self.server.port}{path}"
        async with self.session.request(route.method, url, params={"table_id": self.table_id},
                                        data=body, headers=headers) as r:
            await r.read()
            return r.status


def _unchecked(route: Route, ran: list[tuple[str, str]]) -> Route:
    async def answer(request: web.Request) -> web.Response:
        ran.append(route.key)
        return json_response({"answered": "without any check"})
    return dataclasses.replace(route, handler=answer)


async def _token(app: web.Application, scope: str) -> str:
    token_id, secret_hash, token = new_token()
    await app[TOKENS].create(token_id, secret_hash, [parse_scope(scope)])
    return token


@pytest.fixture(scope="module", params=["tokens", "none"])
async def world(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    backend = make_backend(request, "sqlite", "local", f"fail-closed-{request.param}")
    ran: list[tuple[str, str]] = []
    with pytest.MonkeyPatch.context() as mp:  # the app's route list, each located route's handler replaced
        mp.setattr(app_module, "ROUTES", [_unchecked(r, ran) if r in LOCATED else r for r in ROUTES])
        app = create_app(backend_settings(backend, {"COMMIT_OWNER_AUTH": request.param,
                                                    "COMMIT_OWNER_BACKFILL": "false"}))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
    w = World(request.param, server, session, ran)
    try:
        catalog = app[CATALOG]
        await catalog.create_catalog("c", None, {})
        await catalog.create_schema("c", "s", None, {})
        table = await app[SERVICE].registry.register_table(backend.new_location(), -1, None, name=owned_name("c.s.t"))
        w.table_id, w.location = table.table_id, table.location
        w.staging_id = (await catalog.reserve("c", "s", "staged")).id
        if request.param == "tokens":
            w.everything = await _token(app, "*:admin")
            w.elsewhere = await _token(app, "file:///nowhere/near:admin")
        yield w
    finally:
        await session.close()
        await server.close()


def test_every_kind_of_location_is_covered() -> None:
    assert {r.locate for r in LOCATED} == set(Locate) - {Locate.QUERY}
    assert HANDLER_JUDGED and JUDGED_FIRST


@pytest.mark.parametrize("route", JUDGED_FIRST, ids=lambda r: f"{r.method} {r.path} ({r.locate.value})")
async def test_a_route_judged_by_the_middleware_never_reaches_its_handler_for_a_token_scoped_elsewhere(
        world: World, route: Route) -> None:
    if world.auth == "none":
        assert await world.send(route, None) == 200  # (no token, no judgement: the request reaches the handler)
        return
    world.ran.clear()
    status = await world.send(route, world.elsewhere)
    # refused (a table named by a name the token may not read is a name that names no table) and never answered
    assert status == (404 if route.locate is Locate.NAME else 403)
    assert world.ran == []
    assert await world.send(route, world.everything) == 200  # (the request is one the handler would be asked)
    assert world.ran == [route.key]


@pytest.mark.parametrize("route", HANDLER_JUDGED, ids=lambda r: f"{r.method} {r.path}")
async def test_a_handler_that_answers_without_judging_its_location_is_refused(world: World, route: Route) -> None:
    tokens: list[Any] = [world.everything, world.elsewhere] if world.auth == "tokens" else [None]
    for token in tokens:
        world.ran.clear()
        assert await world.send(route, token) == 403
        assert world.ran == [route.key]  # it answered, and its answer was refused
