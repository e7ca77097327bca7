"""The wire shape of one owned table, as ``/api/v1`` spells it: registration's answer, getTable, listTables,
and the operator's ``tables list|show`` (``client/models.TableInfo`` reads it back).

The server's core answers rows; the ``/api/v1`` adapter and the ops commands shape them here, once.
"""

from __future__ import annotations

from typing import Any, Protocol


class TableFields(Protocol):
    """What of a table row its wire shape reads (``coordinator.store.TableRow`` has them)."""

    @property
    def table_id(self) -> str: ...
    @property
    def location(self) -> str: ...
    @property
    def commit_dir(self) -> str: ...
    @property
    def reported_latest(self) -> int: ...
    @property
    def latest_backfilled_version(self) -> int: ...
    @property
    def accepting(self) -> bool: ...
    @property
    def unbackfilled(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def status_reason(self) -> str | None: ...
    @property
    def last_commit_at(self) -> int | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def dropped_at(self) -> int | None: ...
    @property
    def dropped_name(self) -> str | None: ...


def table_json(row: TableFields) -> dict[str, Any]:
    """``row`` as ``/api/v1`` answers it (its latest version as Delta's commit-coordinator client wants it)."""
    return {
        "tableId": row.table_id,
        "location": row.location,
        "commitDir": row.commit_dir,
        "latestTableVersion": row.reported_latest,
        "latestBackfilledVersion": row.latest_backfilled_version,
        "acceptingCommits": row.accepting,
        "unbackfilledCommits": row.unbackfilled,
        "status": row.status,
        "statusReason": row.status_reason,
        "lastCommitAt": row.last_commit_at,
        "tableConf": {"tableId": row.table_id},
        "name": row.name,
        "droppedAt": row.dropped_at,
        "droppedName": row.dropped_name,
    }


__all__ = ["TableFields", "table_json"]
