"""The small values the core answers beside the store's rows (the adapters shape them into their wire formats)."""

from __future__ import annotations

from dataclasses import dataclass

from client.contract.layout import staged_file
from coordinator.store import CommitRow


@dataclass(frozen=True)
class TablePlace:
    location: str
    commit_dir: str


@dataclass(frozen=True)
class Handed:
    """A ratified commit as a reader (or its writer) is handed it: its row and its commit file's path."""

    row: CommitRow
    path: str

    @classmethod
    def of(cls, location: str, commit_dir: str, row: CommitRow) -> Handed:
        return cls(row, staged_file(location, commit_dir, row.file_name))


__all__ = ["Handed", "TablePlace"]
