"""Rows of the ownership store as plain values; their times are milliseconds since the epoch (``now_ms``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def now_ms() -> int:
    return int(time.time() * 1000)


def values_of(row: Any) -> dict[str, Any]:
    """A row's fields by name: the values of its INSERT."""
    return {f: getattr(row, f) for f in type(row).__dataclass_fields__}


def full_name(catalog: str, schema: str, name: str) -> str:
    """A table's three-part name, ``catalog.schema.table``."""
    return f"{catalog}.{schema}.{name}"


def shown_name(name: str | None, dropped_name: str | None) -> str | None:
    """A table's name as the ops views show it: ``catalog.schema.table``, or the name it had marked
    ``(dropped)``; None for a table that never had one."""
    return name if dropped_name is None else f"{dropped_name} (dropped)"


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
    name: str | None = None  # ``catalog.schema.table`` when the table has a name (table_names)
    dropped_at: int | None = None  # DROP TABLE: when (status DROPPED); None while the table is live
    dropped_name: str | None = None  # the name the table had when it was dropped

    @property
    def label(self) -> str | None:
        return shown_name(self.name, self.dropped_name)

    def with_versions(self, latest_version: int, latest_backfilled_version: int) -> TableRow:
        """This row with these two versions: ``dataclasses.replace`` for a sixth of its cost (the backfiller
        copies a row this way once or twice per commit)."""
        row = object.__new__(TableRow)
        row.__dict__.update(self.__dict__, latest_version=latest_version,
                            latest_backfilled_version=latest_backfilled_version)
        return row

    @property
    def owner_ratified(self) -> bool:
        """Whether the owner ratified a commit of this table (its latest version is past the one it was
        registered at)."""
        return self.latest_version > self.base_version

    # A table's latest version is answered two ways, by the contract of the client asking (PROTOCOL.md 3, 9):

    @property
    def reported_latest(self) -> int:
        """latestTableVersion as Delta's commit-coordinator client expects it (``/api/v1``, its transactions and
        snapshots): -1 until the owner ratified a commit (the client then reads the log alone)."""
        return self.latest_version if self.owner_ratified else -1

    @property
    def catalog_latest(self) -> int:
        """latest_table_version as a catalog-managed reader expects it (Unity Catalog's getCommits, the Delta REST
        Catalog API's loadTable): the newest version, the one the table was registered at (0 for a new table)
        until the owner ratifies one; never -1, since the reader reads the log up to it."""
        return self.latest_version

    @property
    def unbackfilled(self) -> int:
        return max(0, self.latest_version - self.latest_backfilled_version)


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
    # The commit's bytes while unpublished, when the owner writes the staged file (None: writer-staged, or
    # published). Never part of an answer: the staged file is rewritten from it (``coordinator/storage/staged.py``).
    body: bytes | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, m: Mapping[Any, Any], prefix: str = "") -> CommitRow:
        """The commit row held in ``m``'s columns named ``<prefix><field>`` (a row of ``commits``, or one joined
        under a prefix)."""
        return cls(**{f: m[prefix + f] for f in cls.__dataclass_fields__})


@dataclass(frozen=True)
class CatalogRow:
    name: str
    id: str
    comment: str | None
    properties: dict[str, str]
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class SchemaRow:
    catalog_name: str
    name: str
    id: str
    comment: str | None
    properties: dict[str, str]
    created_at: int
    updated_at: int


MANAGED, EXTERNAL = "MANAGED", "EXTERNAL"  # a named table's type (Unity Catalog's TableType)


@dataclass(frozen=True)
class NameRow:
    """A table's name and the attributes the Unity Catalog facade keeps for it."""

    table_id: str
    catalog_name: str
    schema_name: str
    name: str
    table_type: str  # MANAGED | EXTERNAL
    data_source_format: str
    comment: str | None
    columns: list[dict[str, Any]]
    properties: dict[str, str]
    created_at: int
    updated_at: int

    @property
    def full_name(self) -> str:
        return full_name(self.catalog_name, self.schema_name, self.name)


@dataclass(frozen=True)
class StagingRow:
    id: str
    catalog_name: str
    schema_name: str
    name: str
    location: str
    created_at: int


@dataclass(frozen=True)
class MaintenanceRun:
    table_id: str
    kind: str  # one of KINDS
    outcome: str  # done | failed
    trigger: str  # policy (the maintain worker) | command (optimize, vacuum, maintain TABLE)
    started_at: int
    finished_at: int
    figures: dict[str, Any] = field(default_factory=dict)
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"tableId": self.table_id, "kind": self.kind, "outcome": self.outcome, "trigger": self.trigger,
                "startedAt": self.started_at, "finishedAt": self.finished_at, "figures": self.figures,
                "message": self.message}
