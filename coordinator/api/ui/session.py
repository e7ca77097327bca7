"""How a browser signs in to the UI: the token cookie (who is looking is ``viewer.py``).

With ``--auth tokens`` the UI takes the token from the ``Authorization`` header or, in a browser, from the
cookie ``COOKIE``, set by the sign-in form (HttpOnly: no script reads it; SameSite=Strict: no other site's
page sends it; Secure when reached over TLS, ``over_tls``; scoped to ``/ui``). The auth middleware checks it like a header
(``Api.session_cookie``). An ops token or admin over ``*`` sees every table; any other token the tables its
scopes cover (the same ``covers`` rule as the API). Signing in and out change only the browser's cookie.
"""

from __future__ import annotations

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from coordinator.api.auth import principal_of
from coordinator.api.keys import SETTINGS
from coordinator.api.ui.layout import login_form, page

COOKIE = "commit_owner_ui_token"
COOKIE_PATH = "/ui"


async def login_page(request: web.Request) -> web.Response:
    if request.app[SETTINGS].auth == "none":
        return _see_other("/ui/")
    return page("Sign in", login_form(), viewer=None)


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    return origin is None or origin == "null" or origin.split("://", 1)[-1] == request.host


async def login(request: web.Request) -> web.Response:
    """Check the token of the sign-in form and keep it in the cookie. Raises UnauthenticatedError (an unknown or
    revoked token), InvalidArgumentError (no token; a form posted from another site's page)."""
    if not _same_origin(request):
        raise InvalidArgumentError("sign-in from another site's page refused")
    form = await request.post()
    token = form.get("token")
    if not isinstance(token, str) or not token.strip():
        raise InvalidArgumentError("enter a token to sign in")
    if request.app[SETTINGS].auth != "none":
        await principal_of(request.app, token)  # raises for an unknown or revoked token
    resp = _see_other("/ui/")
    resp.set_cookie(COOKIE, token.strip(), path=COOKIE_PATH, httponly=True, samesite="Strict", secure=over_tls(request))
    return resp


async def logout(request: web.Request) -> web.Response:
    """Forget the cookie. Raises InvalidArgumentError (a form posted from another site's page)."""
    if not _same_origin(request):
        raise InvalidArgumentError("sign-out from another site's page refused")
    resp = _see_other("/ui/login")
    resp.del_cookie(COOKIE, path=COOKIE_PATH)
    return resp


def over_tls(request: web.Request) -> bool:
    """Whether the browser reached the owner over TLS: directly, or through a proxy that ended TLS and says so
    (``X-Forwarded-Proto: https``, ``Forwarded: proto=https``). A client that claims it falsely only gets a
    cookie its browser will not send over plain HTTP."""
    if request.secure:
        return True
    proto = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    forwarded = request.headers.get("Forwarded", "").split(",")[0].lower().replace(" ", "")
    return proto == "https" or "proto=https" in forwarded.split(";")


def _see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location, "Cache-Control": "no-store"})


__all__ = ["COOKIE", "login", "login_page", "logout"]
