"""The routes of the Unity Catalog facade."""

from __future__ import annotations

from aiohttp import web

from . import commits, credentials, names, tables
from .errors import PREFIX


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_post(f"{PREFIX}/catalogs", names.create_catalog)
    r.add_get(f"{PREFIX}/catalogs", names.list_catalogs)
    r.add_get(f"{PREFIX}/catalogs/{{name}}", names.get_catalog)
    r.add_delete(f"{PREFIX}/catalogs/{{name}}", names.delete_catalog)
    r.add_post(f"{PREFIX}/schemas", names.create_schema)
    r.add_get(f"{PREFIX}/schemas", names.list_schemas)
    r.add_get(f"{PREFIX}/schemas/{{full_name}}", names.get_schema)
    r.add_delete(f"{PREFIX}/schemas/{{full_name}}", names.delete_schema)
    r.add_post(f"{PREFIX}/staging-tables", tables.create_staging_table)
    r.add_post(f"{PREFIX}/tables", tables.create_table)
    r.add_get(f"{PREFIX}/tables", tables.list_tables)
    r.add_get(f"{PREFIX}/tables/{{full_name}}", tables.get_table)
    r.add_delete(f"{PREFIX}/tables/{{full_name}}", tables.delete_table)
    r.add_post(f"{PREFIX}/delta/preview/commits", commits.commit)
    r.add_get(f"{PREFIX}/delta/preview/commits", commits.get_commits)
    r.add_post(f"{PREFIX}/temporary-table-credentials", credentials.table_credentials)
    r.add_post(f"{PREFIX}/temporary-path-credentials", credentials.path_credentials)
