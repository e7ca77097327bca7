"""Building the aiohttp application: routes, middleware and one cleanup context per resource."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web

from backfill.worker import Backfiller
from coordinator.ops.janitor import Janitor

from ..catalog import Catalog
from ..metrics import Metrics, RecentErrors
from ..service import CommitService
from ..settings import Settings
from ..storage import StorageRouter
from ..store import OwnershipStore, open_engine
from ..store.names import NameStore
from ..vending import CredentialVendor
from . import commits, health, observe, openapi, status, tables
from .auth import auth_middleware, check_auth_mode, tokens_ctx
from .errors import error_middleware
from .keys import BACKFILLER, CATALOG, JANITOR, METRICS, RECENT_ERRORS, SERVICE, SETTINGS, STORAGE, STORE, VENDOR
from .unity.routes import add_routes as add_unity_routes

log = logging.getLogger("commit_owner.app")

API = "/api/v1"


async def _store_ctx(app: web.Application) -> AsyncIterator[None]:
    s = app[SETTINGS]
    async with open_engine(s.database_url, pool_size=s.db_pool_size, timeout=s.request_timeout_seconds,
                           on_create=app[METRICS].watch_engine) as engine:
        app[STORE] = OwnershipStore(engine, group_max_rows=s.group_commit_max_rows)
        yield


async def _storage_ctx(app: web.Application) -> AsyncIterator[None]:
    router = StorageRouter(app[SETTINGS], wrap=app[METRICS].wrap_storage)
    app[STORAGE] = router
    try:
        yield
    finally:
        await router.close()


async def _service_ctx(app: web.Application) -> AsyncIterator[None]:
    s = app[SETTINGS]
    backfiller = Backfiller(app[STORE], app[STORAGE], s, background=s.backfill, metrics=app[METRICS])
    service = CommitService(s, app[STORE], app[STORAGE], backfiller=backfiller, metrics=app[METRICS])
    app[SERVICE] = service
    app[CATALOG] = Catalog(service, NameStore(app[STORE]))
    app[VENDOR] = CredentialVendor(s)
    app[BACKFILLER] = backfiller
    await backfiller.start()
    try:
        yield
    finally:
        await backfiller.stop()


async def _janitor_ctx(app: web.Application) -> AsyncIterator[None]:
    """The orphan janitor of a service process (off when its interval is 0)."""
    janitor = Janitor(app[STORE], app[STORAGE], app[SETTINGS])
    app[JANITOR] = janitor
    await janitor.start()
    try:
        yield
    finally:
        await janitor.stop()


def create_app(settings: Settings) -> web.Application:
    check_auth_mode(settings)
    app = web.Application(middlewares=[observe.access_middleware, error_middleware, auth_middleware],
                          client_max_size=settings.max_body_bytes)
    app[SETTINGS] = settings
    app[METRICS] = Metrics()
    app[RECENT_ERRORS] = RecentErrors()
    app.cleanup_ctx.extend([_store_ctx, _storage_ctx, _service_ctx, tokens_ctx, _janitor_ctx])
    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/readyz", health.readyz)
    app.router.add_get("/metrics", observe.metrics_handler)
    app.router.add_get("/", status.status_page)
    app.router.add_post(f"{API}/tables", tables.register_table)
    app.router.add_get(f"{API}/tables", tables.list_tables)
    app.router.add_get(f"{API}/tables/{{table_id}}", tables.get_table)
    app.router.add_delete(f"{API}/tables/{{table_id}}", tables.forget_table)
    app.router.add_post(f"{API}/tables/{{table_id}}/commits", commits.commit)
    app.router.add_get(f"{API}/tables/{{table_id}}/commits", commits.get_commits)
    app.router.add_post(f"{API}/tables/{{table_id}}/backfill", tables.backfill)
    app.router.add_get(f"{API}/openapi.json", openapi.document)
    add_unity_routes(app)
    return app
