"""What one commit did, read from its actions: the figures a commit history shows.

``commitInfo`` gives the operation, the engine (``engineInfo``) and the in-commit timestamp; ``add`` and
``remove`` give the files and bytes; their ``stats`` (a JSON string, ``numRecords``) the rows, when the writer
wrote stats for every one of those files: else the rows are None ("not known"), never a partial sum.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True)
class CommitSummary:
    operation: str | None = None
    engine: str | None = None
    in_commit_timestamp: int | None = None
    files_added: int = 0
    files_removed: int = 0
    bytes_added: int = 0
    bytes_removed: int = 0
    rows_added: int | None = None
    rows_removed: int | None = None
    metadata_changed: bool = False
    protocol_changed: bool = False


def _records(body: Mapping[str, Any]) -> int | None:
    stats = body.get("stats")
    if not isinstance(stats, str):
        return None
    try:
        n = orjson.loads(stats).get("numRecords")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def _size(body: Mapping[str, Any]) -> int:
    size = body.get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) else 0


def summarize(actions: Iterable[Mapping[str, Any]]) -> CommitSummary:
    """The summary of a commit's actions (as ``delta_log.parse_actions`` returns them)."""
    info: Mapping[str, Any] = {}
    files = {"add": 0, "remove": 0}
    size = {"add": 0, "remove": 0}
    rows: dict[str, int | None] = {"add": 0, "remove": 0}  # None once a file of that kind has no numRecords
    metadata = protocol = False
    for action in actions:
        for kind, body in action.items():
            if not isinstance(body, Mapping):
                continue
            if kind == "commitInfo":
                info = body
            elif kind in files:
                files[kind] += 1
                size[kind] += _size(body)
                n, total = _records(body), rows[kind]
                rows[kind] = None if n is None or total is None else total + n
            metadata = metadata or kind == "metaData"
            protocol = protocol or kind == "protocol"
    ict = info.get("inCommitTimestamp")
    return CommitSummary(
        operation=info.get("operation") if isinstance(info.get("operation"), str) else None,
        engine=info.get("engineInfo") if isinstance(info.get("engineInfo"), str) else None,
        in_commit_timestamp=ict if isinstance(ict, int) and not isinstance(ict, bool) else None,
        files_added=files["add"], files_removed=files["remove"], bytes_added=size["add"], bytes_removed=size["remove"],
        rows_added=rows["add"], rows_removed=rows["remove"], metadata_changed=metadata, protocol_changed=protocol)
