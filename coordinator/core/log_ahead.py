"""The owner never ratifies a version that is already published: a table whose ``_delta_log`` is ahead of the store.

After the ownership store is restored from an older backup, its record of a table can be behind the table's log:
``<latest+1>.json`` (and maybe more) is published, by this owner before the restore, and the store no longer
knows it. Ratifying ``latest+1`` again would give one version two commits. So before the first ratification of a
table in a process, ``LogAhead.check`` looks for ``<latest+1>.json``; when it is there the proposal is refused
(``LogAheadOfStoreError``, 503 retryable: retry later, no rebase helps) until an operator adopts the published
versions (``commit-owner tables reconcile``, ``coordinator/ops/reconcile.py``).

Only the verdict "not ahead" is kept, per table id, so a table costs one read of its row and one ``exists`` per
process, and a refused table is looked at again at its next proposal (so it serves again once reconciled, without
a restart). The owner publishes a version only after its ratification is committed, so ``<L+1>.json`` seen while
the row, read again afterwards, still says ``L``, was not published from this store: that is the refusal. A
restore therefore implies restarting the owners (a process that verified the table before keeps its verdict).
"""

from __future__ import annotations

from collections import OrderedDict

from client.contract.errors import LogAheadOfStoreError
from client.contract.layout import delta_file, delta_file_name
from coordinator.storage import StorageRouter
from coordinator.store import OwnershipStore, TableRow

#: How many tables' verdicts a process keeps.
VERDICTS_KEPT = 100_000
#: A table whose latest version moves under the check this many times in a row is let through unverified (it is
#: being ratified by other processes: the check runs again at the next proposal).
MOVES = 3


def refusal(table: TableRow, version: int) -> LogAheadOfStoreError:
    """The refusal of a proposal to ``table`` whose log holds ``<version>.json`` beyond its latest version."""
    return LogAheadOfStoreError(
        f"table {table.table_id}: _delta_log/{delta_file_name(version)} is published, but the owner's store records "
        f"version {table.latest_version} as the latest: the store is behind the log (restored from an older "
        f"backup?). Nothing was ratified; the table takes no commits until an operator runs "
        f"`commit-owner tables reconcile {table.table_id}` (docs/runbook.md); retry later",
        latest_table_version=table.reported_latest)


class LogAhead:
    """This process's verdicts: the tables whose log was found not ahead of the store."""

    def __init__(self, store: OwnershipStore, storage: StorageRouter) -> None:
        self.store = store
        self.storage = storage
        self._verified: OrderedDict[str, None] = OrderedDict()

    def verified(self, table_id: str) -> bool:
        return table_id in self._verified

    async def check(self, table_id: str, table: TableRow | None = None) -> None:
        """Refuse a proposal to ``table_id`` while its log is ahead of the store (``table``: its row as the caller
        just read it, else it is read here). Costs nothing once the table was verified in this process. Raises
        LogAheadOfStoreError, TableNotFoundError, UnavailableError."""
        if table_id in self._verified:
            return
        row = table if table is not None else await self.store.get_table(table_id)
        for _ in range(MOVES):
            if not row.accepting:
                return  # refused by the database anyway; looked at again once it accepts commits
            nxt = delta_file(row.location, row.latest_version + 1)
            if not await self.storage.for_uri(nxt).exists(nxt):
                self._keep(table_id)
                return
            again = await self.store.get_table(table_id)
            if again.latest_version == row.latest_version:
                raise refusal(again, row.latest_version + 1)
            row = again  # ratified meanwhile by another process: look past its new latest version

    def registered(self, table_id: str) -> None:
        """``table_id`` was registered by this process, its log checked to hold nothing beyond the version it
        registered at: no check is needed before its first ratification here."""
        self._keep(table_id)

    def _keep(self, table_id: str) -> None:
        self._verified[table_id] = None
        if len(self._verified) > VERDICTS_KEPT:
            self._verified.popitem(last=False)

    def forget(self, table_id: str) -> None:
        self._verified.pop(table_id, None)


__all__ = ["LogAhead", "refusal"]
