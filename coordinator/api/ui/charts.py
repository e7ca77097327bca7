"""Small charts drawn on the server as inline SVG (decision 45): no script, no library, nothing fetched.

``minute_bars``: one bar per minute of a window (stacked when several series), with the largest value and the
window's start, middle and end times on the axes and each bar's figure in its ``<title>`` (a tooltip).
``ranked_bars``: one horizontal bar per labelled item (a table's backlog), longest first, each a link.
Every label and figure goes through ``markup.h``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from coordinator.api.ui.markup import Markup, h, join

WIDTH, HEIGHT = 640, 130
LEFT, BOTTOM, TOP = 46, 18, 8


@dataclass(frozen=True)
class Series:
    name: str
    css: str  # the bars' class in ui.css (their colour)
    values: Mapping[int, float]  # minute since the epoch -> value


def _hhmm(minute: int) -> str:
    return time.strftime("%H:%M", time.gmtime(minute * 60))


def _figure(chart: str, title: str, svg: Markup, legend: str = "") -> Markup:
    return h('<figure class="chart" id="chart-{chart}" data-chart="{chart}"><figcaption>{title}{legend}</figcaption>'
             '{svg}</figure>', chart=chart, title=title, legend=legend, svg=svg)


def minute_bars(chart: str, title: str, start: int, minutes: int, series: Sequence[Series],
                fmt: Callable[[float], str] = lambda v: f"{v:g}") -> Markup:
    """Bars per minute from minute ``start`` for ``minutes`` minutes; ``series`` stacked in order."""
    totals = {m: sum(s.values.get(m, 0) for s in series) for m in range(start, start + minutes)}
    top = max(totals.values(), default=0)
    plot_w, plot_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - TOP
    bar_w = plot_w / max(1, minutes)
    parts: list[Markup] = [
        h('<line class="axis" x1="{x}" y1="{y0}" x2="{x}" y2="{y1}"/>', x=LEFT, y0=TOP, y1=TOP + plot_h),
        h('<line class="axis" x1="{x0}" y1="{y}" x2="{x1}" y2="{y}"/>', x0=LEFT, x1=LEFT + plot_w, y=TOP + plot_h),
        h('<text class="tick" x="{x}" y="{y}" text-anchor="end">{v}</text>', x=LEFT - 4, y=TOP + 8,
          v=fmt(top) if top else "0"),
        h('<text class="tick" x="{x}" y="{y}" text-anchor="end">0</text>', x=LEFT - 4, y=TOP + plot_h),
    ]
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        m = start + min(minutes - 1, int(frac * minutes))
        parts.append(h('<text class="tick" x="{x}" y="{y}" text-anchor="{a}">{t}Z</text>',
                       x=f"{LEFT + frac * plot_w:.1f}", y=HEIGHT - 4, a=anchor, t=_hhmm(m)))
    if not top:
        parts.append(h('<text class="empty" x="{x}" y="{y}" text-anchor="middle">nothing in this window</text>',
                       x=LEFT + plot_w / 2, y=TOP + plot_h / 2))
    for m, total in totals.items():
        if not total:
            continue
        x = LEFT + (m - start) * bar_w
        base = float(TOP + plot_h)
        tip = ", ".join(f"{s.name} {fmt(s.values.get(m, 0))}" for s in series if s.values.get(m))
        for s in series:
            v = s.values.get(m, 0)
            if not v:
                continue
            bh = max(1.0, v / top * plot_h)
            base -= bh
            parts.append(h('<rect class="bar {css}" x="{x}" y="{y}" width="{w}" height="{bh}"><title>{tip}</title></rect>',
                           css=s.css, x=f"{x:.2f}", y=f"{base:.2f}", w=f"{max(1.0, bar_w - 0.6):.2f}", bh=f"{bh:.2f}",
                           tip=f"{_hhmm(m)}Z: {tip}"))
    legend = join(h(' <span class="key {css}">{name}</span>', css=s.css, name=s.name) for s in series) \
        if len(series) > 1 else Markup("")
    svg = h('<svg class="minutes" viewBox="0 0 {w} {h}" role="img" aria-label="{label}">{body}</svg>',
            w=WIDTH, h=HEIGHT, label=title, body=join(parts))
    return _figure(chart, title, svg, legend)


def ranked_bars(chart: str, title: str, items: Sequence[tuple[str, float, str]],
                fmt: Callable[[float], str] = lambda v: f"{v:g}") -> Markup:
    """One bar per ``(label, value, link)``, in the order given."""
    row_h, label_w = 20, 260
    top = max((v for _, v, _ in items), default=0)
    height = max(1, len(items)) * row_h + 4
    parts: list[Markup] = []
    if not items:
        parts.append(h('<text class="empty" x="{x}" y="14">no table has unpublished commits</text>', x=8))
    for i, (label, value, link) in enumerate(items):
        y = 2 + i * row_h
        w = (WIDTH - label_w - 60) * (value / top) if top else 0
        shown = label if len(label) <= 40 else label[:19] + "…" + label[-20:]
        parts.append(h('<a href="{link}"><text class="label" x="{lx}" y="{ty}" text-anchor="end">{shown}<title>{label}'
                       '</title></text></a><rect class="bar backlog" x="{x}" y="{y}" width="{w}" height="{bh}">'
                       '<title>{label}: {v}</title></rect><text class="tick" x="{vx}" y="{ty}">{v}</text>',
                       link=link, lx=label_w - 6, ty=y + 14, shown=shown, label=label, x=label_w, y=y,
                       w=f"{max(1.0, w):.1f}", bh=row_h - 6, v=fmt(value), vx=f"{label_w + max(1.0, w) + 4:.1f}"))
    svg = h('<svg class="ranked" viewBox="0 0 {w} {h}" role="img" aria-label="{label}">{body}</svg>',
            w=WIDTH, h=height, label=title, body=join(parts))
    return _figure(chart, title, svg)
