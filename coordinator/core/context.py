"""What every part of the core shares (ratify.py, reads.py, registry.py, transactions.py): the seams, this
process's memory of its tables, and the rules more than one part applies. Each part imports this module; none
imports another part, so there is no circle.

Rules kept here, once: the spelling of an idempotency key (``key_uid``), which versions a writer may propose
(``check_version``), a version range (``check_range``), the commit row of a ratification (``new_commit_row``),
and which commit files a reader is handed (``Context.for_readers``: rows whose staged files are made sure of).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections import OrderedDict
from typing import Any

from client.contract.errors import InvalidArgumentError, InvalidCommitError
from coordinator.core.commit_body import ClockRule
from coordinator.core.log_ahead import LogAhead
from coordinator.core.memory import Memories
from coordinator.core.publisher import NoPublisher, Publisher
from coordinator.core.rows import Handed, TablePlace
from coordinator.runtime.settings import Settings
from coordinator.security.roots import parse_roots
from coordinator.storage import StorageRouter
from coordinator.storage.base import FileInfo
from coordinator.storage.staged import StagedFiles
from coordinator.store import CommitRow, OwnershipStore, TableRow, now_ms
from coordinator.store.names import NameStore

log = logging.getLogger("commit_owner.service")

#: How many tables' places a process keeps (a location and a folder never change).
PLACES_KEPT = 100_000


def key_uid(key: str) -> str:
    """The canonical spelling of an idempotency key; it becomes part of a staged file's name."""
    try:
        return str(uuid.UUID(key))
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgumentError("Idempotency-Key must be a UUID") from None


def check_version(version: int, where: str = "") -> None:
    """A writer proposes versions from 1 on through the owner: version 0 (the table's creation) goes via the
    filesystem (the message is Delta's own, docs/protocol.md). Raises InvalidCommitError; ``where`` names the
    proposal within a transaction (``commits[i] (table t)``), whose refusal writes nothing."""
    if version > 0:
        return
    reason = ("Commit version 0 must go via filesystem" if version == 0 else
              f"Commit version {version} is not valid: versions start at 1 through the owner (version 0 goes via "
              "the filesystem)")
    raise InvalidCommitError(f"{where}: {reason}; nothing was written" if where else f"{reason}.",
                             latest_table_version=None)


def check_range(start: int | None, end: int | None) -> None:
    """A range of versions reads upwards. Raises InvalidArgumentError."""
    if start is not None and end is not None and start > end:
        raise InvalidArgumentError(f"start version {start} is greater than end version {end}")


def new_commit_row(table_id: str, version: int, data: bytes, *, file_name: str, uid: str, commit_timestamp: int,
                   file: FileInfo | None = None, keeps_body: bool = True) -> CommitRow:
    """The row a ratification inserts for ``data``, the one way every path builds it. ``file``: the commit file as
    written (its size and time; None: it is being written now, ``data`` long); ``keeps_body``: the row keeps
    ``data`` until publication (the owner wrote the file: decision 43), not when the writer staged it."""
    now = now_ms()
    return CommitRow(table_id=table_id, version=version, file_name=file_name, idempotency_key=uid,
                     file_size=len(data) if file is None else file.size,
                     file_modification_time=now if file is None else file.modification_time,
                     commit_timestamp=commit_timestamp, content_sha256=hashlib.sha256(data).hexdigest(),
                     ratified_at=now, body=data if keeps_body else None)


class Context:
    """The seams and the process's memory the core's parts share."""

    def __init__(self, settings: Settings, store: OwnershipStore, storage: StorageRouter, *,
                 publisher: Publisher | None = None) -> None:
        self.settings = settings
        self.store = store
        self.storage = storage
        self.publisher: Publisher = publisher if publisher is not None else NoPublisher()
        self.roots = parse_roots(settings.allow_location)
        self.names = NameStore(store)
        self.staged = StagedFiles(storage)
        self.memories = Memories(store.turns, settings.commit_turn_seconds)
        # The log not ahead of the store, checked once per table before its first ratification here.
        self.log_ahead = LogAhead(store, storage)
        # A table's location and folder never change: cache them so a commit costs no extra read.
        self._places: OrderedDict[str, TablePlace] = OrderedDict()

    async def place(self, table_id: str) -> TablePlace:
        """Where ``table_id`` keeps its log and its commit files. Raises TableNotFoundError."""
        p = self._places.get(table_id)
        if p is None:
            t = await self.store.get_table(table_id)
            p = TablePlace(t.location, t.commit_dir)
            self._places[table_id] = p
            if len(self._places) > PLACES_KEPT:
                self._places.popitem(last=False)
        return p

    def forget(self, table_id: str) -> None:
        """``table_id`` is gone (forgotten or dropped): what this process kept of it goes too."""
        self._places.pop(table_id, None)
        self.memories.pop(table_id)
        self.log_ahead.forget(table_id)

    async def for_readers(self, table: TableRow | TablePlace, rows: list[CommitRow]) -> list[Handed]:
        """``rows`` as a reader is handed them: their staged files, made sure of first (a crash may have left a
        ratified row's file unwritten). Raises UnavailableError."""
        await self.staged.ensure(table.location, table.commit_dir, rows)
        return [Handed.of(table.location, table.commit_dir, r) for r in rows]

    def clock_rule(self) -> ClockRule:
        return ClockRule(now_ms=now_ms(), max_skew_ms=int(self.settings.max_clock_skew_seconds * 1000))

    async def remove_orphan(self, storage: Any, path: str) -> None:
        """Remove a staged file whose refusal is certain; one that stays is the janitor's."""
        try:
            await storage.delete(path)
        except OSError:
            log.warning("could not remove orphan commit file %s; the janitor will", path)


__all__ = ["Context", "check_range", "check_version", "key_uid", "new_commit_row"]
