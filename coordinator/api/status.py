"""The status page at ``/``: plain HTML rendered here, no scripts, no build step. It links to the browser UI
(``/ui/``, api/ui), where tables are found by name and each one's commit history and charts are shown."""

from __future__ import annotations

import html
import time
from typing import Any

from aiohttp import web

from client.contract.errors import CommitOwnerError
from coordinator.api.keys import RECENT_ERRORS, SERVICE

MAX_ROWS = 500

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.behind td { background: #fff4d6; } tr.stopped td { background: #fde2e2; }
.muted { color: #777; }
"""


def _ts(ms: int | None) -> str:
    if not ms:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + "Z"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _table_rows(tables: list[Any], ages: dict[str, int]) -> str:
    now = time.time()
    out = []
    for t in tables:
        oldest = ages.get(t.table_id)
        lag = (now - oldest / 1000.0) if oldest else None
        cls = "stopped" if not t.accepting else ("behind" if t.unbackfilled else "")
        cells = [
            f'<td class="id"><code>{html.escape(t.table_id)}</code></td>',
            f'<td class="name">{html.escape(t.label or "")}</td>',  # catalog.schema.table, or "... (dropped)"
            f'<td class="location">{html.escape(t.location)}</td>',
            f'<td class="status">{html.escape(t.status)}</td>',
            f'<td class="accepting">{"yes" if t.accepting else "no"}</td>',
            f'<td class="n latest">{t.reported_latest}</td>',
            f'<td class="n backfilled">{t.latest_backfilled_version}</td>',
            f'<td class="n backlog">{t.unbackfilled}</td>',
            f'<td class="n lag">{_age(lag)}</td>',
            f'<td class="last-commit">{_ts(t.last_commit_at)}</td>',
            f'<td class="error">{html.escape(t.backfill_error or t.status_reason or "")}</td>',
        ]
        out.append(f'<tr class="{cls}" data-table-id="{html.escape(t.table_id)}">{"".join(cells)}</tr>')
    return "\n".join(out)


def _error_rows(items: list[dict[str, Any]]) -> str:
    out = []
    for e in items:
        out.append(
            "<tr>"
            f'<td>{_ts(int(e["at"] * 1000))}</td><td class="n">{e["status"]}</td>'
            f'<td>{html.escape(str(e["outcome"]))}</td><td>{html.escape(e["method"])} {html.escape(e["path"])}</td>'
            f'<td><code>{html.escape(str(e.get("request_id") or ""))}</code></td>'
            f'<td>{html.escape(str(e.get("message") or ""))}</td>'
            "</tr>"
        )
    return "\n".join(out)


async def status_page(request: web.Request) -> web.Response:
    problem = ""
    shown: list[Any] = []
    ages: dict[str, int] = {}
    counts: dict[str, int] = {}
    behind = 0
    try:
        view = await request.app[SERVICE].reads.overview(MAX_ROWS)
    except CommitOwnerError as e:
        problem = f'<p class="problem"><strong>Ownership store unavailable:</strong> {html.escape(e.message)}</p>'
    else:
        # The most behind first, then the tables accepting no commits, then the first by location: each list a
        # page read through an index, so the page costs the same with a million tables.
        counts, ages = view.counts, {t.table_id: oldest for t, oldest in view.behind}
        behind = len(view.behind)
        seen: set[str] = set()
        for t in [*(t for t, _ in view.behind), *view.stopped, *view.first]:
            if t.table_id not in seen and len(shown) < MAX_ROWS:
                seen.add(t.table_id)
                shown.append(t)
    total = sum(counts.values())
    stopped = total - counts.get("ACTIVE", 0)
    errors = request.app[RECENT_ERRORS].items()
    more = (f'<p class="muted">showing {len(shown)} of {total} tables: those waiting for publication (longest '
            'first), then those accepting no commits, then the first by location</p>') if total > len(shown) else ""
    body = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>commit-owner status</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>
<body>
<h1>commit-owner</h1>
{problem}
<p id="summary">{_count(total, "table")}, {f"{MAX_ROWS}+" if behind >= MAX_ROWS else behind} with unbackfilled
commits, {stopped} not accepting commits.
Rendered {_ts(int(time.time() * 1000))}. <a href="/ui/">browse tables and commits</a> ·
<a href="/metrics">metrics</a> · <a href="/readyz">readiness</a></p>
<h2>Tables</h2>
{more}
<table id="tables">
<thead><tr><th>table id</th><th>name</th><th>location</th><th>status</th><th>accepting</th><th>latest</th><th>backfilled</th>
<th>backlog</th><th>lag</th><th>last commit</th><th>error</th></tr></thead>
<tbody>
{_table_rows(shown, ages) or '<tr><td colspan="11" class="muted">no tables registered</td></tr>'}
</tbody></table>
<h2>Recent errors</h2>
<table id="errors">
<thead><tr><th>at</th><th>status</th><th>outcome</th><th>request</th><th>request id</th><th>message</th></tr></thead>
<tbody>
{_error_rows(errors) or '<tr><td colspan="6" class="muted">none since this process started</td></tr>'}
</tbody></table>
</body></html>
"""
    return web.Response(text=body, content_type="text/html", charset="utf-8")
