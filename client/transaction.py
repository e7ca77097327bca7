"""Writes to several owned tables that become visible together, or not at all (a multi-table transaction).

::

    with client.transaction(client=owner) as tx:
        tx.write_table(facts, "s3://lake/facts")
        tx.write_table(dimension, "s3://lake/dim", mode="overwrite")
    # here both commits are ratified, in one request (POST /api/v1/transactions)

Each :meth:`Transaction.write_table` checks its data against the table (creating a missing table, as
:func:`client.write_table` does: a creation is not part of the transaction) and writes its Parquet files at
once, under a fresh ``batch-<hex>/`` folder that no commit references yet. Leaving the ``with`` block commits
one version on every table in ONE request: the owner ratifies all of them or none. An exception inside the
block, or a refusal, commits nothing and deletes every file the transaction wrote (after
CommitStateUnknownError the files are kept: the transaction may have landed).

A transaction that lost a race on some tables is rebased, as a single write is: appends move onto the new
versions, an overwrite whose table's files changed fails with TableChangedError; then the whole transaction is
sent again under a new idempotency key. Standard library only at import time (pyarrow when writing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from client.actions import ARROW_ENGINE_INFO, DataFile, Mode, add_action
from client.backoff import conflict_delay
from client.commit import MAX_REBASES, WriteOptions, check_mode, commit_actions, open_target, owner_client, rebased
from client.contract.errors import CommitStateUnknownError, CommitVersionConflictError, TransactionConflictError
from client.contract.layout import new_batch_folder, normalize_location
from client.http import CommitOwnerClient
from client.models import TransactionResult
from client.publish import await_published

log = logging.getLogger(__name__)


@dataclass
class _Part:
    """One table's write inside a transaction."""

    options: WriteOptions
    schema_json: Mapping[str, Any]
    snap: Any
    table_id: str
    writer: Any
    folder: str
    files: list[DataFile]
    planned_removes: set[str] = field(default_factory=set)

    def actions(self) -> list[dict[str, Any]]:
        return commit_actions(self.snap, self.options.mode, self.files, [add_action(f) for f in self.files],
                              engine_info=ARROW_ENGINE_INFO)


