"""One table: its identity, its state, its pictures, its checkpoints and its commit history newest first
(``?before=`` pages back); and one commit with its actions."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from client.contract.errors import CommitOwnerError, InvalidArgumentError
from coordinator.api.errors import only_params, query_int
from coordinator.api.keys import VIEWS
from coordinator.api.parse import parse_uuid
from coordinator.api.ui.activity import charts, commit_charts, hour_links, hours_of
from coordinator.api.ui.layout import page, status_cell
from coordinator.api.ui.markup import Markup, duration, h, href, join, number, size, ts
from coordinator.api.ui.viewer import viewer
from coordinator.store.rows import MaintenanceRun, TableRow
from coordinator.views.pages import HISTORY_PAGE, Checkpoints, HistoryEntry, Identity

ACTIONS_SHOWN = 500


def _crumbs(table: TableRow) -> list[tuple[str, str]]:
    crumbs = [("catalogs", href())]
    if table.name:
        cat, sch, _ = table.name.split(".", 2)
        crumbs += [(cat, href("catalogs", cat)), (sch, href("catalogs", cat, "schemas", sch))]
    else:
        crumbs.append(("tables without a name", href("tables", query={"unnamed": "1"})))
    return crumbs


def _dl(pairs: list[tuple[str, Any]], id_: str) -> Markup:
    return h('<dl class="facts" id="{id}">{rows}</dl>', id=id_,
             rows=join(h('<dt>{k}</dt><dd data-key="{k}">{v}</dd>', k=k, v=v) for k, v in pairs))


def _identity(table: TableRow, ident: Identity) -> Markup:
    name = ident.name
    p = ident.protocol or {}
    features = sorted(set(p.get("readerFeatures") or []) | set(p.get("writerFeatures") or []))
    protocol = (f"reader {p.get('minReaderVersion')}, writer {p.get('minWriterVersion')}"
                + (f"; features: {', '.join(map(str, features))}" if features else "")) if p else "not found in the log"
    facts = _dl([("name", table.label or "(no name)"), ("table id", table.table_id), ("location", table.location),
                 ("type", f"{name.table_type} {name.data_source_format}" if name else "owned, registered by location"),
                 ("commit folder", f"_delta_log/{table.commit_dir}"), ("protocol", protocol),
                 ("registered", ts(table.created_at))], "identity")
    cols = join(h('<tr><td>{n}</td><td><code>{t}</code></td><td>{null}</td><td>{part}</td></tr>', n=c.get("name"),
                  t=c.get("type_text"), null="yes" if c.get("nullable", True) else "no",
                  part="partition" if c.get("name") in ident.partition_columns else "") for c in ident.columns)
    problem = h('<p class="problem">The log could not be read: {m}</p>', m=ident.problem) if ident.problem else ""
    return h('{facts}{problem}<h3>Columns</h3><table class="list" id="columns"><thead><tr><th>column</th><th>type</th>'
             '<th>nullable</th><th></th></tr></thead><tbody>{cols}</tbody></table>', facts=facts, problem=problem,
             cols=cols or Markup('<tr><td colspan="4" class="muted">no schema known yet</td></tr>'))


def _state(t: TableRow) -> Markup:
    why = t.status_reason or ""
    accepting = "yes" if t.accepting else f"no: {t.status.lower()}" + (f" ({why})" if why else "")
    pairs: list[tuple[str, Any]] = [
        ("status", status_cell(t.status, t.accepting)), ("accepting commits", accepting),
        ("latest ratified", t.reported_latest if t.reported_latest >= 0 else
         f"none yet (the log was at version {t.base_version} when the owner took it)"),
        ("latest published", t.latest_backfilled_version),
        ("backlog", f"{t.unbackfilled} commit(s) not yet published"), ("last commit", ts(t.last_commit_at))]
    if t.backfill_error:
        pairs.append(("publication error", f"{t.backfill_error} ({ts(t.backfill_error_at)})"))
    if t.dropped_at:
        pairs.append(("dropped", f"{ts(t.dropped_at)} (was {t.dropped_name or 'unnamed'})"))
    return _dl(pairs, "state")


def _rows(n: int | None) -> str:
    return "?" if n is None else number(n)


def _history(table: TableRow, entries: list[HistoryEntry]) -> Markup:
    out = []
    for e in entries:
        s, r = e.summary, e.row
        when = ts(s.in_commit_timestamp if s and s.in_commit_timestamp else r.commit_timestamp)
        figures: dict[str, Any] = dict(op=e.problem or "", engine="", files="", rows="", bytes="")
        if s is not None:
            figures = dict(op=s.operation or "", engine=s.engine or "", files=f"+{s.files_added} −{s.files_removed}",
                           rows=f"+{_rows(s.rows_added)} −{_rows(s.rows_removed)}",
                           bytes=f"+{size(s.bytes_added)} −{size(s.bytes_removed)}")
        published = (f"yes, {duration(r.backfilled_at - r.ratified_at)} after" if r.backfilled_at is not None
                     else "not yet")
        out.append(h('<tr data-version="{v}"><td class="n"><a href="{link}">{v}</a></td><td class="when">{when}</td><td>{op}</td>'
                     '<td class="engine">{engine}</td><td class="n">{files}</td><td class="n">{rows}</td>'
                     '<td class="n">{bytes}</td><td class="file"><code>{file}</code></td><td class="published">{published}</td></tr>',
                     v=r.version, link=href("tables", table.table_id, "commits", str(r.version)), when=when,
                     file=r.file_name, published=published, **figures))
    return join([h('<table class="list" id="history"><thead><tr><th>version</th><th>time (in-commit)</th><th>operation</th>'
             '<th>engine</th><th>files</th><th>rows</th><th>bytes</th><th>staged file</th><th>published</th></tr>'
             '</thead><tbody>{rows}</tbody></table>',
             rows=join(out) or Markup('<tr><td colspan="9" class="muted">no commit ratified by this owner yet</td></tr>'),
             ), _before_the_owner(table, entries)])


def _before_the_owner(table: TableRow, entries: list[HistoryEntry]) -> Markup:
    """Below the oldest commit: the versions the table's creator wrote before the owner took it (version 0 at
    least), which are in ``_delta_log`` but have no row here."""
    if table.base_version < 0 or (entries and entries[-1].row.version != table.base_version + 1):
        return Markup("")
    upto = "version 0" if table.base_version == 0 else f"versions 0 to {table.base_version}"
    return h('<p class="muted" id="before-owner">{upto}: written to <code>_delta_log</code> by the table\'s creator '
             'before the owner took the table (a table is created on the file system, as the protocol wants); the '
             'owner ratifies from version {first} on.</p>', upto=upto, first=table.base_version + 1)


def _maintenance(cp: Checkpoints | None, problem: str | None, runs: list[MaintenanceRun]) -> Markup:
    pairs: list[tuple[str, Any]] = []
    if cp is not None:
        pairs.append(("checkpoints", ", ".join(map(str, cp.versions[:10])) + (" …" if len(cp.versions) > 10 else "")
                      if cp.versions else "none"))
        pairs.append(("_last_checkpoint", "none" if cp.last_checkpoint is None else f"version {cp.last_checkpoint}"))
    else:
        pairs.append(("checkpoints", f"unknown: {problem}"))
    for kind, label in (("optimize", "last compaction"), ("vacuum", "last vacuum")):
        run = next((r for r in runs if r.kind == kind and r.outcome == "done"), None)
        pairs.append((label, f"{ts(run.finished_at)}: {_run_summary(run)}" if run else "none recorded"))
    return h('{facts}{steps}', facts=_dl(pairs, "maintenance"), steps=_runs(runs))


def _run_summary(r: MaintenanceRun) -> str:
    """One line of what a maintenance step did."""
    f = r.figures
    if r.outcome == "failed":
        return f"failed: {r.message or ''}"
    if r.kind == "optimize":
        return (f"version {f.get('version')}, {f.get('filesRemoved')} files ({size(int(f.get('bytesRemoved') or 0))}) "
                f"into {f.get('filesAdded')} ({size(int(f.get('bytesAdded') or 0))})"
                + (f"; {f['reason']}" if f.get("reason") else ""))
    if r.kind == "vacuum":
        return (f"deleted {f.get('deleted')} files ({size(int(f.get('bytes') or 0))}); versions from "
                f"{f.get('oldestKeptVersion')} stay readable")
    if r.kind == "checkpoint":
        return f"wrote checkpoints at versions {', '.join(map(str, f.get('written') or []))}"
    return f"deleted {f.get('deleted')} expired log files ({size(int(f.get('bytes') or 0))})"


def _runs(runs: list[MaintenanceRun]) -> Markup:
    """The newest steps of `commit-owner maintain` / `optimize` / `vacuum` on this table."""
    if not runs:
        return h('<p class="muted" id="maintenance-runs">No maintenance step recorded yet (`commit-owner maintain` '
                 'records each step that does something or fails).</p>')
    rows = join(h('<tr data-kind="{kind}" data-outcome="{outcome}"><td>{when}</td><td>{kind}</td><td>{trigger}</td>'
                  '<td>{what}</td></tr>', when=ts(r.finished_at), kind=r.kind, outcome=r.outcome,
                  trigger=r.trigger, what=_run_summary(r)) for r in runs)
    return h('<h3>Steps</h3><table class="list" id="maintenance-runs"><thead><tr><th>finished</th><th>step</th>'
             '<th>by</th><th>what it did</th></tr></thead><tbody>{rows}</tbody></table>', rows=rows)


async def _visible_table(request: web.Request) -> TableRow:
    table = await request.app[VIEWS].table(parse_uuid(request.match_info["table_id"], "table id"))
    viewer(request).check(table.location)
    return table


async def table_page(request: web.Request) -> web.Response:
    table = await _visible_table(request)  # (who may see it before what the query asks)
    only_params(request, {"before", "hours"})
    who = viewer(request)
    views = request.app[VIEWS]
    before = query_int(request, "before")
    hours = hours_of(request, default=1)
    entries = await views.history(table, before)
    try:
        cp, problem = await views.checkpoints(table), None
    except CommitOwnerError as e:  # storage down: the rest of the page still answers
        cp, problem = None, e.message
    older = ""
    if len(entries) == HISTORY_PAGE and entries[-1].row.version > 0:
        older = h('<p class="pager"><a id="older" href="{link}">Older commits →</a></p>',
                  link=href("tables", table.table_id, query={"before": entries[-1].row.version}))
    body = h('<div class="cols"><section><h2>Identity</h2>{identity}</section><section><h2>State</h2>{state}'
             '<h2>Maintenance</h2>{maint}</section></div><h2>Activity</h2><p class="hours">Window: {links}</p>{charts}'
             '<h2>Commit history</h2>{newest}{history}{older}',
             identity=_identity(table, await views.identity(table)), state=_state(table),
             maint=_maintenance(cp, problem, await views.maintenance_runs(table)), links=hour_links(hours, "tables", table.table_id),
             charts=charts(commit_charts(await views.activity(hours, None, table.table_id), hours, "this table")),
             newest=h('<p><a href="{l}">newest first</a></p>', l=href("tables", table.table_id)) if before else "",
             history=_history(table, entries), older=older)
    return page(table.label or table.location, body, viewer=who, crumbs=_crumbs(table))


async def commit_page(request: web.Request) -> web.Response:
    table = await _visible_table(request)
    only_params(request, set())
    who = viewer(request)
    raw = request.match_info["version"]
    if not raw.isdigit() or len(raw) > 19 or int(raw) > 2**62:
        raise InvalidArgumentError("the version must be a non-negative integer")
    entry, actions = await request.app[VIEWS].commit(table, int(raw))
    r, s = entry.row, entry.summary
    facts = _dl([("version", r.version), ("operation", s.operation if s else ""), ("engine", s.engine if s else ""),
                 ("in-commit timestamp", ts(s.in_commit_timestamp) if s else ""), ("ratified", ts(r.ratified_at)),
                 ("published", ts(r.backfilled_at) if r.backfilled_at is not None else "not yet"),
                 ("staged file", r.file_name), ("size", size(r.file_size)), ("sha-256", r.content_sha256),
                 ("read from", "_delta_log/" + (f"{r.version:020d}.json" if entry.published
                                                else f"{table.commit_dir}/{r.file_name}")),
                 ("files", f"+{s.files_added} −{s.files_removed}" if s else ""),
                 ("rows", f"+{_rows(s.rows_added)} −{_rows(s.rows_removed)}" if s else ""),
                 ("bytes", f"+{size(s.bytes_added)} −{size(s.bytes_removed)}" if s else "")], "commit")
    items = join(h('<li data-action="{kind}"><span class="kind">{kind}</span><pre>{body}</pre></li>', kind=next(iter(a)),
                   body=json.dumps(next(iter(a.values())), indent=2, sort_keys=True, ensure_ascii=False))
                 for a in actions[:ACTIONS_SHOWN])
    more = h('<p class="muted">{n} more actions not shown.</p>', n=len(actions) - ACTIONS_SHOWN) \
        if len(actions) > ACTIONS_SHOWN else ""
    body = h('{facts}<h2>Actions ({n})</h2><ol class="actions" id="actions">{items}</ol>{more}', facts=facts,
             n=len(actions), items=items, more=more)
    crumbs = [*_crumbs(table), (table.label or table.location, href("tables", table.table_id))]
    return page(f"Version {r.version}", body, viewer=who, crumbs=crumbs)
