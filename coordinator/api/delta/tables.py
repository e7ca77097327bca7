"""Handlers of the Delta REST Catalog API's tables: config, staging, create, load, exists, update, delete,
rename and metrics (``/api/2.1/unity-catalog/delta/v1/...``).

An adapter only: it parses this API's shapes, asks the catalog and the commit service, and shapes the reply.
Path parameters are bare names (``catalogs/uc/schemas/s/tables/t``). Commits are ``updateTable`` with
``add-commit`` of a file the writer staged in ``_delta_log/_staged_commits/``; their ratification is the one
every API shares (``CommitService.writer_commit``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp import web

from client.contract.delta_log import CATALOG_MANAGED, ICT_ENABLE, TABLE_ID_PROPERTY, new_table_protocol
from client.contract.errors import InvalidArgumentError, TableChangedError, TableNotFoundError
from coordinator.api.auth import named_table
from coordinator.api.delta import shapes
from coordinator.api.delta.errors import API
from coordinator.api.errors import json_body, json_object, json_response, only_fields, only_params
from coordinator.api.keys import CATALOG, METRICS, SERVICE, TABLE_ID, VERSION
from coordinator.api.parse import int_field, location_field, parse_uuid, str_field
from coordinator.api.routes import ROUTE_TABLE
from coordinator.core.catalog import (
    EXTERNAL,
    MANAGED,
    check_comment,
    check_name,
    check_properties,
    check_reserved,
    check_table_type,
    held_properties,
    new_name,
    refuse_uniform,
)
from coordinator.core.columns import partition_columns_of, to_columns, with_partitions
from coordinator.core.last_commit import current_properties
from coordinator.core.writer_staged import StagedCommit
from coordinator.store.rows import NameRow, TableRow

PROTOCOL_VERSION = "1.0"
UPDATE_ACTIONS = frozenset({"add-commit", "set-latest-backfilled-version", "set-columns", "set-partition-columns",
                            "set-properties", "remove-properties", "set-protocol", "set-table-comment",
                            "set-domain-metadata", "remove-domain-metadata", "update-metadata-snapshot-version"})
# The updates that change the table's metadata (recorded with the commit's version and timestamp).
METADATA_ACTIONS = frozenset({"set-columns", "set-partition-columns", "set-properties", "remove-properties",
                              "set-protocol", "set-table-comment", "set-domain-metadata", "remove-domain-metadata"})
CREATE_FIELDS = {"name", "location", "table-type", "comment", "columns", "partition-columns", "protocol",
                 "properties", "domain-metadata", "last-commit-timestamp-ms", "uniform"}


def _schema(request: web.Request) -> tuple[str, str]:
    """The path's catalog and schema (bare names)."""
    m = request.match_info
    return check_name(m["catalog"], "catalog"), check_name(m["schema"], "schema")


async def _load(request: web.Request, table_id: str, name: NameRow | None = None) -> dict[str, Any]:
    """The load-table reply, its commits and latest version from one read (and the name row, unless given)."""
    table, commits = await request.app[SERVICE].reads.unpublished_commits(table_id)
    if name is None:
        name = await request.app[CATALOG].name_of(table_id)
    if name is None:
        raise TableNotFoundError(f"table {table_id} has no name in this catalog")
    return shapes.load_reply(table, name, [c.row for c in commits])


# -- config ------------------------------------------------------------------------------------------------


async def get_config(request: web.Request) -> web.Response:
    only_params(request, {"catalog", "protocol-versions"})
    catalog = request.query.get("catalog")
    await request.app[CATALOG].get_catalog(check_name(catalog, "catalog"))
    versions = request.query.get("protocol-versions")
    if not versions:
        raise InvalidArgumentError("protocol-versions is required (e.g. 1.0)")
    if not any(v.strip().split(".")[0] == "1" for v in versions.split(",")):
        raise InvalidArgumentError(f"no protocol version in common: this server speaks {PROTOCOL_VERSION}")
    table = request.app[ROUTE_TABLE]
    endpoints = [f"{r.method} {r.path.removeprefix(API.prefix.removesuffix('/v1'))}"
                 for r in table.routes if r.api is API]
    return json_response({"endpoints": endpoints, "protocol-version": PROTOCOL_VERSION})


# -- staging and create ------------------------------------------------------------------------------------


async def create_staging_table(request: web.Request) -> web.Response:
    """The auth middleware judged admin under the managed root (``Locate.MANAGED``)."""
    catalog = request.app[CATALOG]
    only_params(request, set())
    body = await json_body(request, {"name"})
    catalog_name, schema = _schema(request)
    row = await catalog.reserve(catalog_name, schema, check_name(body.get("name"), "name"))
    return json_response({
        "table-id": row.id, "table-type": MANAGED, "location": row.location, "storage-credentials": [],
        "required-protocol": shapes.wire_protocol(new_table_protocol(CATALOG_MANAGED)),
        "required-properties": {TABLE_ID_PROPERTY: row.id, ICT_ENABLE: "true"},
        "suggested-protocol": {"reader-features": [], "writer-features": []}, "suggested-properties": {},
    })


