"""Liveness and readiness."""

from __future__ import annotations

from aiohttp import web

from client.contract.errors import CommitOwnerError

from .errors import json_response
from .keys import STORAGE, STORE


async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    checks: dict[str, str] = {}
    ok = True
    try:
        await request.app[STORE].ping()
        checks["database"] = "ok"
    except CommitOwnerError as e:
        ok, checks["database"] = False, e.message
    try:
        await request.app[STORAGE].ping()
        checks["storage"] = "ok"
    except OSError as e:
        ok, checks["storage"] = False, f"unreachable: {type(e).__name__}"
    return json_response({"status": "ok" if ok else "unavailable", "checks": checks}, status=200 if ok else 503)
