"""Watching the service: the access log, request metrics and ``/metrics``.

``access_middleware`` is the outermost middleware: it sees the final status of every request (after
the error envelope was built), so the access log line and the metrics agree with what the client got.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from client.contract.errors import CommitOwnerError
from coordinator.api.keys import METRICS, OUTCOME, RECENT_ERRORS, REQUEST_ID, SERVICE, TABLE_ID, VERSION
from coordinator.runtime.logs import redact
from coordinator.runtime.metrics import CONTENT_TYPE_LATEST

access_log = logging.getLogger("commit_owner.access")
log = logging.getLogger("commit_owner.api")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Refusals an operator wants to see on the status page (conflicts and bad requests are the clients' business).
_NOTABLE = {"FOREIGN_COMMIT_FILE", "TABLE_NOT_ACCEPTING_COMMITS", "TOO_MANY_UNBACKFILLED_COMMITS"}


def _route(request: web.Request) -> str:
    info = request.match_info
    resource = info.route.resource if info.route is not None else None
    return resource.canonical if resource is not None else "unmatched"


def _error_message(resp: web.StreamResponse) -> str | None:
    body = getattr(resp, "body", None)
    if not isinstance(body, (bytes, bytearray)):
        return None
    try:
        return str(orjson.loads(body)["error"]["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


@web.middleware
async def access_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    metrics = request.app[METRICS]
    started = time.perf_counter()
    status = 500
    resp: web.StreamResponse | None = None
    metrics.bump(metrics.in_flight)
    try:
        resp = await handler(request)
        status = resp.status
        return resp
    except web.HTTPException as e:  # redirects and the like that the error middleware lets through
        status = e.status
        raise
    finally:
        metrics.bump(metrics.in_flight, -1.0)
        elapsed = time.perf_counter() - started
        metrics.observe_request(request.method, _route(request), status, elapsed)
        outcome = request.get(OUTCOME) or ("ok" if status < 400 else str(status))
        table_id = request.get(TABLE_ID) or request.match_info.get("table_id")
        if access_log.isEnabledFor(logging.INFO):  # built only when written (log_level WARNING skips it all)
            _access_line(request, status, outcome, table_id, elapsed)
        if status >= 500 or outcome in _NOTABLE:
            message = _error_message(resp) if resp is not None else None
            request.app[RECENT_ERRORS].add(request_id=request.get(REQUEST_ID), method=request.method,
                                           path=request.path, status=status, outcome=outcome, table_id=table_id,
                                           message=redact(message or ""))


def _access_line(request: web.Request, status: int, outcome: str, table_id: str | None, elapsed: float) -> None:
    """One line per request (the formatter redacts the whole line)."""
    version = request.get(VERSION)
    if version is None and "version" in request.query:
        version = request.query.get("version")
    path = request.path
    query = redact(request.query_string) if request.query_string else ""
    access_log.info(
        "%s %s%s %d %s %.1fms", request.method, path, f"?{query}" if query else "", status, outcome,
        elapsed * 1000,
        extra={"request_id": request.get(REQUEST_ID), "table_id": table_id, "version": version,
               "outcome": outcome, "duration_ms": round(elapsed * 1000, 3), "method": request.method,
               "path": path, "status": status},
    )


async def metrics_handler(request: web.Request) -> web.Response:
    metrics = request.app[METRICS]
    try:
        await metrics.refresh_tables(*await request.app[SERVICE].reads.backlog())
    except CommitOwnerError as e:
        log.warning("metrics: per-table figures not refreshed: %s", e.message)
    return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})
