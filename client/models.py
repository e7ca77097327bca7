"""Plain value types returned by the client (no server dependencies)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from client.contract.errors import CommitVersionConflictError
from client.contract.layout import COMMITS_DIR


@dataclass(frozen=True)
class Commit:
    """One ratified commit: Delta's ``Commit(version, fileStatus, commitTimestamp)``."""

    version: int
    file_name: str
    path: str
    file_size: int
    file_modification_time: int
    commit_timestamp: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Commit:
        return cls(
            version=int(d["version"]),
            file_name=str(d["fileName"]),
            path=str(d["path"]),
            file_size=int(d["fileSize"]),
            file_modification_time=int(d["fileModificationTime"]),
            commit_timestamp=int(d["commitTimestamp"]),
        )


@dataclass(frozen=True)
class CommitsPage:
    """Delta's ``GetCommitsResponse``: unbackfilled commits in range, ascending, and the latest ratified version."""

    commits: list[Commit]
    latest_table_version: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CommitsPage:
        return cls(
            commits=[Commit.from_json(c) for c in d.get("commits", [])],
            latest_table_version=int(d["latestTableVersion"]),
        )


@dataclass(frozen=True)
class TransactionResult:
    """What a multi-table transaction ratified: its id (its idempotency key), when, and each table's commit."""

    transaction_id: str
    committed_at: int
    commits: dict[str, Commit]  # table id -> its ratified commit, in the order they were sent

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TransactionResult:
        return cls(transaction_id=str(d["transactionId"]), committed_at=int(d["committedAt"]),
                   commits={str(c["tableId"]): Commit.from_json(c) for c in d["commits"]})


def carried_commits(err: CommitVersionConflictError, version: int) -> list[Commit] | None:
    """The commits a refusal of ``version`` carried, when they run contiguously from ``version`` on; None when
    the answer carried none or they do not start there.

    A list that stops short of the latest version (``unseen_commits_complete`` false: the bound, or commits
    ratified after the owner read them) is still a true prefix of the table's history: a writer moves
    forward through it and proposes the version after its last, which the owner refuses again, carrying the
    rest, if the table moved on meanwhile. Only the owner's conditional ratification decides, never this list.
    """
    if not err.unseen_commits:
        return None
    try:
        commits = [Commit.from_json(c) for c in err.unseen_commits]
    except (KeyError, TypeError, ValueError):
        return None
    if [c.version for c in commits] != list(range(version, version + len(commits))):
        return None
    return commits


@dataclass(frozen=True)
class TableInfo:
    """What the owner knows about one table."""

    table_id: str
    location: str
    commit_dir: str
    latest_table_version: int
    latest_backfilled_version: int
    accepting_commits: bool
    unbackfilled_commits: int
    table_conf: dict[str, str] = field(default_factory=dict)
    status: str = "ACTIVE"
    name: str | None = None  # catalog.schema.table, when the table has a name
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableInfo:
        return cls(
            table_id=str(d["tableId"]),
            location=str(d["location"]),
            commit_dir=str(d.get("commitDir", COMMITS_DIR)),
            latest_table_version=int(d.get("latestTableVersion", -1)),
            latest_backfilled_version=int(d.get("latestBackfilledVersion", -1)),
            accepting_commits=bool(d.get("acceptingCommits", True)),
            unbackfilled_commits=int(d.get("unbackfilledCommits", 0)),
            table_conf=dict(d.get("tableConf") or {"tableId": str(d["tableId"])}),
            status=str(d.get("status", "ACTIVE")),
            name=d.get("name"),
            raw=d,
        )
