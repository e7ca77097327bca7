"""The page every UI view is drawn in: head, navigation, who is looking; the sign-in form; the UI's error page
(its envelope: the API's error code and message, as HTML).

Pages carry no script at all, and the Content-Security-Policy says so: a value that escaped ``esc`` could
still not run. Nothing is cached (a page shows the owner's state of the moment).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from coordinator.api.ui.markup import Markup, esc, h, href, join
from coordinator.api.ui.viewer import Viewer

CSS_PATH = "/ui/static/ui.css"
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

_NAV = (("Catalogs", "catalogs"), ("All tables", "tables"), ("Activity", "activity"))


def page(title: str, body: Markup, *, viewer: Viewer | None, crumbs: list[tuple[str, str]] | None = None,
         status: int = 200, here: str = "") -> web.Response:
    nav = join(h('<a href="{link}" class="{cls}">{label}</a>', link=href() if key == "catalogs" else href(key),
                 cls="here" if key == here else "", label=label) for label, key in _NAV)
    trail = join(h('<a href="{link}">{label}</a> › ', link=link, label=label) for label, link in crumbs or [])
    who = Markup("")
    if viewer is not None:
        who = h('<span class="who">{label}</span>', label=viewer.label)
        if viewer.principal is not None:
            who = h('{who} <form method="post" action="/ui/logout" class="inline"><button>Sign out</button></form>',
                    who=who)
    doc = h('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title} · commit-owner</title>'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="stylesheet" href="{css}"></head>\n<body><header><a class="brand" href="/ui/">commit-owner</a>'
            '<nav>{nav}</nav><span class="spacer"></span>{who}</header>\n<main><p class="crumbs">{trail}</p>'
            '<h1>{title}</h1>\n{body}</main>\n<footer><a href="/">status page</a> · <a href="/metrics">metrics</a>'
            ' · <a href="/api/v1/openapi.json">API</a></footer></body></html>\n',
            title=title, css=CSS_PATH, nav=nav, who=who, trail=trail, body=body)
    return web.Response(text=doc, status=status, content_type="text/html", charset="utf-8", headers=HEADERS)


def login_form(problem: str | None = None) -> Markup:
    return h('{problem}<form method="post" action="/ui/login" class="login">'
             '<label for="token">Bearer token</label> <input id="token" name="token" type="password" '
             'autocomplete="off" size="60" placeholder="dco_…" required> <button type="submit">Sign in</button></form>'
             '<p class="muted">Any token the API accepts. It is kept in a cookie only this UI reads (HttpOnly, '
             'SameSite=Strict). An ops token or admin over * shows every table; other tokens the tables their '
             'scopes cover.</p>',
             problem=h('<p class="problem">{p}</p>', p=problem) if problem else "")


def reply(status: int, envelope: dict[str, Any]) -> web.Response:
    """The UI's error page: the envelope's code and message (the API's wording), the sign-in form on a 401."""
    err = envelope.get("error")
    if not isinstance(err, dict):
        err = {}
    code, message = str(err.get("code", "")), str(err.get("message", ""))
    if status == 401:
        return page("Sign in", login_form(message), viewer=None, status=401)
    body = h('<p class="problem" id="error" data-code="{code}"><strong>{code}</strong>: {message}</p>'
             '<p><a href="{home}">Back to the tables</a></p>', code=code, message=message, home=href())
    return page(f"Error {status}", body, viewer=None, status=status)


def status_cell(status: str, accepting: bool) -> Markup:
    cls = "ok" if accepting else ("stopped" if status in ("FENCED", "DROPPED") else "off")
    return h('<span class="badge {cls}">{status}</span>', cls=cls, status=status)


__all__ = ["CSS_PATH", "login_form", "page", "reply", "status_cell", "esc"]
