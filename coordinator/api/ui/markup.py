"""The UI's one escaping rule and its templates: every value put into a page goes through ``esc``.

``Markup`` is text already safe in HTML (and in SVG, and in a double-quoted attribute): only ``esc``, ``h`` and
``join`` make it. ``h(template, **values)`` fills ``{name}`` fields of a template written here, escaping every
value that is not ``Markup`` already; so a table named ``<script>`` is shown as text, never run.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode


class Markup(str):
    """Text safe to put into HTML as is."""

    __slots__ = ()


def esc(value: Any) -> Markup:
    """``value`` as HTML text: Markup unchanged, None as nothing, anything else escaped (quotes too)."""
    if isinstance(value, Markup):
        return value
    return Markup("" if value is None else html.escape(str(value), quote=True))


def h(template: str, /, **values: Any) -> Markup:
    """``template`` (written in this package, never from input) with its ``{name}`` fields filled, escaped."""
    return Markup(template.format(**{k: esc(v) for k, v in values.items()}))


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    return Markup(sep.join(esc(p) for p in parts))


def href(*segments: str, query: Mapping[str, Any] | None = None) -> str:
    """A path below ``/ui`` from raw segments (each percent-encoded, ``/`` too), and a query string without
    None values. Escape it when it goes into an attribute (``h`` does)."""
    path = "/ui" + "".join("/" + quote(s, safe="") for s in segments)
    q = {k: v for k, v in (query or {}).items() if v is not None and v != ""}
    return path + ("?" + urlencode(q) if q else "")


def ts(ms: int | None) -> str:
    """A time in ms since the epoch as ``YYYY-MM-DD HH:MM:SSZ`` (UTC)."""
    if ms is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + "Z"


def duration(ms: float | None) -> str:
    if ms is None:
        return ""
    s = ms / 1000
    if s < 1:
        return f"{ms:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def size(n: int | None) -> str:
    if n is None:
        return ""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def number(n: int | None) -> str:
    return "" if n is None else f"{n:,}"
