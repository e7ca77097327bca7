"""Liveness and readiness."""

from __future__ import annotations

from aiohttp import web

from coordinator.api.errors import json_response
from coordinator.api.keys import SERVICE


async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    problems = await request.app[SERVICE].reads.ping()
    checks = {what: problem or "ok" for what, problem in problems.items()}
    ok = not any(problems.values())
    return json_response({"status": "ok" if ok else "unavailable", "checks": checks}, status=200 if ok else 503)
