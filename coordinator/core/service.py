"""The core's one face: ``CommitService`` composes its parts, each in its own module, over one ``Context``
(``context.py``: the seams, this process's memory of its tables, the rules the parts share):

* ``ratify.py`` (``Ratifier``): an owner-written body ratified as one version (/api/v1's commit);
* ``writer_staged.py`` (``WriterStaged``): the catalog APIs' commits of files the writer staged;
* ``transactions.py`` (``TransactionService``): multi-table transactions and consistent multi-table reads;
* ``reads.py`` (``Reads``): the commits a reader is handed, tables, status;
* ``registry.py`` (``Registry``): registration, forget, drop, locations, publishing on request.

The core answers rows and small dataclasses (``Handed``: a commit and its file); the adapters shape their
wire formats. The publisher (``backfill/``) is wired in from outside as a ``Publisher`` (``publisher.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.core.context import Context
from coordinator.core.publisher import Publisher
from coordinator.core.ratify import Ratifier
from coordinator.core.reads import Reads
from coordinator.core.registry import Registry
from coordinator.core.transactions import TransactionService
from coordinator.core.writer_staged import WriterStaged
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter
from coordinator.store import OwnershipStore

if TYPE_CHECKING:
    from coordinator.runtime.metrics import Metrics


class CommitService:
    """The commit-owner contract on top of the store and the storage seams: the parts, composed once.

    The commit path is called here (``commit``, ``writer_commit``); the other parts are reached by name
    (``reads``, ``registry``, ``transactions``)."""

    def __init__(self, settings: Settings, store: OwnershipStore, storage: StorageRouter, *,
                 publisher: Publisher | None = None, metrics: Metrics | None = None) -> None:
        self.ctx = Context(settings, store, storage, publisher=publisher)
        self.ratifier = Ratifier(self.ctx, metrics)
        self.reads = Reads(self.ctx)
        self.registry = Registry(self.ctx)
        self.writer_staged = WriterStaged(self.ratifier)
        self.transactions = TransactionService(self.ctx, self.ratifier, self.reads)  # multi-table (issue 28)
        # the commit path, as the adapters call it
        self.commit = self.ratifier.commit
        self.writer_commit = self.writer_staged.writer_commit
        self.add_unseen_commits = self.reads.add_unseen_commits


__all__ = ["CommitService"]
