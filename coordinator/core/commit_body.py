"""Validation of a commit body: the exact bytes of the future ``<v>.json``.

The one entry point, :func:`parse_commit_body`, is called by every path that ratifies a commit, before anything
is written. Rules: UTF-8 NDJSON, one JSON object per line, each with exactly one known action key; the first
line is ``commitInfo`` carrying an integer ``inCommitTimestamp`` (in-commit timestamps are required for owned
tables) no further ahead of the owner's clock than the allowed skew; every action follows the Delta protocol's
schema for it (:mod:`coordinator.core.action_checks`); at most one ``metaData`` and one ``protocol``, one ``add`` and one
``remove`` per file path, one ``domainMetadata`` per domain; in a commit with ``metaData``, the partition values
of its files fit that metaData's partition columns; a ``metaData`` action without an owner property gives
ownership up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson

from client.contract.delta_log import GENERATIONS
from client.contract.errors import InvalidCommitError
from coordinator.core.action_checks import CHECKS, Fields, TableMetadata

KNOWN_ACTIONS = frozenset(CHECKS)

# Every generation of the owner property, catalogManaged's table id included.
OWNER_PROPERTIES = tuple(k for g in GENERATIONS for k in (g.owner_key, *g.legacy_owner_keys))


@dataclass(frozen=True)
class CommitBody:
    data: bytes
    in_commit_timestamp: int
    gives_up_ownership: bool
    actions: int
    #: the commit's ``metaData`` action as written (None: the commit keeps the table's metadata)
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class ClockRule:
    """The owner's clock and how far ahead of it an ``inCommitTimestamp`` may be."""

    now_ms: int
    max_skew_ms: int


def parse_commit_body(data: bytes, *, max_line_bytes: int | None = None,
                      clock: ClockRule | None = None) -> CommitBody:
    """Check ``data`` and extract what ratification needs. Raises InvalidCommitError naming the bad line."""
    lines = _lines(data)
    once = _OncePerCommit()
    ict: int | None = None
    gives_up = False
    metadata: tuple[int, TableMetadata] | None = None
    raw_metadata: dict[str, Any] | None = None
    files: list[tuple[int, str, dict[str, Any]]] = []
    for n, line in enumerate(lines, start=1):
        key, value = _action(n, line, max_line_bytes)
        if n == 1 and key != "commitInfo":
            raise InvalidCommitError("line 1: the first action must be commitInfo with inCommitTimestamp")
        if key == "commitInfo" and n != 1:
            raise InvalidCommitError(f"line {n}: commitInfo must be the first action, and only once")
        result = CHECKS[key](Fields(n, key, value))
        once.see(n, key, value)
        if key == "commitInfo":
            ict = result
            if clock is not None:
                check_clock(ict, clock)
        elif key == "metaData":
            metadata, raw_metadata = (n, result), value
            gives_up = not any(p in result.configuration for p in OWNER_PROPERTIES)
        elif key in ("add", "cdc"):
            files.append((n, key, value["partitionValues"]))
    assert ict is not None  # line 1 is commitInfo, whose check returns it
    if metadata is not None:
        check_partition_values(files, *metadata)
    return CommitBody(data=data, in_commit_timestamp=ict, gives_up_ownership=gives_up, actions=len(lines),
                      metadata=raw_metadata)


def _lines(data: bytes) -> list[str]:
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
    return lines


def _action(n: int, line: str, max_line_bytes: int | None) -> tuple[str, dict[str, Any]]:
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
        raise InvalidCommitError(f"line {n} holds unknown action {key[:100]!r}: a commit file holds only "
                                 f"{', '.join(sorted(KNOWN_ACTIONS))}")
    if not isinstance(value, dict):
        raise InvalidCommitError(f"line {n}: action {key!r} must be a JSON object")
    return key, value


@dataclass
class _OncePerCommit:
    """What the protocol allows once per commit: one metaData, one protocol, one add and one remove per path,
    one domainMetadata per domain."""

    first: dict[tuple[str, str], int] = field(default_factory=dict)

    def see(self, n: int, key: str, value: dict[str, Any]) -> None:
        if key in ("metaData", "protocol"):
            ident, what = "", f"a second {key} action: a commit holds at most one"
        elif key in ("add", "remove"):
            ident, what = value["path"], f"a second {key} of path {value['path'][:200]!r}"
        elif key == "domainMetadata":
            ident, what = value["domain"], f"a second domainMetadata for domain {value['domain'][:200]!r}"
        else:
            return
        earlier = self.first.setdefault((key, ident), n)
        if earlier != n:
            raise InvalidCommitError(f"line {n}: {what} (line {earlier} has the first)")


def check_partition_values(files: list[tuple[int, str, dict[str, Any]]], line: int, md: TableMetadata) -> None:
    """In a commit that sets the table's metadata, every ``add`` and ``cdc`` names exactly its partition columns,
    and a column that is not nullable has a value (an empty string reads as null)."""
    for n, key, values in files:
        if set(values) != set(md.partition_columns):
            raise InvalidCommitError(
                f"line {n}: {key}.partitionValues must name exactly the partition columns of the metaData on "
                f"line {line} ({sorted(md.partition_columns)[:20]}), got {sorted(values)[:20]}")
        for column, nullable in md.partition_columns.items():
            if values[column] in (None, "") and not nullable:  # readers take an empty value for null
                raise InvalidCommitError(f"line {n}: {key}.partitionValues holds null for {column[:60]!r}, which "
                                         f"the metaData on line {line} declares not nullable")


def check_clock(ict: int, clock: ClockRule) -> None:
    """Refuse an ``inCommitTimestamp`` further ahead of the owner's clock than allowed: once ratified, every
    later commit of the table would have to be stamped after it."""
    ahead = ict - clock.now_ms
    if ahead <= clock.max_skew_ms:
        return
    raise InvalidCommitError(
        f"line 1: commitInfo.inCommitTimestamp {ict} ({_utc(ict)}) is {_duration(ahead)} ahead of the owner's "
        f"clock ({_utc(clock.now_ms)}); at most {_duration(clock.max_skew_ms)} is allowed (max_clock_skew_seconds). "
        "The writer's clock is off: fix it (NTP) and stamp the commit with the current time"
    )


def _utc(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, ValueError, OSError):
        return "beyond year 9999"


def _duration(ms: int) -> str:
    s = ms / 1000
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if s >= size:
            return f"{s / size:.1f} {unit}"
    return f"{s:.3f} s"