async def create_table(request: web.Request) -> web.Response:
    """The auth middleware judged admin on the body's location, its real path on local disk too (``Locate.BODY``)."""
    body = await json_object(request)
    location = location_field(body)
    only_params(request, set())
    only_fields(body, CREATE_FIELDS)
    catalog_name, schema = _schema(request)
    refuse_uniform(body.get("uniform"))
    table_type = check_table_type(body.get("table-type"), "table-type")
    fields = shapes.check_struct(body.get("columns"))
    partitions = shapes.check_names(body.get("partition-columns"), "partition-columns")
    given = check_properties(body.get("properties"))
    derived = shapes.protocol_properties(body.get("protocol"))
    if body.get("domain-metadata") is not None:
        derived.update(shapes.domain_properties(body.get("domain-metadata")))
    ts = int_field(body, "last-commit-timestamp-ms", required=True, minimum=0)
    derived.update({shapes.LAST_UPDATE_VERSION: "0", shapes.LAST_COMMIT_TIMESTAMP: str(ts)})
    check_reserved(given, derived, reserved=shapes.derived)  # (the catalog checks the table's own keys)
    properties = {**{k: v for k, v in given.items() if not shapes.derived(k)}, **derived}
    named = new_name(catalog_name, schema, check_name(body.get("name"), "name"),
                     table_type, columns=to_columns(fields, partitions),
                     properties=properties, comment=check_comment(body.get("comment")))
    table, name = await request.app[CATALOG].create_table(named, location)
    return json_response(shapes.load_reply(table, name, []))


# -- load, exists, delete, rename ----------------------------------------------------------------------------


async def load_table(request: web.Request) -> web.StreamResponse:
    only_params(request, set())
    table, name = await named_table(request)
    if request.method == "HEAD":  # tableExists
        return web.Response(status=204)
    return json_response(await _load(request, table.table_id, name))


async def delete_table(request: web.Request) -> web.Response:
    only_params(request, set())
    table, _ = await named_table(request)
    await request.app[CATALOG].drop(table)
    return web.Response(status=204)


async def rename_table(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, {"new-name"})
    new = check_name(body.get("new-name"), "new-name")
    table, _ = await named_table(request)
    await request.app[CATALOG].rename(table, new)
    return web.Response(status=204)


async def report_metrics(request: web.Request) -> web.Response:
    """Commit metrics (telemetry) after a commit: checked against the table, counted, not stored."""
    only_params(request, set())
    body = await json_body(request, {"table-id", "report"})
    table_id = parse_uuid(body.get("table-id"), "table-id")
    table, _ = await named_table(request)
    if table_id != table.table_id:
        raise InvalidArgumentError(f"table-id {table_id} is not the id of the table the path names")
    report = body.get("report")
    if report is not None and not isinstance(report, dict):
        raise InvalidArgumentError("report must be an object")
    kind = next(iter(report), "none") if report else "none"
    request.app[METRICS].metrics_reports.labels(kind if kind in ("commit-report",) else "other").inc()
    return web.Response(status=204)


# -- update (commits and metadata) ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Update:
    uuid: str
    etag: str | None
    actions: dict[str, dict[str, Any]]


def _parse_update(body: dict[str, Any]) -> _Update:
    requirements, updates = body.get("requirements"), body.get("updates")
    if not isinstance(requirements, list) or not requirements:
        raise InvalidArgumentError("requirements must be a non-empty list holding assert-table-uuid")
    if not isinstance(updates, list) or not updates:
        raise InvalidArgumentError("updates must be a non-empty list")
    reqs: dict[str, dict[str, Any]] = {}
    for r in requirements:
        kind = r.get("type") if isinstance(r, dict) else None
        if kind not in ("assert-table-uuid", "assert-etag"):
            raise InvalidArgumentError(f"requirement type {str(kind)[:40]!r} is not assert-table-uuid or assert-etag")
        if kind in reqs:
            raise InvalidArgumentError(f"requirement {kind} is given twice")
        reqs[kind] = r
    if "assert-table-uuid" not in reqs:
        raise InvalidArgumentError("an assert-table-uuid requirement is required")
    etag = reqs.get("assert-etag", {}).get("etag") if "assert-etag" in reqs else None
    if "assert-etag" in reqs and not isinstance(etag, str):
        raise InvalidArgumentError("assert-etag.etag must be a string")
    actions: dict[str, dict[str, Any]] = {}
    for u in updates:
        action = u.get("action") if isinstance(u, dict) else None
        if action not in UPDATE_ACTIONS:
            raise InvalidArgumentError(f"update action {str(action)[:40]!r} is not one of {', '.join(sorted(UPDATE_ACTIONS))}")
        if action in actions:
            raise InvalidArgumentError(f"update action {action} is given twice")
        actions[action] = u
    return _Update(parse_uuid(reqs["assert-table-uuid"].get("uuid"), "assert-table-uuid.uuid"), etag, actions)


