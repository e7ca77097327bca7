"""Browsing: catalogs -> schemas -> tables by name, every table (or those without a name) by location, and
search by name or location prefix. Pages are keyset-paged by the store (``?after=``); nothing here reads a
table's log."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from coordinator.api.errors import only_params, query_int
from coordinator.api.keys import VIEWS
from coordinator.api.ui.activity import owner_charts
from coordinator.api.ui.layout import page, status_cell
from coordinator.api.ui.markup import Markup, h, href, join, number, ts
from coordinator.api.ui.viewer import viewer
from coordinator.store.rows import TableRow
from coordinator.views.pages import location_prefix

PAGE = 100


def _after(request: web.Request) -> str | None:
    after = request.query.get("after")
    if after is not None and len(after) > 2048:
        raise InvalidArgumentError("after is too long")
    return after or None


def _limit(request: web.Request) -> int:
    n = query_int(request, "limit")
    if n is not None and not 1 <= n <= PAGE:
        raise InvalidArgumentError(f"limit must be between 1 and {PAGE}")
    return PAGE if n is None else n


def _tables(rows: Sequence[TableRow], *, names: bool = True) -> Markup:
    if not rows:
        return Markup('<p class="muted" id="no-tables">No tables here.</p>')
    body = join(h('<tr data-table-id="{id}"><td class="name"><a href="{link}">{name}</a></td><td class="location">'
                  '{location}</td><td>{status}</td><td class="n">{latest}</td><td class="n">{published}</td>'
                  '<td class="n backlog">{backlog}</td><td>{last}</td></tr>',
                  id=t.table_id, link=href("tables", t.table_id),
                  name=(t.label or "(no name)") if names else (t.label or "").rsplit(".", 1)[-1],
                  location=t.location, status=status_cell(t.status, t.accepting), latest=t.latest_version,
                  published=t.latest_backfilled_version, backlog=t.unbackfilled, last=ts(t.last_commit_at))
                for t in rows)
    return h('<table class="list" id="tables"><thead><tr><th>name</th><th>location</th><th>status</th>'
             '<th>latest</th><th>published</th><th>backlog</th><th>last commit</th></tr></thead><tbody>{body}'
             '</tbody></table>', body=body)


def _more(rows: Sequence[TableRow], limit: int, key: str, *segments: str, **query: str | None) -> Markup:
    if len(rows) < limit:
        return Markup("")
    keep = {"limit": str(limit) if limit != PAGE else None}
    return h('<p class="pager"><a id="next" href="{link}">Next {n} →</a></p>', n=limit,
             link=href(*segments, query={**query, **keep, "after": key}))


def _search_form(q: str = "") -> Markup:
    return h('<form method="get" action="/ui/tables" class="search"><input name="q" value="{q}" size="50" '
             'placeholder="a name or its start, or a location prefix">'
             ' <button type="submit">Search</button></form>', q=q)


async def home(request: web.Request) -> web.Response:
    only_params(request, set())
    who = viewer(request)
    views = request.app[VIEWS]
    catalogs, unnamed = await views.catalogs(who.scope)
    rows = join(h('<tr><td class="name"><a href="{link}">{name}</a></td><td>{comment}</td><td class="n">{n}</td></tr>',
                  link=href("catalogs", name), name=name, comment=comment, n=number(n))
                for name, comment, n in catalogs)
    body = h('{search}<h2>Catalogs</h2><table class="list" id="catalogs"><thead><tr><th>catalog</th><th>comment</th>'
             '<th>tables</th></tr></thead><tbody>{rows}</tbody></table>'
             '<p id="unnamed"><a href="{unnamed_link}">{unnamed} owned tables without a name</a>, by location · '
             '<a href="{all_link}">every table by location</a></p><h2>The last hour</h2>{charts}',
             search=_search_form(), rows=rows or Markup('<tr><td colspan="3" class="muted">no catalogs</td></tr>'),
             unnamed_link=href("tables", query={"unnamed": "1"}), unnamed=number(unnamed), all_link=href("tables"),
             charts=await owner_charts(request, who, hours=1, backlog=True))
    return page("Catalogs", body, viewer=who, here="catalogs")


async def catalog(request: web.Request) -> web.Response:
    only_params(request, set())
    who = viewer(request)
    name = request.match_info["catalog"]
    schemas = await request.app[VIEWS].schemas(name, who.scope)
    rows = join(h('<tr><td class="name"><a href="{link}">{schema}</a></td><td>{comment}</td><td class="n">{n}</td></tr>',
                  link=href("catalogs", name, "schemas", s), schema=s, comment=comment, n=number(n))
                for s, comment, n in schemas)
    body = h('<table class="list" id="schemas"><thead><tr><th>schema</th><th>comment</th><th>tables</th></tr></thead>'
             '<tbody>{rows}</tbody></table>', rows=rows or Markup('<tr><td colspan="3" class="muted">no schemas</td></tr>'))
    return page(name, body, viewer=who, crumbs=[("catalogs", href())], here="catalogs")


async def schema(request: web.Request) -> web.Response:
    only_params(request, {"after", "limit"})
    who = viewer(request)
    cat, sch = request.match_info["catalog"], request.match_info["schema"]
    limit = _limit(request)
    rows = await request.app[VIEWS].schema_tables(cat, sch, _after(request), limit, who.scope)
    last = (rows[-1].name or "").rsplit(".", 1)[-1] if rows else ""
    body = h('{tables}{more}', tables=_tables(rows, names=False),
             more=_more(rows, limit, last, "catalogs", cat, "schemas", sch))
    return page(f"{cat}.{sch}", body, viewer=who, crumbs=[("catalogs", href()), (cat, href("catalogs", cat))],
                here="catalogs")


async def tables(request: web.Request) -> web.Response:
    only_params(request, {"q", "after", "unnamed", "limit"})
    who = viewer(request)
    q = request.query.get("q", "")
    if len(q) > 2048:
        raise InvalidArgumentError("q is too long")
    unnamed = request.query.get("unnamed") == "1"
    limit = _limit(request)
    rows = await request.app[VIEWS].search(q, _after(request), limit, who.scope, unnamed=unnamed)
    title = "Tables without a name" if unnamed else ("Search" if q else "Every table")
    if not q:
        what = "In location order."
    elif location_prefix(q) is not None:
        what = f"Tables whose location starts with \u201c{q}\u201d, in location order."
    else:
        what = f"Tables whose name starts with \u201c{q}\u201d, in location order."
    body = h('{form}<p class="muted">{what}</p>{tables}{more}', form=_search_form(q), what=what, tables=_tables(rows),
             more=_more(rows, limit, rows[-1].location if rows else "", "tables", q=q or None,
                        unnamed="1" if unnamed else None))
    return page(title, body, viewer=who, crumbs=[("catalogs", href())], here="tables")
