"""Staged files of owner-written commits, with the database as their write-ahead log (decision 43).

The owner writes an ``/api/v1`` commit's staged file in parallel with the transaction that ratifies it, and
the commit row keeps the bytes until the commit is published. So for a moment (or, after a crash between
the two, until someone looks) a ratified row can name a staged file that is not there. The rule: whoever
hands such a row to a reader or publishes it first makes sure its file is there, writing it from the row
(``StagedFiles.ensure``). Writer-staged commits (``body`` NULL) are the writer's files: never written here.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable
from typing import Protocol

from client.contract.layout import staged_file
from coordinator.storage import StorageRouter

log = logging.getLogger("commit_owner.staged")


class CommitRow(Protocol):
    """What of a commit row (``coordinator.store.CommitRow``) its staged file's rules read."""

    @property
    def table_id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def file_name(self) -> str: ...
    @property
    def body(self) -> bytes | None: ...

#: How many (table, version) pairs a process remembers as "its staged file is there".
KNOWN_PRESENT = 100_000


async def ensure_staged(storage: StorageRouter, location: str, commit_dir: str, row: CommitRow) -> None:
    """Make sure the staged file of ``row`` is there; write it from the row's bytes when it is missing.

    The file name is fresh for every attempt, so only the attempt that was ratified, or this rewrite, ever
    writes it, with the same bytes: "already there" is success. Raises UnavailableError when storage fails."""
    if row.body is None:
        return
    path = staged_file(location, commit_dir, row.file_name)
    backend = storage.for_uri(path)
    if await backend.exists(path):
        return
    try:
        await backend.put_if_absent(path, row.body)
    except FileExistsError:
        return  # its writer got there in the meantime
    log.warning("table %s: the staged file of ratified version %d was missing; written from its row (%s)",
                row.table_id, row.version, row.file_name)


async def commit_bytes(storage: StorageRouter, location: str, commit_dir: str, row: CommitRow) -> bytes:
    """The bytes ratified as ``row``: from the row while it keeps them (its staged file made sure of first),
    else read from its staged file. Raises UnavailableError (storage failed), FileNotFoundError."""
    if row.body is not None:
        await ensure_staged(storage, location, commit_dir, row)
        return row.body
    path = staged_file(location, commit_dir, row.file_name)
    return await storage.for_uri(path).read(path)


class StagedFiles:
    """A process's view: ``ensure`` over rows, skipping the ones whose file this process knows is there."""

    def __init__(self, storage: StorageRouter) -> None:
        self.storage = storage
        self._present: OrderedDict[tuple[str, int], None] = OrderedDict()

    def written(self, table_id: str, version: int) -> None:
        """The staged file of ``version`` is there (this process wrote it, or saw it)."""
        self._present[(table_id, version)] = None
        if len(self._present) > KNOWN_PRESENT:
            self._present.popitem(last=False)

    async def ensure(self, location: str, commit_dir: str, rows: Iterable[CommitRow]) -> None:
        """Every row's staged file is there once this returns. Raises UnavailableError."""
        for row in rows:
            if row.body is None or (row.table_id, row.version) in self._present:
                continue
            await ensure_staged(self.storage, location, commit_dir, row)
            self.written(row.table_id, row.version)
