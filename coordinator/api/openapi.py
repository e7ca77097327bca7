"""``GET /api/v1/openapi.json``: the hand-written OpenAPI document shipped inside the package."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from aiohttp import web

DOCUMENT = Path(__file__).resolve().parent.parent / "openapi.json"


@lru_cache(maxsize=1)
def _body() -> bytes:
    return DOCUMENT.read_bytes()


async def document(request: web.Request) -> web.Response:
    from .errors import only_params

    only_params(request, set())
    return web.Response(body=_body(), content_type="application/json")
