"""What a named table's catalog record says of its newest commit, on every API: ``delta.lastUpdateVersion`` and
``delta.lastCommitTimestamp`` (and the Delta REST Catalog API's ``last-commit-version`` and
``last-commit-timestamp-ms``, read from them) follow each commit the owner ratifies (decision 74).

Derived when a record is answered, from the table row the ratification writes anyway (its latest version, and
the inCommitTimestamp the owner read in the commit itself), never stored per commit: the commit path does no
extra write, and a commit that came through any API shows in every API's answer. Before the owner ratified a
commit (a new MANAGED table at the version 0 its writer wrote, a table taken over at its newest version), the
record says what its creator reported.
"""

from __future__ import annotations

from collections.abc import Mapping

from client.contract.delta_log import TABLE_ID_PROPERTY
from coordinator.store.rows import NameRow, TableRow

LAST_UPDATE_VERSION, LAST_COMMIT_TIMESTAMP = "delta.lastUpdateVersion", "delta.lastCommitTimestamp"


def last_commit_properties(table: TableRow, recorded: Mapping[str, str]) -> dict[str, str]:
    """The two keys as ``table`` holds them: its newest ratified version and that commit's timestamp once the
    owner ratified one; until then those ``recorded`` (if any)."""
    if table.owner_ratified and table.last_commit_timestamp is not None:
        return {LAST_UPDATE_VERSION: str(table.latest_version), LAST_COMMIT_TIMESTAMP: str(table.last_commit_timestamp)}
    return {k: recorded[k] for k in (LAST_UPDATE_VERSION, LAST_COMMIT_TIMESTAMP) if k in recorded}


def current_properties(table: TableRow, recorded: Mapping[str, str]) -> dict[str, str]:
    """``recorded`` (a name row's properties) with the last commit's keys as ``table`` holds them."""
    return {**recorded, **last_commit_properties(table, recorded)}


def answered_properties(table: TableRow, name: NameRow) -> dict[str, str]:
    """A named table's properties as every API answers them: its record, the last commit's keys following the
    table, and its id."""
    return {**current_properties(table, name.properties), TABLE_ID_PROPERTY: table.table_id}


__all__ = ["LAST_COMMIT_TIMESTAMP", "LAST_UPDATE_VERSION", "answered_properties", "current_properties",
           "last_commit_properties"]
