"""Helpers of the commit-validation tests: commit raw bytes, picture the database and storage, read with delta-rs."""

from __future__ import annotations

import json
from typing import Any

from coordinator.store.schema import owned_tables
from tests.security.conftest import State, call
from tests.support import Service, create_owned_table, data_commit, delta_rs_table, ndjson, wait_until

NDJSON = {"Content-Type": "application/x-ndjson"}


def line(action: str, fields: dict[str, Any]) -> bytes:
    return json.dumps({action: fields}, separators=(",", ":")).encode()


def post_commit(svc: Service, table_id: str, version: int, body: bytes) -> tuple[int, Any]:
    status, payload, _ = call(svc.endpoint, "POST", f"/api/v1/tables/{table_id}/commits?version={version}",
                              body, headers=NDJSON)
    return status, payload


class Picture(State):
    """Every database row and every file of the service's backend, but for the backfill lease columns: the
    backfiller takes and hands back a table's lease on its own schedule (an idle lease is released a second or
    two after the last backfill), which is no change made by the request under test."""

    LEASE = [i for i, c in enumerate(owned_tables.columns) if c.name in ("lease_owner", "lease_expires_at")]

    def take(self) -> tuple[Any, ...]:
        db, *files = super().take()
        db = {**db, "owned_tables": [tuple(None if i in self.LEASE else v for i, v in enumerate(row))
                                     for row in db["owned_tables"]]}
        return (db, *files)


def state(svc: Service) -> State:
    return Picture(svc.backend, "file://" + str(svc.backend.tmp))


def ready_table(svc: Service) -> tuple[str, str]:
    """An owned table with version 0 and one data commit (version 1) published: (table_id, location)."""
    table_id, loc = create_owned_table(svc)
    svc.client().commit(table_id, 1, data_commit(svc.backend, loc, [1, 2, 3]))
    published(svc, table_id, 1)
    return table_id, loc


def published(svc: Service, table_id: str, version: int) -> None:
    wait_until(lambda: svc.client().get_table(table_id).latest_backfilled_version >= version,
               what=f"backfill of version {version}")


def delta_rs_reads(svc: Service, location: str, version: int) -> Any:
    """The table as delta-rs sees it at its latest version (which must be ``version``), with its file list."""
    dt = delta_rs_table(svc.backend, location)
    assert dt.version() == version
    dt.schema()
    dt.get_add_actions(flatten=True)
    return dt


__all__ = ["NDJSON", "call", "delta_rs_reads", "line", "ndjson", "post_commit", "published", "ready_table",
           "state"]
