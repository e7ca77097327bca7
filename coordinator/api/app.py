"""Building the aiohttp application: routes, middleware and one cleanup context per resource.

``ROUTES`` is every API's route list, concatenated once (an API is a package exporting ``ROUTES``, see
routes.py): the router, the auth middleware, the error envelopes and the OpenAPI document all read it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from backfill.worker import Backfiller
from coordinator.api import delta, observe, openapi, ui, unity, v1
from coordinator.api.auth import auth_middleware, check_auth_mode, tokens_ctx
from coordinator.api.errors import error_middleware
from coordinator.api.keys import BACKFILLER, CATALOG, JANITOR, METRICS, RECENT_ERRORS, SERVICE, SETTINGS, STORAGE, STORE, VENDOR, VIEWS
from coordinator.api.routes import ROUTE_TABLE, RouteTable
from coordinator.core.catalog import Catalog
from coordinator.core.order.across import wait_seconds
from coordinator.core.service import CommitService
from coordinator.core.vending import CredentialVendor
from coordinator.ops.janitor import Janitor
from coordinator.runtime.metrics import Metrics, RecentErrors
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter, Wrap, metered
from coordinator.store import OwnershipStore, open_engine
from coordinator.store.browse import BrowseStore
from coordinator.store.maintenance import MaintenanceLog
from coordinator.store.names import NameStore
from coordinator.store.vended import VendedStore
from coordinator.views.pages import Views

log = logging.getLogger("commit_owner.app")

ROUTES = [
    *v1.ROUTES,
    *unity.ROUTES,
    *delta.ROUTES,
    *ui.ROUTES,
]


# A serving process keeps the connection of a one-statement unit of work this long for the next one (decision 63).
LINGER_SECONDS = 1.0


async def _store_ctx(app: web.Application) -> AsyncIterator[None]:
    s = app[SETTINGS]
    async with open_engine(s.database_url, pool_size=s.db_pool_size, timeout=s.request_timeout_seconds,
                           connect_timeout=s.db_connect_timeout_seconds, on_create=app[METRICS].watch_engine) as engine:
        app[STORE] = OwnershipStore(engine, group_max_rows=s.group_commit_max_rows,
                                    turn_wait_seconds=wait_seconds(s.commit_turn_seconds), linger_seconds=LINGER_SECONDS)
        try:
            yield
        finally:
            await app[STORE].close()


async def _storage_ctx(app: web.Application, inner: Wrap | None = None) -> AsyncIterator[None]:
    router = StorageRouter(app[SETTINGS], wrap=metered(app[METRICS]), inner=inner)
    app[STORAGE] = router
    try:
        yield
    finally:
        await router.close()


async def _service_ctx(app: web.Application) -> AsyncIterator[None]:
    s = app[SETTINGS]
    backfiller = Backfiller(app[STORE], app[STORAGE], s, background=s.backfill, metrics=app[METRICS])
    service = CommitService(s, app[STORE], app[STORAGE], publisher=backfiller, metrics=app[METRICS])
    app[SERVICE] = service
    app[CATALOG] = Catalog(service.registry, NameStore(app[STORE]))
    app[VIEWS] = Views(service.reads, app[CATALOG].names, BrowseStore(app[STORE]), app[STORAGE],
                       MaintenanceLog(app[STORE].db))
    app[VENDOR] = CredentialVendor(s, VendedStore(app[STORE].db))
    app[BACKFILLER] = backfiller
    await backfiller.start()
    try:
        yield
    finally:
        await backfiller.stop()


async def _janitor_ctx(app: web.Application) -> AsyncIterator[None]:
    """The orphan janitor of a service process (off when its interval is 0)."""
    janitor = Janitor(app[STORE], app[STORAGE], app[SETTINGS], names=app[CATALOG].names,
                      on_removed=app[METRICS].janitor_removed.inc)
    app[JANITOR] = janitor
    await janitor.start()
    try:
        yield
    finally:
        await janitor.stop()


async def _flush_metrics(app: web.Application) -> None:
    """The counts added up since the last write (``Metrics.bump``): a worker's last ones reach its files too."""
    app[METRICS].flush()


def create_app(settings: Settings, *, storage_inner: Wrap | None = None) -> web.Application:
    """The service's application; ``storage_inner`` wraps each log-storage backend inside its deadline
    (``StorageRouter``'s ``inner``: the test harness's fault injection)."""
    check_auth_mode(settings)
    app = web.Application(middlewares=[observe.access_middleware, error_middleware, auth_middleware],
                          client_max_size=settings.max_body_bytes)
    app[SETTINGS] = settings
    app[METRICS] = Metrics()
    app[RECENT_ERRORS] = RecentErrors()
    app.cleanup_ctx.extend([_store_ctx, functools.partial(_storage_ctx, inner=storage_inner), _service_ctx, tokens_ctx,
                            _janitor_ctx])
    app.on_cleanup.append(_flush_metrics)
    table = RouteTable(ROUTES)
    table.add_to(app.router)
    app[ROUTE_TABLE] = table
    app[openapi.BODY] = openapi.document_body(table)
    return app
