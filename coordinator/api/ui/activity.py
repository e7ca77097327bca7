"""Pictures: commits per minute and publication lag from the commit rows, conflicts and refusals from this
process's outcome timeline, and the tables most behind; for the whole owner (``/ui/activity``, the landing
page) and, through ``table_charts``, per table."""

from __future__ import annotations

import os

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from coordinator.api.errors import only_params
from coordinator.api.keys import METRICS, VIEWS
from coordinator.api.ui.charts import Series, minute_bars, ranked_bars
from coordinator.api.ui.layout import page
from coordinator.api.ui.markup import Markup, duration, h, href, join
from coordinator.api.ui.viewer import Viewer, viewer
from coordinator.views.pages import Activity

HOURS = (1, 3, 6, 12, 24)
BACKLOG_SHOWN = 15


def _window(act: Activity, hours: float) -> tuple[int, int]:
    return act.since_ms // 60_000, int(hours * 60)


def charts(parts: list[Markup]) -> Markup:
    return h('<div class="charts">{charts}</div>', charts=join(parts))


def commit_charts(act: Activity, hours: float, what: str) -> list[Markup]:
    start, minutes = _window(act, hours)
    published = {m.minute: float(m.commits - m.unpublished) for m in act.minutes}
    unpublished = {m.minute: float(m.unpublished) for m in act.minutes if m.unpublished}
    lag = {m.minute: float(m.lag_max_ms) for m in act.minutes if m.lag_max_ms is not None}
    return [
        minute_bars("commits", f"Commits per minute, {what}", start, minutes,
                    [Series("published", "published", published), Series("not yet published", "unpublished", unpublished)],
                    fmt=lambda v: f"{v:.0f}"),
        minute_bars("lag", f"Publication lag (slowest commit of the minute), {what}", start, minutes,
                    [Series("lag", "lag", lag)], fmt=duration),
    ]


async def owner_charts(request: web.Request, who: Viewer, *, hours: float, backlog: bool) -> Markup:
    views = request.app[VIEWS]
    act = await views.activity(hours, who.scope)
    what = "every table" if who.everything else "the tables you may read"
    parts = commit_charts(act, hours, what)
    start, minutes = _window(act, hours)
    if who.everything:
        seen = request.app[METRICS].outcomes.since(start)
        parts.append(minute_bars(
            "refusals", f"Refused commits per minute (counted by the worker that served this page, pid "
            f"{os.getpid()}; each worker of serve counts its own)", start, minutes,
            [Series("conflicts (409)", "conflict", {m: float(c) for m, c, _ in seen if c}),
             Series("other refusals", "refusal", {m: float(r) for m, _, r in seen if r})], fmt=lambda v: f"{v:.0f}"))
    if backlog:
        behind = await views.most_behind(BACKLOG_SHOWN, who.scope)
        parts.append(ranked_bars("backlog", "Backlog: ratified commits not yet published, per table",
                                 [(t.label or t.location, float(t.unbackfilled), href("tables", t.table_id))
                                  for t in behind], fmt=lambda v: f"{v:.0f}"))
    return charts(parts)


def hours_of(request: web.Request, default: int = 3) -> int:
    raw = request.query.get("hours")
    if raw is None:
        return default
    if raw not in {str(h) for h in HOURS}:
        raise InvalidArgumentError(f"hours must be one of {', '.join(map(str, HOURS))}")
    return int(raw)


def hour_links(current: int, *segments: str) -> Markup:
    return join(h('<a href="{link}" class="{cls}">{n} h</a> ', link=href(*segments, query={"hours": n}),
                  cls="here" if n == current else "", n=n) for n in HOURS)


async def activity(request: web.Request) -> web.Response:
    only_params(request, {"hours"})
    who = viewer(request)
    hours = hours_of(request)
    body = h('<p class="hours">Window: {links}</p>{charts}', links=hour_links(hours, "activity"),
             charts=await owner_charts(request, who, hours=hours, backlog=True))
    return page(f"Activity, last {hours} h", body, viewer=who, crumbs=[("catalogs", href())], here="activity")
