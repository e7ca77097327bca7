"""Typed keys of the application's resources (no module-level singletons)."""

from __future__ import annotations

from aiohttp import web

from backfill.worker import Backfiller

from ..janitor import Janitor
from ..service import CommitService
from ..settings import Settings
from ..storage import StorageRouter
from ..store import OwnershipStore

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", OwnershipStore)
STORAGE = web.AppKey("storage", StorageRouter)
SERVICE = web.AppKey("service", CommitService)
BACKFILLER = web.AppKey("backfiller", Backfiller)

JANITOR = web.AppKey("janitor", Janitor)

# operations (metrics, status page)
from ..metrics import Metrics, RecentErrors  # noqa: E402

METRICS = web.AppKey("metrics", Metrics)
RECENT_ERRORS = web.AppKey("recent_errors", RecentErrors)
