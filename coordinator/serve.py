"""Running the service until SIGTERM/SIGINT, then stopping in order.

aiohttp's runner does the ordering: close the listening socket (no new connections), close idle
keep-alive connections, wait up to ``shutdown_grace_seconds`` for handlers in flight (a commit being
ratified is answered), then run the cleanup contexts in reverse: the backfiller stops, storage
clients close, the database pool is disposed.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from .settings import Settings

log = logging.getLogger("commit_owner.serve")


async def _announce_shutdown(app: web.Application) -> None:
    log.info("shutting down: no new connections; finishing the requests in flight")


EVENT_LOOPS = ("auto", "uvloop", "asyncio")


def new_event_loop(choice: str) -> asyncio.AbstractEventLoop:
    """The loop `serve` runs on (setting ``event_loop``); uvloop spends less CPU per request (docs/decisions.md).

    Raises ValueError for an unknown choice, or for ``uvloop`` when it is not installed.
    """
    if choice not in EVENT_LOOPS:
        raise ValueError(f"event_loop must be one of {', '.join(EVENT_LOOPS)}, not {choice!r}")
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise ValueError("event_loop = uvloop, but uvloop is not installed (pip install uvloop)") from None
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run_service(app: web.Application, settings: Settings) -> None:
    """Serve ``app`` until a signal; returns after a clean stop."""
    app.on_shutdown.append(_announce_shutdown)
    loop = new_event_loop(settings.event_loop)
    log.info("commit-owner listening on http://%s:%s (event loop: %s)", settings.host, settings.port,
             type(loop).__module__.split(".")[0])
    web.run_app(app, host=settings.host, port=settings.port, print=None, access_log=None, loop=loop,
                shutdown_timeout=settings.shutdown_grace_seconds, handle_signals=True)
    log.info("commit-owner stopped")
