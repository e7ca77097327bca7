"""Typed keys of the application's resources (no module-level singletons) and of what a request carries."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from backfill.worker import Backfiller
from coordinator.core.catalog import Catalog
from coordinator.core.service import CommitService
from coordinator.core.vending import CredentialVendor
from coordinator.ops.janitor import Janitor
from coordinator.runtime.metrics import Metrics, RecentErrors
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter
from coordinator.store import OwnershipStore
from coordinator.store.rows import NameRow, StagingRow, TableRow
from coordinator.views.pages import Views

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", OwnershipStore)
STORAGE = web.AppKey("storage", StorageRouter)
SERVICE = web.AppKey("service", CommitService)
BACKFILLER = web.AppKey("backfiller", Backfiller)
CATALOG = web.AppKey("catalog", Catalog)
VENDOR = web.AppKey("vendor", CredentialVendor)
VIEWS = web.AppKey("views", Views)  # the browser UI's reads

JANITOR = web.AppKey("janitor", Janitor)

# operations (metrics, status page)
METRICS = web.AppKey("metrics", Metrics)
RECENT_ERRORS = web.AppKey("recent_errors", RecentErrors)

# what the middlewares and handlers note on a request (the access log line reads them)
REQUEST_ID = web.RequestKey("request_id", str)
OUTCOME = web.RequestKey("outcome", str)
TABLE_ID = web.RequestKey("table_id", str)
VERSION = web.RequestKey("version", int)

from coordinator.security.tokens import Principal  # noqa: E402

PRINCIPAL = web.RequestKey("principal", Principal)
# set by the auth middleware when a listing must show only the tables the token may read
VISIBLE: web.RequestKey[Callable[[str], bool]] = web.RequestKey("visible", Callable[[str], bool])  # type: ignore[arg-type]
# set by the auth middleware on a Locate.NAME route: the table the path names (``auth.named_table``)
NAMED: web.RequestKey[tuple[TableRow, NameRow]] = web.RequestKey("named", tuple)  # type: ignore[arg-type]
# set by the auth middleware on a Locate.STAGING_ID route: the staging reservation the path names (``auth.staging_of``)
STAGING = web.RequestKey("staging", StagingRow)
# set by ``auth.require`` once the token's permission on a location was granted: a Locate.HANDLER route's answer
# is refused without it (the route fails closed)
LOCATION_CHECKED = web.RequestKey("location_checked", bool)
