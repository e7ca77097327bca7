"""A small, lifelike owner for the UI tests and screenshots: named tables in two catalogs, tables without a
name, commits as engines write them (commitInfo with engineInfo, adds and removes with stats), a backlog, a
table fenced by a foreign commit file, a lost race and a table named ``<script>``. Everything goes through the owner's own APIs
(Unity Catalog for catalogs and schemas, /api/v1 for registration and commits) and the table's storage.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

from client.contract.layout import delta_file
from harness.world import Service, ndjson, next_ict, version0

UC = "/api/2.1/unity-catalog"
ENGINES = ("Apache-Spark/3.5.3 Delta-Lake/3.3.0", "delta-rs:py-1.1.0", "Apache-Spark/4.0.0 Delta-Lake/4.0.0")


@dataclass
class Seeded:
    """The ids and locations of what ``seed`` made."""

    tables: dict[str, str] = field(default_factory=dict)  # label -> table id
    locations: dict[str, str] = field(default_factory=dict)  # label -> location
    catalogs: list[str] = field(default_factory=list)


def request(svc: Service, method: str, path: str, body: bytes | None = None, *, token: str | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, Any]:
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(svc.endpoint + path, data=body, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw, status = r.read(), r.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def write_actions(n_add: int, n_remove: int, *, operation: str, engine: str, rows: int = 1000) -> list[dict[str, Any]]:
    ict = next_ict()
    out: list[dict[str, Any]] = [{"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": operation,
                                                 "engineInfo": engine, "isBlindAppend": n_remove == 0}}]
    for i in range(n_add):
        out.append({"add": {"path": f"part-{i:05d}-{uuid.uuid4()}.snappy.parquet", "partitionValues": {},
                            "size": 40_000 + 1_000 * i, "modificationTime": ict, "dataChange": True,
                            "stats": json.dumps({"numRecords": rows + i})}})
    for i in range(n_remove):
        out.append({"remove": {"path": f"part-{i:05d}-old.snappy.parquet", "deletionTimestamp": ict,
                               "dataChange": True, "size": 38_000, "stats": json.dumps({"numRecords": rows})}})
    return out


def commit(svc: Service, table_id: str, version: int, actions: list[dict[str, Any]], token: str | None = None) -> int:
    status, _ = request(svc, "POST", f"/api/v1/tables/{table_id}/commits?version={version}", ndjson(actions),
                        token=token, headers={"Content-Type": "application/x-ndjson",
                                              "Idempotency-Key": str(uuid.uuid4())})
    return status


def _uc(svc: Service, path: str, body: dict[str, Any], token: str | None) -> None:
    status, reply = request(svc, "POST", UC + path, json.dumps(body).encode(), token=token,
                            headers={"Content-Type": "application/json"})
    assert status == 200, reply


def _table(svc: Service, location: str, name: str | None, token: str | None) -> str:
    body: dict[str, Any] = {"location": location, "currentVersion": -1}
    if name:
        body["name"] = name
    status, reply = request(svc, "POST", "/api/v1/tables", json.dumps(body).encode(), token=token,
                            headers={"Content-Type": "application/json"})
    assert status in (200, 201), reply
    svc.backend.write(delta_file(location, 0), ndjson(version0()))
    return str(reply["tableId"])


def seed(svc: Service, *, token: str | None = None, tag: str | None = None, backlog: tuple[str, ...] = ()) -> Seeded:
    """Make the owner's tables and commits (``token``: an admin token when tokens are on). Catalog names carry
    ``tag`` (default: a fresh one), so several seeds share a database. On a service that publishes only when
    asked, every table but those labelled in ``backlog`` is published at the end."""
    tag = tag or uuid.uuid4().hex[:6]
    out = Seeded()
    sales, ops = f"sales_{tag}", f"ops_{tag}"
    out.catalogs = [sales, ops]
    for cat, schemas in ((sales, ("raw", "gold")), (ops, ("audit",))):
        _uc(svc, "/catalogs", {"name": cat, "comment": f"{cat.split('_')[0]} data"}, token)
        for s in schemas:
            _uc(svc, "/schemas", {"name": s, "catalog_name": cat}, token)
    b = svc.backend
    names = {"orders": f"{sales}.raw.orders", "customers": f"{sales}.raw.customers",
             "revenue": f"{sales}.gold.revenue", "script": f"{ops}.audit.<script>", "events": None, "clicks": None}
    for label, name in names.items():
        loc = b.new_location(f"{tag}-{label}" if label != "script" else f"{tag}-escaping")
        out.locations[label] = loc
        out.tables[label] = _table(svc, loc, name, token)
    plan = {"orders": 12, "customers": 4, "revenue": 6, "script": 2, "events": 9, "clicks": 3}
    for label, n in plan.items():
        for v in range(1, n + 1):
            engine = ENGINES[v % len(ENGINES)]
            if v % 5 == 0:
                acts = write_actions(2, 3, operation="OPTIMIZE", engine=engine)
            elif v % 4 == 0:
                acts = write_actions(1, 1, operation="MERGE", engine=engine)
            else:
                acts = write_actions(1 + v % 3, 0, operation="WRITE", engine=engine)
            assert commit(svc, out.tables[label], v, acts, token) == 200
    # a lost race: version 3 of orders again
    assert commit(svc, out.tables["orders"], 3, write_actions(1, 0, operation="WRITE", engine=ENGINES[0]), token) == 409
    # clicks is fenced: a foreign _delta_log/1.json (written around the owner) stops its publication and commits
    svc.backend.write(delta_file(out.locations["clicks"], 1), b'{"commitInfo":{"written":"around the owner"}}\n')
    for label, table_id in out.tables.items():
        if label not in backlog:
            status, reply = request(svc, "POST", f"/api/v1/tables/{table_id}/backfill", b"{}", token=token,
                                    headers={"Content-Type": "application/json"})
            assert status == (409 if label == "clicks" else 200), reply
    return out
