"""What the core needs of a publisher: the process's backfiller, seen from the commit path.

The core ratifies; a publisher turns ratified commits into ``_delta_log/<v>.json``. ``backfill/`` (top level)
provides one (``backfill.worker.Backfiller`` satisfies :class:`Publisher` structurally: neither package imports
the other); ``coordinator/api/app.py`` wires it. :class:`NoPublisher` stands in where a process publishes
nothing, so the commit path never asks "is there a publisher?".
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager as ContextManager
from typing import Protocol

from client.contract.errors import UnavailableError
from coordinator.storage.base import Prepared
from coordinator.store import CommitRow, TableRow


class Publisher(Protocol):
    """The calls the core makes on the process's publisher (see ``backfill/worker.py`` for what each does)."""

    def own_publication(self, table_id: str, version: int) -> ContextManager[None]:
        """Held while this process ratifies and answers ``version``: the publication is the commit's own."""

    def mark_to_carry(self, table_id: str) -> int:
        """The published mark a ratification of ``table_id`` can carry (-1: none)."""

    def carried(self, table_id: str, up_to: int) -> None:
        """A ratification recorded the mark ``up_to``."""

    def publishes_next(self, table_id: str, version: int) -> bool:
        """Whether ``version`` is published as part of its commit, right after it is ratified."""

    async def publish_own(self, row: CommitRow, data: bytes, prepared: Prepared | None = None) -> bool:
        """Publish the just ratified ``row`` now; False when this process cannot publish it next."""

    async def after_commit(self, table_id: str, version: int, data: bytes, gives_up_ownership: bool,
                           row: CommitRow | None = None) -> None:
        """``version`` is ratified (as ``row``). Never raises."""

    async def backfill(self, table_id: str, up_to: int | None = None, *, last_known_backfilled: int | None = None,
                       wait_seconds: float = 30.0, defer_mark: bool = False) -> TableRow:
        """Publish every version <= ``up_to`` (all when None) now; the table afterwards. Raises InvalidArgumentError,
        ForeignCommitFileError, UnavailableError."""


class NoPublisher:
    """The publisher of a process that publishes nothing: commits stay ratified until another process publishes
    them; asking it to publish now is refused as unavailable."""

    def own_publication(self, table_id: str, version: int) -> ContextManager[None]:
        return contextlib.nullcontext()

    def mark_to_carry(self, table_id: str) -> int:
        return -1

    def carried(self, table_id: str, up_to: int) -> None:
        return None

    def publishes_next(self, table_id: str, version: int) -> bool:
        return False

    async def publish_own(self, row: CommitRow, data: bytes, prepared: Prepared | None = None) -> bool:
        return False

    async def after_commit(self, table_id: str, version: int, data: bytes, gives_up_ownership: bool,
                           row: CommitRow | None = None) -> None:
        return None

    async def backfill(self, table_id: str, up_to: int | None = None, *, last_known_backfilled: int | None = None,
                       wait_seconds: float = 30.0, defer_mark: bool = False) -> TableRow:
        raise UnavailableError("this process runs no backfiller")


__all__ = ["NoPublisher", "Publisher"]
