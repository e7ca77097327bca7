"""The routes of the Delta REST Catalog API, declared once (app.py registers them; auth reads their permission;
openapi.json beside this file documents them).

The handlers resolve each table by name and call ``auth.require`` for its location (``Locate.HANDLER``):
reading needs read, commits and metadata updates commit, creating, dropping and renaming admin.
"""

from __future__ import annotations

from ..routes import Locate, Permission, Route
from . import credentials, tables
from .errors import API, PREFIX

READ, COMMIT, ADMIN = Permission.READ, Permission.COMMIT, Permission.ADMIN
QUERY, HANDLER = Locate.QUERY, Locate.HANDLER
SCHEMA = f"{PREFIX}/catalogs/{{catalog}}/schemas/{{schema}}"
TABLE = f"{SCHEMA}/tables/{{table}}"

ROUTES = [
    Route("GET", f"{PREFIX}/config", tables.get_config, READ, API, "getConfig", QUERY),
    Route("POST", f"{SCHEMA}/staging-tables", tables.create_staging_table, ADMIN, API, "createStagingTable", HANDLER),
    Route("POST", f"{SCHEMA}/tables", tables.create_table, ADMIN, API, "createTable", HANDLER),
    Route("GET", TABLE, tables.load_table, READ, API, "loadTable", HANDLER),
    Route("HEAD", TABLE, tables.load_table, READ, API, "tableExists", HANDLER),
    Route("POST", TABLE, tables.update_table, COMMIT, API, "updateTable", HANDLER),
    Route("DELETE", TABLE, tables.delete_table, ADMIN, API, "deleteTable", HANDLER),
    Route("POST", f"{TABLE}/rename", tables.rename_table, ADMIN, API, "renameTable", HANDLER),
    Route("POST", f"{TABLE}/metrics", tables.report_metrics, COMMIT, API, "reportMetrics", HANDLER),
    Route("GET", f"{TABLE}/credentials", credentials.table_credentials, READ, API, "getTableCredentials", HANDLER),
    Route("GET", f"{PREFIX}/staging-tables/{{staging_id}}/credentials", credentials.staging_credentials, ADMIN, API,
          "getStagingTableCredentials", HANDLER),
    Route("GET", f"{PREFIX}/temporary-path-credentials", credentials.path_credentials, READ, API,
          "getTemporaryPathCredentials", HANDLER),
]
