"""The browser UI, served by the owner itself under ``/ui``: catalogs -> schemas -> tables, every table by
location, search, a table's identity, state, charts and commit history, one commit's actions, the owner's
activity. Server-rendered HTML and SVG, one stylesheet shipped in the package (``static/ui.css``), no script.

Every page only reads, through ``coordinator.views.pages.Views`` (which reads through the store and the storage
seam); permissions are the API's (``session.py``); every value goes through ``markup.esc``.
"""

from __future__ import annotations

import functools
from importlib import resources

from aiohttp import web

from coordinator.api.errors import envelope
from coordinator.api.routes import Api, Permission, Route
from coordinator.api.ui import activity, browse, layout, session, table

UI = Api("ui", "/ui", envelope, reply=layout.reply, session_cookie=session.COOKIE)
BROWSE, PUBLIC = Permission.BROWSE, Permission.PUBLIC


@functools.cache
def _css() -> bytes:
    return resources.files(__package__).joinpath("static/ui.css").read_bytes()


async def stylesheet(request: web.Request) -> web.Response:
    return web.Response(body=_css(), content_type="text/css", headers={"Cache-Control": "max-age=3600",
                                                                      "X-Content-Type-Options": "nosniff"})


ROUTES = [
    Route("GET", "/ui", browse.home, BROWSE, UI, None),
    Route("GET", "/ui/", browse.home, BROWSE, UI, None),
    Route("GET", "/ui/static/ui.css", stylesheet, PUBLIC, UI, None),
    Route("GET", "/ui/login", session.login_page, PUBLIC, UI, None),
    Route("POST", "/ui/login", session.login, PUBLIC, UI, None),
    Route("POST", "/ui/logout", session.logout, PUBLIC, UI, None),
    Route("GET", "/ui/catalogs/{catalog}", browse.catalog, BROWSE, UI, None),
    Route("GET", "/ui/catalogs/{catalog}/schemas/{schema}", browse.schema, BROWSE, UI, None),
    Route("GET", "/ui/tables", browse.tables, BROWSE, UI, None),
    Route("GET", "/ui/tables/{table_id}", table.table_page, BROWSE, UI, None),
    Route("GET", "/ui/tables/{table_id}/commits/{version}", table.commit_page, BROWSE, UI, None),
    Route("GET", "/ui/activity", activity.activity, BROWSE, UI, None),
]

__all__ = ["ROUTES", "UI"]
