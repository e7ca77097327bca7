"""Handlers of ``/delta/preview/commits``: commit (POST) and getCommits (GET with a JSON body, or query).

Both name their table by ``table_id`` (``Locate.TABLE_ID_FIELD``): the auth middleware judges the token's
permission on the table's registered location before the handler reads anything else of the request."""

from __future__ import annotations

from aiohttp import web

from client.contract.errors import InvalidArgumentError
from coordinator.api.errors import json_body, json_response, only_params
from coordinator.api.keys import CATALOG, SERVICE, TABLE_ID, VERSION
from coordinator.api.parse import int_field, parse_uuid, str_field
from coordinator.api.unity.shapes import commit_json, commit_metadata
from coordinator.core.catalog import check_reserved, held_properties, refuse_uniform
from coordinator.core.writer_staged import StagedCommit
from coordinator.store.rows import TableRow

COMMIT_FIELDS = {"table_id", "table_uri", "commit_info", "latest_backfilled_version", "metadata", "uniform"}
GET_FIELDS = {"table_id", "table_uri", "start_version", "end_version"}


async def _table(request: web.Request, body: dict) -> TableRow:
    """The table a commits request names, once the token's permission on its registered location was granted
    (``Locate.TABLE_ID_FIELD``): only then is ``table_uri`` checked against that location."""
    table_id = parse_uuid(str_field(body, "table_id"), "table_id")
    table_uri = body.get("table_uri")
    if not isinstance(table_uri, str):
        raise InvalidArgumentError("table_uri is required and must be a string")
    return await request.app[SERVICE].reads.table_at(table_id, table_uri)


async def commit(request: web.Request) -> web.Response:
    """Everything is checked before anything changes; then, in this order: the writer's publication report,
    its commit, the metadata it reports."""
    only_params(request, set())
    body = await json_body(request, COMMIT_FIELDS)
    refuse_uniform(body.get("uniform"))
    table = await _table(request, body)
    request[TABLE_ID] = table.table_id  # (the access log's)
    info = body.get("commit_info")
    published = int_field(body, "latest_backfilled_version", minimum=0)
    if info is None and published is None:
        raise InvalidArgumentError("send commit_info, latest_backfilled_version or both")
    if info is not None and not isinstance(info, dict):
        raise InvalidArgumentError("commit_info must be an object")
    service, catalog = request.app[SERVICE], request.app[CATALOG]
    staged, metadata = None, None
    if info is not None:
        if body.get("metadata") is None:  # (the common commit: no name row needed, only that it is MANAGED)
            await catalog.check_managed(table)
            metadata = None
        else:
            name = await catalog.managed(table)
            metadata = commit_metadata(body.get("metadata"))
            if metadata is not None and metadata["properties"] is not None:
                check_reserved(metadata["properties"],
                               held_properties(table.table_id, name.table_type, name.properties),
                               what="metadata.properties")
        version = int_field(info, "version", required=True)
        if version is not None:
            request[VERSION] = version  # (the access log's)
        size = int_field(info, "file_size", required=True, minimum=0)
        for f in ("timestamp", "file_modification_timestamp"):
            int_field(info, f, required=True)
        file_name = info.get("file_name")
        if not isinstance(file_name, str):
            raise InvalidArgumentError("commit_info.file_name is required and must be a string")
        staged = StagedCommit(version, file_name, size)  # type: ignore[arg-type]
    await service.writer_commit(table, published=published, commit=staged, metadata=metadata)
    return json_response({})


async def get_commits(request: web.Request) -> web.Response:
    # Real clients send the request as a JSON body even on GET; the same fields as query parameters work too.
    only_params(request, GET_FIELDS)
    body = await json_body(request, GET_FIELDS)
    for key, raw in request.query.items():
        if key in body:
            raise InvalidArgumentError(f"{key} is given both in the query and in the body")
        if key in ("start_version", "end_version"):
            try:
                body[key] = int(raw)
            except ValueError:
                raise InvalidArgumentError(f"query parameter {key} must be an integer") from None
        else:
            body[key] = raw
    table = await _table(request, body)
    start = int_field(body, "start_version", required=True, minimum=0)
    end = int_field(body, "end_version", minimum=0)
    # Every ratified commit in the range, published or not: Sail 0.7 looks a version the catalog does not
    # list up in _delta_log/_staged_commits/ and gives up when a lost race left a second file there.
    table, commits = await request.app[SERVICE].reads.commits_between(table.table_id, start, end)  # type: ignore[arg-type]
    return json_response({"commits": [commit_json(c.row) for c in commits], "latest_table_version": table.catalog_latest})