class Transaction:
    """Writes to several owned tables (at the same owner), committed together on :meth:`commit` (on leaving a
    ``with`` block without an exception); see the module's docstring. Not thread-safe."""

    def __init__(self, *, client: CommitOwnerClient | None = None, endpoint: str | None = None,
                 token: str | None = None, storage_options: Mapping[str, Any] | None = None,
                 wait_published: bool = True) -> None:
        self.owner = owner_client(client, endpoint, token)
        self.token = token
        self.storage_options = storage_options
        self.wait_published = wait_published
        self.parts: dict[str, _Part] = {}  # by location, in the order written
        self.result: TransactionResult | None = None
        self.rebases = 0
        self._done = False

    def write_table(self, data: Any, location: str, *, mode: Mode = "append", partition_by: Sequence[str] | None = None,
                    protocol: str = "managedCommit", full_name: str | None = None,
                    storage_options: Mapping[str, Any] | None = None) -> None:
        """Write ``data`` (pyarrow Table / RecordBatchReader, pandas or Polars DataFrame) as this transaction's
        commit on the table at ``location``: its files now, its commit with the others'. One write per table.

        Raises ValueError (a second write to the same table, a bad mode or schema: nothing written), TypeError,
        and what :func:`client.write_table` raises while opening or creating the table.
        """
        from client.write import ArrowFiles, delta_schema, to_arrow

        if self._done:
            raise ValueError("this transaction is over: start a new one")
        check_mode(mode)
        where = normalize_location(location)
        if where in self.parts:
            raise ValueError(f"{where} is already written by this transaction: one write per table")
        schema_json, table = delta_schema(to_arrow(data))
        options = WriteOptions(mode=mode, partition_by=partition_by, client=self.owner, token=self.token,
                               protocol=protocol, full_name=full_name,
                               storage_options=storage_options if storage_options is not None else self.storage_options,
                               wait_published=self.wait_published)
        target = open_target(where, schema_json, options)
        if self.owner is None:
            self.owner = target.owner
        writer = ArrowFiles(table, schema_json, target.snap.location, options.storage_options)
        folder = new_batch_folder()
        try:
            files = writer.write(folder, list(target.snap.partition_columns))
        except BaseException:
            writer.discard(folder)
            raise
        removes = {a["path"] for a in target.snap.files} if mode == "overwrite" else set()
        self.parts[where] = _Part(options, schema_json, target.snap, target.table_id, writer, folder, files, removes)

    def commit(self) -> TransactionResult:
        """Commit every write of this transaction together (one version per table), rebasing on lost races.

        Raises ValueError (nothing written), TableChangedError (an overwrite lost to a commit that changed its
        table), TransactionConflictError (still losing after many rebases, or a table that cannot take it), the
        owner's other errors; every file the transaction wrote is deleted then, except after
        CommitStateUnknownError.
        """
        if self._done:
            raise ValueError("this transaction is over: start a new one")
        if not self.parts:
            raise ValueError("nothing to commit: write_table at least once in the transaction")
        assert self.owner is not None  # (set by the first write_table)
        owner = self.owner
        keep = False
        try:
            while True:
                proposals = [(p.table_id, p.snap.version + 1, p.actions()) for p in self.parts.values()]
                try:
                    self.result = owner.commit_transaction(proposals)
                    break
                except TransactionConflictError as e:
                    self.rebases += 1
                    if not e.retryable or self.rebases > MAX_REBASES:
                        raise
                    self._rebase(e, owner)
                    time.sleep(conflict_delay(self.rebases))
                except CommitStateUnknownError:
                    keep = True  # it may have landed: keep the files it would reference
                    raise
        except BaseException:
            if not keep:
                self.discard()
            raise
        finally:
            self._done = True
        if self.wait_published:
            for p in self.parts.values():
                await_published(owner, p.table_id, self.result.commits[p.table_id].version, location=p.snap.location)
        return self.result

    def _rebase(self, refused: TransactionConflictError, owner: CommitOwnerClient) -> None:
        by_id = {p.table_id: p for p in self.parts.values()}
        for t in refused.tables or []:
            part = by_id.get(str(t.get("tableId")))
            if part is None:
                continue
            conflict = CommitVersionConflictError(str(t.get("message", "")),
                                                  latest_table_version=t.get("latestTableVersion"))
            unseen = t.get("unseenCommits")
            conflict.unseen_commits = unseen if isinstance(unseen, list) else None
            conflict.unseen_commits_complete = t.get("unseenCommitsComplete") is True
            part.snap = rebased(part.snap, conflict, part.snap.version + 1, owner, part.options, part.schema_json,
                                part.planned_removes)

    def discard(self) -> None:
        """Delete every file this transaction wrote (nothing of it was committed)."""
        for where, p in self.parts.items():
            try:
                p.writer.discard(p.folder)
            except Exception:  # noqa: BLE001 - never hide the error that ended the transaction
                log.warning("could not delete the uncommitted files under %s/%s", where, p.folder, exc_info=True)
        self._done = True

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._done:
            return
        if kind is not None:
            self.discard()  # nothing is committed when the block fails
            return
        self.commit()


def transaction(*, client: CommitOwnerClient | None = None, endpoint: str | None = None, token: str | None = None,
                storage_options: Mapping[str, Any] | None = None, wait_published: bool = True) -> Transaction:
    """A :class:`Transaction` to use as a context manager: ``with client.transaction(client=owner) as tx: ...``.

    ``client`` / ``endpoint`` (else ``$COMMIT_OWNER_ENDPOINT``, else the owner the first table names) is the
    owner of every table written; ``storage_options`` go to fsspec for every table (a write may give its own);
    ``wait_published``: return once every table's new version is published in its ``_delta_log`` (each table
    is published on its own: see docs/transactions.md for what a plain reader sees meanwhile).
    """
    return Transaction(client=client, endpoint=endpoint, token=token, storage_options=storage_options,
                       wait_published=wait_published)


__all__ = ["Transaction", "transaction"]
