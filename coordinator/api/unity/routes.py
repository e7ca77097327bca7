"""The routes of the Unity Catalog facade, declared once (app.py registers them; auth reads their permission).

Most permissions are checked in two steps: the middleware checks that the token holds the action somewhere
(and the ``location`` query parameter if one is given; a listing is filtered per table), then the location:
a table named by the path (``Locate.NAME``; one the token may not read is answered as a name that names no
table) or by the request's ``table_id`` (``Locate.TABLE_ID_FIELD``), and a staging table's place under the
managed root (``Locate.MANAGED``), are found and judged by the middleware before the handler runs; creating a
table and a path's credentials call ``auth.require`` once they have resolved the location (``Locate.HANDLER``;
an answer without that call is refused). Catalogs and schemas have no
location: reading them needs read somewhere, creating and dropping them admin over every location ("*").
The credential routes need read to get in; the handler then asks the action of the operation requested
(READ_WRITE / PATH_READ_WRITE: commit, PATH_CREATE_TABLE: admin).
"""

from __future__ import annotations

from coordinator.api.routes import Locate, Permission, Route
from coordinator.api.unity import commits, credentials, names, tables
from coordinator.api.unity.errors import API, PREFIX

READ, COMMIT, ADMIN, EVERYWHERE = Permission.READ, Permission.COMMIT, Permission.ADMIN, Permission.ADMIN_EVERYWHERE
QUERY, HANDLER, NAME, TABLE_ID_FIELD = Locate.QUERY, Locate.HANDLER, Locate.NAME, Locate.TABLE_ID_FIELD
MANAGED = Locate.MANAGED

ROUTES = [
    Route("POST", f"{PREFIX}/catalogs", names.create_catalog, EVERYWHERE, API, None),
    Route("GET", f"{PREFIX}/catalogs", names.list_catalogs, READ, API, None, QUERY),
    Route("GET", f"{PREFIX}/catalogs/{{name}}", names.get_catalog, READ, API, None, QUERY),
    Route("DELETE", f"{PREFIX}/catalogs/{{name}}", names.delete_catalog, EVERYWHERE, API, None),
    Route("POST", f"{PREFIX}/schemas", names.create_schema, EVERYWHERE, API, None),
    Route("GET", f"{PREFIX}/schemas", names.list_schemas, READ, API, None, QUERY),
    Route("GET", f"{PREFIX}/schemas/{{full_name}}", names.get_schema, READ, API, None, QUERY),
    Route("DELETE", f"{PREFIX}/schemas/{{full_name}}", names.delete_schema, EVERYWHERE, API, None),
    Route("POST", f"{PREFIX}/staging-tables", tables.create_staging_table, ADMIN, API, None, MANAGED),
    Route("POST", f"{PREFIX}/tables", tables.create_table, ADMIN, API, None, HANDLER),
    Route("GET", f"{PREFIX}/tables", tables.list_tables, READ, API, None, QUERY),
    Route("GET", f"{PREFIX}/tables/{{full_name}}", tables.get_table, READ, API, None, NAME),
    Route("DELETE", f"{PREFIX}/tables/{{full_name}}", tables.delete_table, ADMIN, API, None, NAME),
    Route("POST", f"{PREFIX}/delta/preview/commits", commits.commit, COMMIT, API, None, TABLE_ID_FIELD),
    Route("GET", f"{PREFIX}/delta/preview/commits", commits.get_commits, READ, API, None, TABLE_ID_FIELD),
    Route("POST", f"{PREFIX}/temporary-table-credentials", credentials.table_credentials, READ, API, None, TABLE_ID_FIELD),
    Route("POST", f"{PREFIX}/temporary-path-credentials", credentials.path_credentials, READ, API, None, HANDLER),
]
