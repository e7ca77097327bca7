"""Handlers of ``/api/v1/transactions`` (a multi-table atomic commit) and ``/api/v1/snapshots`` (a consistent
multi-table read). They parse and shape; the service's TransactionService decides, and calls back here only to
check the caller's permission on every table before anything is written or answered."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from client.contract.commits import commit_json
from client.contract.errors import InvalidArgumentError
from client.http import encode_actions
from coordinator.api.auth import require
from coordinator.api.errors import json_body, json_response, only_params
from coordinator.api.keys import SERVICE
from coordinator.api.parse import int_field, parse_uuid
from coordinator.core.transactions import Proposal
from coordinator.store.rows import TableRow

COMMIT_FIELDS = {"tableId", "version", "actions"}


def _proposal(i: int, item: Any) -> Proposal:
    where = f"commits[{i}]"
    if not isinstance(item, dict):
        raise InvalidArgumentError(f"{where} must be an object {{tableId, version, actions}}")
    unknown = sorted(set(item) - COMMIT_FIELDS)
    if unknown:
        raise InvalidArgumentError(f"{where}: unknown field(s): {', '.join(repr(k[:40]) for k in unknown[:5])}")
    table_id = parse_uuid(item.get("tableId"), f"{where}.tableId")
    try:
        version = int_field(item, "version", required=True)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{where} (table {table_id}): {e.message}") from None
    actions = item.get("actions")
    if not isinstance(actions, list) or not actions or not all(isinstance(a, dict) for a in actions):
        raise InvalidArgumentError(f"{where} (table {table_id}): actions must be a non-empty list of Delta action "
                                   "objects (the lines of an /api/v1 commit body)")
    assert version is not None
    return Proposal(table_id, version, encode_actions(actions))


async def commit_transaction(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, {"commits"})
    commits = body.get("commits")
    if not isinstance(commits, list):
        raise InvalidArgumentError("commits is required: a list of {tableId, version, actions}")
    proposals = [_proposal(i, c) for i, c in enumerate(commits)]

    def authorize(table: TableRow) -> None:
        require(request, "commit", table.location)

    done = await request.app[SERVICE].transactions.commit(
        proposals, request.headers.get("Idempotency-Key"), authorize=authorize)
    return json_response({"transactionId": done.tx.id, "committedAt": done.tx.committed_at,
                          "commits": [{"tableId": t, **commit_json(c.row, c.path)} for t, c in done.commits]})


async def snapshots(request: web.Request) -> web.Response:
    only_params(request, set())
    body = await json_body(request, {"tableIds"})
    ids = body.get("tableIds")
    if not isinstance(ids, list):
        raise InvalidArgumentError("tableIds is required: a list of table ids")
    table_ids = [parse_uuid(t, f"tableIds[{i}]") for i, t in enumerate(ids)]

    def authorize(table: TableRow) -> None:
        require(request, "read", table.location)

    read = await request.app[SERVICE].transactions.snapshot(table_ids, authorize=authorize)
    return json_response({"tables": [{"tableId": table.table_id, "latestTableVersion": table.reported_latest,
                                      "commits": [commit_json(c.row, c.path) for c in commits]}
                                     for table, commits in read]})
