"""The wire shape of one ratified commit, as ``/api/v1`` spells it: getCommits, a commit's answer, a
transaction's, a snapshot's, and a version conflict's ``unseenCommits`` (``client/models.Commit`` reads it back).

The server's core answers rows; the ``/api/v1`` adapter, the ops commands and the conflict errors of this
contract shape them here, once.
"""

from __future__ import annotations

from typing import Any, Protocol


class CommitFields(Protocol):
    """What of a commit row its wire shape reads (``coordinator.store.CommitRow`` has them)."""

    @property
    def version(self) -> int: ...
    @property
    def file_name(self) -> str: ...
    @property
    def file_size(self) -> int: ...
    @property
    def file_modification_time(self) -> int: ...
    @property
    def commit_timestamp(self) -> int: ...


def commit_json(row: CommitFields, path: str) -> dict[str, Any]:
    """``row`` as a reader is handed it; ``path``: its commit file (``layout.staged_file``)."""
    return {
        "version": row.version,
        "fileName": row.file_name,
        "path": path,
        "fileSize": row.file_size,
        "fileModificationTime": row.file_modification_time,
        "commitTimestamp": row.commit_timestamp,
    }


__all__ = ["CommitFields", "commit_json"]
