"""Handlers of ``/api/v1/tables/{id}/commits``: commit and getCommits."""

from __future__ import annotations

from aiohttp import web

from client.contract.commits import commit_json
from client.contract.errors import CommitVersionConflictError, InvalidArgumentError
from coordinator.api.errors import json_response, only_params, query_int
from coordinator.api.keys import SERVICE, TABLE_ID, VERSION
from coordinator.api.parse import parse_uuid
from coordinator.core.order.line import parse_ticket

# The Content-Types a commit body may carry: NDJSON's own, and the generic ones HTTP clients send for raw bytes
# (no Content-Type at all reads as application/octet-stream). Anything else, e.g. curl -d's form encoding, is
# refused. docs/api.md and the OpenAPI document list the same (a test keeps them in step).
NDJSON = ("application/x-ndjson", "application/json", "text/plain", "application/octet-stream")


async def commit(request: web.Request) -> web.Response:
    only_params(request, {"version"})
    table_id = parse_uuid(request.match_info["table_id"], "table id")
    version = query_int(request, "version", required=True)
    if request.content_type not in NDJSON:
        raise InvalidArgumentError(f"Content-Type {request.content_type} is not accepted for a commit body: send "
                                   f"{NDJSON[0]} (also accepted: {', '.join(NDJSON[1:])})")
    ticket = parse_ticket(request.headers.get("Commit-Slot"))  # the writer's place in the table's line
    data = await request.read()
    key = request.headers.get("Idempotency-Key")
    request[TABLE_ID] = table_id
    request[VERSION] = version
    service = request.app[SERVICE]
    try:
        handed = await service.commit(table_id, version, data, key, ticket=ticket)
    except CommitVersionConflictError as e:
        # The loser gets what it has not seen (this API's envelope; the Unity Catalog facade answers UC's own).
        await service.add_unseen_commits(e, table_id, version)
        raise
    return json_response(commit_json(handed.row, handed.path))


async def get_commits(request: web.Request) -> web.Response:
    only_params(request, {"startVersion", "endVersion"})
    table_id = parse_uuid(request.match_info["table_id"], "table id")
    start = query_int(request, "startVersion")
    end = query_int(request, "endVersion")
    table, commits = await request.app[SERVICE].reads.get_commits(table_id, start, end)
    return json_response({"commits": [commit_json(c.row, c.path) for c in commits],
                          "latestTableVersion": table.reported_latest})
