"""Fixtures of the Delta REST Catalog API's suite: the Unity Catalog suite's services (every backend) and a
writer that speaks ``/delta/v1`` the way delta-spark 4.4 does (stage, then ``updateTable`` with ``add-commit``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.security.conftest import call
from tests.support import Service, delta_file, ndjson, next_ict
from tests.unity.conftest import (  # noqa: F401  (fixtures)
    Writer,
    _dispose_uc_engines,
    catalog_managed_version0,
    ok,
    picture,
    uc_service,
    uc_service_backfilling,
)

V1 = "/api/2.1/unity-catalog/delta/v1"
SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                       {"name": "part", "type": "string", "nullable": True, "metadata": {}}]}
PROTOCOL = {"min-reader-version": 3, "min-writer-version": 7, "reader-features": ["catalogManaged"],
            "writer-features": ["catalogManaged", "inCommitTimestamp"]}


def v1(svc: Service, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    raw = None if body is None else json.dumps(body).encode()
    status, payload, _ = call(svc.endpoint, method, V1 + path, raw, token=token)
    return status, payload


def assert_delta_error(status: int, payload: Any, want_status: int, want_type: str) -> None:
    assert status == want_status, payload
    assert set(payload) == {"error"} and set(payload["error"]) == {"message", "type", "code"}, payload
    assert payload["error"]["type"] == want_type, payload
    assert payload["error"]["code"] == want_status and payload["error"]["message"], payload


@dataclass
class V1Writer(Writer):
    """Names through the 2.1 API (as delta-spark's connector makes them), then staging, version 0, createTable
    and commits through /delta/v1. Staging a file and publishing it are the 2.1 writer's."""

    @property
    def path(self) -> str:
        return f"/catalogs/{self.catalog}/schemas/{self.schema}/tables/{self.table}"

    def create(self) -> dict[str, Any]:
        status, staging = v1(self.svc, "POST", f"/catalogs/{self.catalog}/schemas/{self.schema}/staging-tables",
                             {"name": self.table}, self.token)
        assert status == 200, staging
        self.table_id, self.location = staging["table-id"], staging["location"]
        ict = next_ict()
        self.svc.backend.write(delta_file(self.location, 0), ndjson(catalog_managed_version0(self.table_id, ict)))
        status, reply = v1(self.svc, "POST", f"/catalogs/{self.catalog}/schemas/{self.schema}/tables", {
            "name": self.table, "location": self.location, "table-type": "MANAGED", "columns": SCHEMA,
            "partition-columns": ["part"], "protocol": PROTOCOL, "last-commit-timestamp-ms": ict,
            "properties": {"io.unitycatalog.tableId": self.table_id, "delta.enableInCommitTimestamps": "true"},
        }, self.token)
        assert status == 200, reply
        return reply  # type: ignore[no-any-return]

    def update_body(self, version: int, file_name: str, *, published: int | None = None, size: int | None = None,
                    table_uuid: str | None = None, extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        data = self.staged.get(version, b"")
        updates: list[dict[str, Any]] = [{"action": "add-commit", "commit": {
            "version": version, "timestamp": next_ict(), "file-name": file_name,
            "file-size": len(data) if size is None else size, "file-modification-timestamp": next_ict()}}]
        if published is not None:
            updates.append({"action": "set-latest-backfilled-version", "latest-published-version": published})
        return {"requirements": [{"type": "assert-table-uuid", "uuid": table_uuid or self.table_id}],
                "updates": updates + (extra or [])}

    def update(self, body: dict[str, Any]) -> tuple[int, Any]:
        return v1(self.svc, "POST", self.path, body, self.token)

    def commit(self, version: int, **kw: Any) -> tuple[int, Any, str]:
        name = self.stage(version)
        status, payload = self.update(self.update_body(version, name, **kw))
        return status, payload, name

    def load(self) -> dict[str, Any]:
        status, payload = v1(self.svc, "GET", self.path, token=self.token)
        assert status == 200, payload
        return payload  # type: ignore[no-any-return]
