"""The project's own API, declared once: ``/api/v1`` and the probes (app.py registers them, auth reads their
permission, openapi.py documents them with the operations of coordinator/openapi.json)."""

from __future__ import annotations

from coordinator.api import commits, health, observe, openapi, status, tables, transactions
from coordinator.api.errors import API
from coordinator.api.routes import Locate, Permission, Route

V1 = "/api/v1"
PUBLIC, WATCH = Permission.PUBLIC, Permission.WATCH
READ, COMMIT, ADMIN = Permission.READ, Permission.COMMIT, Permission.ADMIN
TABLE_ID, BODY, QUERY, HANDLER = Locate.TABLE_ID, Locate.BODY, Locate.QUERY, Locate.HANDLER

# In the order of the OpenAPI document's paths.
ROUTES = [
    Route("GET", "/healthz", health.healthz, PUBLIC, API, "healthz"),
    Route("GET", "/readyz", health.readyz, PUBLIC, API, "readyz"),
    Route("GET", "/", status.status_page, WATCH, API, "statusPage"),
    Route("GET", "/metrics", observe.metrics_handler, WATCH, API, "metrics"),
    Route("GET", f"{V1}/openapi.json", openapi.document, PUBLIC, API, "openapi"),
    Route("POST", f"{V1}/tables", tables.register_table, ADMIN, API, "registerTable", BODY),
    Route("GET", f"{V1}/tables", tables.list_tables, READ, API, "listTables", QUERY),
    Route("GET", f"{V1}/tables/{{table_id}}", tables.get_table, READ, API, "getTable", TABLE_ID),
    Route("DELETE", f"{V1}/tables/{{table_id}}", tables.forget_table, ADMIN, API, "forgetTable", TABLE_ID),
    Route("POST", f"{V1}/tables/{{table_id}}/commits", commits.commit, COMMIT, API, "commit", TABLE_ID),
    Route("GET", f"{V1}/tables/{{table_id}}/commits", commits.get_commits, READ, API, "getCommits", TABLE_ID),
    Route("POST", f"{V1}/tables/{{table_id}}/backfill", tables.backfill, ADMIN, API, "backfillToVersion", TABLE_ID),
    # multi-table: the handler checks the permission on every table named in the body (issue 28); an answer
    # without that check is refused (Locate.HANDLER fails closed)
    Route("POST", f"{V1}/transactions", transactions.commit_transaction, COMMIT, API, "commitTransaction", HANDLER),
    Route("POST", f"{V1}/snapshots", transactions.snapshots, READ, API, "getSnapshots", HANDLER),
]
