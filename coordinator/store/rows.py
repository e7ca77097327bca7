"""Rows of the ownership store as plain values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TableRow:
    table_id: str
    location: str
    commit_dir: str
    base_version: int
    latest_version: int
    latest_backfilled_version: int
    last_commit_timestamp: int | None
    accepting: bool
    status: str
    status_reason: str | None
    created_at: int
    updated_at: int
    last_commit_at: int | None
    backfill_error: str | None = None
    backfill_error_at: int | None = None

    @property
    def reported_latest(self) -> int:
        """latestTableVersion as Delta expects it: -1 until the owner ratified a commit."""
        return self.latest_version if self.latest_version > self.base_version else -1

    @property
    def unbackfilled(self) -> int:
        return max(0, self.latest_version - self.latest_backfilled_version)

    def to_json(self) -> dict[str, Any]:
        return {
            "tableId": self.table_id,
            "location": self.location,
            "commitDir": self.commit_dir,
            "latestTableVersion": self.reported_latest,
            "latestBackfilledVersion": self.latest_backfilled_version,
            "acceptingCommits": self.accepting,
            "unbackfilledCommits": self.unbackfilled,
            "status": self.status,
            "statusReason": self.status_reason,
            "lastCommitAt": self.last_commit_at,
            "tableConf": {"tableId": self.table_id},
        }


@dataclass(frozen=True)
class CommitRow:
    table_id: str
    version: int
    file_name: str
    idempotency_key: str
    file_size: int
    file_modification_time: int
    commit_timestamp: int
    content_sha256: str
    ratified_at: int
    backfilled_at: int | None = None

    def to_json(self, location: str, commit_dir: str) -> dict[str, Any]:
        return {
            "version": self.version,
            "fileName": self.file_name,
            "path": f"{location}/_delta_log/{commit_dir}/{self.file_name}",
            "fileSize": self.file_size,
            "fileModificationTime": self.file_modification_time,
            "commitTimestamp": self.commit_timestamp,
        }
