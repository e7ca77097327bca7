"""The routes of the Delta REST Catalog API, declared once (app.py registers them; auth reads their permission;
openapi.json beside this file documents them).

A table's routes name it (``Locate.NAME``): the auth middleware finds it and judges the route's permission
before the handler runs (reading needs read, commits and metadata updates commit, dropping and renaming admin;
a table the token may not read is answered as a name that names no table). So are a staging table's place
under the managed root (``Locate.MANAGED``), the staging table its credentials name (``Locate.STAGING_ID``) and
the location a create names (``Locate.BODY``, admin, its real path on local disk too). A path's credentials
call ``auth.require`` in their handler (``Locate.HANDLER``; an answer without that call is refused).
"""

from __future__ import annotations

from coordinator.api.delta import credentials, tables
from coordinator.api.delta.errors import API, PREFIX
from coordinator.api.routes import Locate, Permission, Route

READ, COMMIT, ADMIN = Permission.READ, Permission.COMMIT, Permission.ADMIN
QUERY, HANDLER, NAME, BODY = Locate.QUERY, Locate.HANDLER, Locate.NAME, Locate.BODY
MANAGED, STAGING_ID = Locate.MANAGED, Locate.STAGING_ID
SCHEMA = f"{PREFIX}/catalogs/{{catalog}}/schemas/{{schema}}"
TABLE = f"{SCHEMA}/tables/{{table}}"

ROUTES = [
    Route("GET", f"{PREFIX}/config", tables.get_config, READ, API, "getConfig", QUERY),
    Route("POST", f"{SCHEMA}/staging-tables", tables.create_staging_table, ADMIN, API, "createStagingTable", MANAGED),
    Route("POST", f"{SCHEMA}/tables", tables.create_table, ADMIN, API, "createTable", BODY),
    Route("GET", TABLE, tables.load_table, READ, API, "loadTable", NAME),
    Route("HEAD", TABLE, tables.load_table, READ, API, "tableExists", NAME),
    Route("POST", TABLE, tables.update_table, COMMIT, API, "updateTable", NAME),
    Route("DELETE", TABLE, tables.delete_table, ADMIN, API, "deleteTable", NAME),
    Route("POST", f"{TABLE}/rename", tables.rename_table, ADMIN, API, "renameTable", NAME),
    Route("POST", f"{TABLE}/metrics", tables.report_metrics, COMMIT, API, "reportMetrics", NAME),
    Route("GET", f"{TABLE}/credentials", credentials.table_credentials, READ, API, "getTableCredentials", NAME),
    Route("GET", f"{PREFIX}/staging-tables/{{staging_id}}/credentials", credentials.staging_credentials, ADMIN, API,
          "getStagingTableCredentials", STAGING_ID),
    Route("GET", f"{PREFIX}/temporary-path-credentials", credentials.path_credentials, READ, API,
          "getTemporaryPathCredentials", HANDLER),
]
