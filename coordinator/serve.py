"""Running the service until SIGTERM/SIGINT, then stopping in order.

aiohttp's runner does the ordering: close the listening socket (no new connections), close idle
keep-alive connections, wait up to ``shutdown_grace_seconds`` for handlers in flight (a commit being
ratified is answered), then run the cleanup contexts in reverse: the backfiller stops, storage
clients close, the database pool is disposed.
"""

from __future__ import annotations

import logging

from aiohttp import web

from .settings import Settings

log = logging.getLogger("commit_owner.serve")


async def _announce_shutdown(app: web.Application) -> None:
    log.info("shutting down: no new connections; finishing the requests in flight")


def run_service(app: web.Application, settings: Settings) -> None:
    """Serve ``app`` until a signal; returns after a clean stop."""
    app.on_shutdown.append(_announce_shutdown)
    log.info("commit-owner listening on http://%s:%s", settings.host, settings.port)
    web.run_app(app, host=settings.host, port=settings.port, print=None, access_log=None,
                shutdown_timeout=settings.shutdown_grace_seconds, handle_signals=True)
    log.info("commit-owner stopped")