def _new_metadata(table: TableRow, name: NameRow, actions: dict[str, dict[str, Any]], version: int | None,
                  timestamp: int | None) -> dict[str, Any] | None:
    """The columns, properties and comment after the metadata updates (None: none asked), checked whole: a
    reserved property may only repeat the value it comes to (decision 65). The properties start from those the
    table's load answered (its last commit's as the table holds them, decision 74), so an echo of them is one."""
    if not (METADATA_ACTIONS | {"update-metadata-snapshot-version"}) & set(actions):
        return None
    columns, props, comment = name.columns, current_properties(table, name.properties), name.comment
    given: dict[str, str | None] = {}  # the properties the request sets (None: removes), reserved ones checked last
    if "set-columns" in actions:
        fields = shapes.check_struct(actions["set-columns"].get("columns"))
        columns = to_columns(fields, partition_columns_of(name.columns))
    if "set-partition-columns" in actions:
        parts = shapes.check_names(actions["set-partition-columns"].get("partition-columns"), "partition-columns")
        columns = with_partitions(columns, parts)
    if "set-properties" in actions:
        given.update(check_properties(actions["set-properties"].get("updates")))
    if "remove-properties" in actions:
        removals = shapes.check_names(actions["remove-properties"].get("removals"), "removals")
        if set(removals) & set(given):
            raise InvalidArgumentError("set-properties and remove-properties touch the same key")
        given.update(dict.fromkeys(removals))
    for k, v in given.items():
        if shapes.reserved(k):
            continue
        if v is None:
            props.pop(k, None)
        else:
            props[k] = v
    if "set-protocol" in actions:
        props = {**shapes.without_protocol(props), **shapes.protocol_properties(actions["set-protocol"].get("protocol"))}
    if "set-domain-metadata" in actions:
        props.update(shapes.domain_properties(actions["set-domain-metadata"].get("updates")))
    if "remove-domain-metadata" in actions:
        for d in shapes.check_names(actions["remove-domain-metadata"].get("domains"), "domains"):
            if d not in shapes.DOMAIN_PROPERTIES:
                raise InvalidArgumentError(f"domain {d[:80]!r} is not one this API carries")
            props.pop(shapes.DOMAIN_PROPERTIES[d], None)
    if "set-table-comment" in actions:
        comment = check_comment(actions["set-table-comment"].get("comment"))
    if "update-metadata-snapshot-version" in actions:
        if name.table_type != EXTERNAL:
            raise InvalidArgumentError("update-metadata-snapshot-version is for EXTERNAL tables only")
        u = actions["update-metadata-snapshot-version"]
        version = int_field(u, "last-commit-version", required=True, minimum=0)
        timestamp = int_field(u, "last-commit-timestamp-ms", required=True, minimum=0)
    if version is not None:
        props[shapes.LAST_UPDATE_VERSION] = str(version)
    if timestamp is not None:
        props[shapes.LAST_COMMIT_TIMESTAMP] = str(timestamp)
    check_reserved(given, {**props, **held_properties(table.table_id, name.table_type, name.properties)},
                   reserved=shapes.reserved)
    return {"columns": columns, "properties": props, "comment": comment}


async def update_table(request: web.Request) -> web.Response:
    """Requirements first, then everything is checked, then: the writer's publication report, its commit,
    the metadata. A version already taken answers 409 whatever else the request carries."""
    only_params(request, set())
    update = _parse_update(await json_body(request, {"requirements", "updates"}))
    table, name = await named_table(request)
    request[TABLE_ID] = table.table_id  # (the access log's)
    if update.uuid != table.table_id:
        raise TableChangedError(f"assert-table-uuid failed: the table is {table.table_id}, not {update.uuid}")
    if update.etag is not None and shapes.etag(table, name) != update.etag:  # (the rows the lookup just read)
        raise TableChangedError("assert-etag failed: the table changed since it was loaded; load it again")
    actions = update.actions
    commit = actions.get("add-commit", {}).get("commit") if "add-commit" in actions else None
    version = timestamp = None
    if "add-commit" in actions:
        if not isinstance(commit, dict):
            raise InvalidArgumentError("add-commit.commit must be an object")
        refuse_uniform(actions["add-commit"].get("uniform"))
        version = int_field(commit, "version", required=True)
        if version is not None:
            request[VERSION] = version  # (the access log's)
        timestamp = int_field(commit, "timestamp", required=True)
        int_field(commit, "file-modification-timestamp", required=True)
        size = int_field(commit, "file-size", required=True, minimum=0)
        file_name = str_field(commit, "file-name")
        await request.app[CATALOG].managed(table, name)
    published = None
    if "set-latest-backfilled-version" in actions:
        published = int_field(actions["set-latest-backfilled-version"], "latest-published-version",
                              required=True, minimum=0)
    changes = bool(METADATA_ACTIONS & set(actions))
    metadata = _new_metadata(table, name, actions, version if changes else None,
                             timestamp if changes else None)
    staged = StagedCommit(version, file_name, size) if commit is not None else None  # type: ignore[arg-type]
    await request.app[SERVICE].writer_commit(table, published=published, commit=staged, metadata=metadata)
    return json_response(await _load(request, table.table_id, None if metadata is not None else name))

