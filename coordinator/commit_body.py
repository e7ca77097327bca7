"""Validation of a commit body: the exact bytes of the future ``<v>.json``.

Rules: UTF-8 NDJSON, one JSON object per line, each with exactly one known action key; the first line
is ``commitInfo`` carrying an integer ``inCommitTimestamp`` (in-commit timestamps are required for
owned tables); a ``metaData`` action without an owner property gives ownership up.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from client.errors import InvalidCommitError

KNOWN_ACTIONS = frozenset({"commitInfo", "add", "remove", "metaData", "protocol", "txn", "domainMetadata", "cdc"})

# Every generation of the owner property (PROTOCOL.md section 1).
OWNER_PROPERTIES = (
    "delta.managedCommit.commitOwner",
    "delta.coordinatedCommits.commitCoordinator-preview",
    "delta.managedCommits.commitOwner-dev",
)


@dataclass(frozen=True)
class CommitBody:
    data: bytes
    in_commit_timestamp: int
    gives_up_ownership: bool
    actions: int


def parse_commit_body(data: bytes, *, max_line_bytes: int | None = None) -> CommitBody:
    """Check ``data`` and extract what ratification needs. Raises InvalidCommitError naming the bad line."""
    if not data:
        raise InvalidCommitError("commit body is empty: send the NDJSON actions of the commit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidCommitError(f"commit body is not UTF-8 (byte {e.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise InvalidCommitError("commit body has no actions")
    ict: int | None = None
    gives_up = False
    for n, line in enumerate(lines, start=1):
        if max_line_bytes is not None and len(line.encode("utf-8")) > max_line_bytes:
            raise InvalidCommitError(f"line {n} is longer than {max_line_bytes} bytes")
        if not line.strip():
            raise InvalidCommitError(f"line {n} is empty: one action per line, no blank lines")
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise InvalidCommitError(f"line {n} is not valid JSON: {e.msg}") from None
        if not isinstance(obj, dict) or len(obj) != 1:
            raise InvalidCommitError(f"line {n} must be a JSON object with exactly one action key")
        (key, value), = obj.items()
        if key not in KNOWN_ACTIONS:
            raise InvalidCommitError(f"line {n} holds unknown action {key!r}")
        if not isinstance(value, dict):
            raise InvalidCommitError(f"line {n}: action {key!r} must be a JSON object")
        if key == "commitInfo":
            if n != 1:
                raise InvalidCommitError(f"line {n}: commitInfo must be the first action, and only once")
            ts = value.get("inCommitTimestamp")
            if isinstance(ts, bool) or not isinstance(ts, int) or ts <= 0:
                raise InvalidCommitError("line 1: commitInfo must carry inCommitTimestamp, a positive integer (ms)")
            ict = ts
        elif key == "metaData":
            conf = value.get("configuration") or {}
            if not isinstance(conf, dict):
                raise InvalidCommitError(f"line {n}: metaData.configuration must be an object")
            if not any(p in conf for p in OWNER_PROPERTIES):
                gives_up = True
    if ict is None:
        raise InvalidCommitError("the first action must be commitInfo with inCommitTimestamp")
    return CommitBody(data=data, in_commit_timestamp=ict, gives_up_ownership=gives_up, actions=len(lines))
