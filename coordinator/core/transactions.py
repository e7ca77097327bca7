"""Multi-table transactions and consistent multi-table reads: the service side (issue 28, docs/transactions.md).

One transaction commits one version on each of N tables, all or none. Order of work, as for a single commit:

1. check the request whole before anything is written: not empty, no table twice, within the limits
   (``max_transaction_tables``, ``max_transaction_bytes``), every table registered and live, every table
   allowed to the caller (``authorize``), every body valid (``parse_commit_body``, the same rules as /api/v1);
2. write each table's staged file ``<v:020>.<uuid>.json`` with put-if-absent (in parallel), the name fresh for
   this attempt (decision 43: no two attempts share a file; the key lives in the rows);
3. ratify every commit in ONE database transaction (``store/transactions.py``), each row keeping its bytes
   until publication like any owner-written commit; a refusal of any table rolls all of it back, and this
   attempt's staged files are removed (never when the outcome is unknown);
4. then, per table, what a single commit does after it is ratified: its columns, the process's view of its
   latest version, the backfiller's trigger. Each table is still published in its own order.

The transaction's id is its idempotency key (a fresh UUID when none is given); it keys every commit row, so a
replay after a lost reply finds the transaction and answers it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from client.contract.errors import (
    CommitFailedError,
    CommitOwnerError,
    CommitVersionConflictError,
    IdempotencyKeyReusedError,
    InvalidArgumentError,
    InvalidCommitError,
    LogAheadOfStoreError,
    PayloadTooLargeError,
    TableNotFoundError,
    TransactionConflictError,
)
from client.contract.layout import staged_file, staged_file_name
from coordinator.core.commit_body import CommitBody, parse_commit_body
from coordinator.core.context import Context, check_version, key_uid, new_commit_row
from coordinator.core.ratify import Ratifier
from coordinator.core.reads import Reads
from coordinator.core.rows import Handed
from coordinator.security.roots import check_local_log
from coordinator.storage.base import FileInfo
from coordinator.store import CommitRow, TableRow
from coordinator.store.transactions import TransactionRefused, TransactionRow

#: Checks one table before anything is written (the API's permission check); raises to refuse.
Authorize = Callable[[TableRow], None]


@dataclass(frozen=True)
class Proposal:
    """One table's part of a transaction: the version it proposes and the exact bytes of its commit file."""

    table_id: str
    version: int
    data: bytes


def request_sha256(proposals: Sequence[Proposal]) -> str:
    """The checksum of what a transaction asks (its tables, versions and bodies, in any order): a replay under
    the same key must ask exactly this."""
    h = hashlib.sha256()
    for p in sorted(proposals, key=lambda p: p.table_id):
        h.update(f"{p.table_id}\n{p.version}\n{hashlib.sha256(p.data).hexdigest()}\n".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Ratified:
    """A ratified transaction: its row, and each table's commit as handed to its writer, in request order."""

    tx: TransactionRow
    commits: list[tuple[str, Handed]]


class TransactionService:
    """Multi-table transactions over the core's shared parts, with the single commit's rules."""

    def __init__(self, ctx: Context, ratifier: Ratifier, reads: Reads) -> None:
        self.ctx = ctx
        self.ratifier = ratifier
        self.reads = reads
        self.store = ctx.store
        self.settings = ctx.settings

    # -- checks ---------------------------------------------------------------------------------------

    def _check_tables(self, table_ids: Sequence[str], what: str) -> None:
        limit = self.settings.max_transaction_tables
        if not table_ids:
            raise InvalidArgumentError(f"{what} is empty: name at least one table")
        if len(table_ids) > limit:
            raise InvalidArgumentError(f"{what} names {len(table_ids)} tables; at most {limit} are allowed "
                                       "(--max-transaction-tables)")
        seen: set[str] = set()
        for i, t in enumerate(table_ids):
            if t in seen:
                raise InvalidArgumentError(f"{what}[{i}]: table {t} is listed twice; a table takes one commit "
                                           "per transaction")
            seen.add(t)

    async def _live_tables(self, table_ids: Sequence[str], what: str) -> dict[str, TableRow]:
        found = await self.store.transactions.tables(table_ids)
        for i, t in enumerate(table_ids):
            row = found.get(t)
            if row is None:
                raise TableNotFoundError(f"{what}[{i}]: no table with id {t}; nothing was written")
            if row.dropped_at is not None:
                raise TableNotFoundError(f"{what}[{i}]: table {t} was dropped; nothing was written")
        return found

    def _parse(self, i: int, p: Proposal) -> CommitBody:
        where = f"commits[{i}] (table {p.table_id})"
        check_version(p.version, where)
        try:
            body = parse_commit_body(p.data, max_line_bytes=self.settings.max_line_bytes,
                                     clock=self.ctx.clock_rule())
        except InvalidCommitError as e:
            raise InvalidCommitError(f"{where}: {e.message}; nothing was written") from None
        if body.gives_up_ownership:
            raise InvalidCommitError(f"{where}: a commit that gives ownership up (a metaData without the owner "
                                     "property) cannot be part of a transaction: release the table on its own")
        return body

    # -- commit ---------------------------------------------------------------------------------------

    async def commit(self, proposals: Sequence[Proposal], idempotency_key: str | None, *,
                     authorize: Authorize | None = None) -> Ratified:
        """Ratify every proposal, in one database transaction, or none. Returns the transaction and each
        table's ratified commit, in request order.

        Raises InvalidArgumentError / InvalidCommitError / PayloadTooLargeError / TableNotFoundError /
        PermissionDeniedError (from ``authorize``) before anything is written; TransactionConflictError when a
        table moved on (each refusing table listed, with what its writer has not seen); a table's own refusal
        (TableNotAcceptingCommitsError, TooManyUnbackfilledCommitsError, InvalidCommitError for a gap) naming it
        when none is a conflict; IdempotencyKeyReusedError; UnavailableError (the outcome is unknown: replay
        with the same key).
        """
        ids = [p.table_id for p in proposals]
        self._check_tables(ids, "commits")
        total = sum(len(p.data) for p in proposals)
        if total > self.settings.max_transaction_bytes:
            raise PayloadTooLargeError(f"the transaction's commit bodies hold {total} bytes; at most "
                                       f"{self.settings.max_transaction_bytes} are allowed (--max-transaction-bytes)")
        uid = key_uid(idempotency_key) if idempotency_key else str(uuid.uuid4())
        sha = request_sha256(proposals)
        if idempotency_key and (prior := await self.store.transactions.replayed(uid)) is not None:
            return await self._replayed(prior, sha, proposals, authorize=authorize)
        tables = await self._live_tables(ids, "commits")
        for t in ids:
            if authorize is not None:
                authorize(tables[t])
        bodies = [self._parse(i, p) for i, p in enumerate(proposals)]
        for t in ids:
            check_local_log(tables[t].location, tables[t].commit_dir, self.ctx.roots)
            try:  # never a version already published (a restored store), as for a single commit
                await self.ctx.log_ahead.check(t, tables[t])
            except LogAheadOfStoreError as e:
                e.message = f"commits[{ids.index(t)}] (table {t}): {e.message}; nothing of the transaction was committed"
                e.args = (e.message,)
                raise
        paths = [staged_file(tables[p.table_id].location, tables[p.table_id].commit_dir, staged_file_name(p.version))
                 for p in proposals]
        storages = [self.ctx.storage.for_uri(path) for path in paths]
        written = await asyncio.gather(*(s.put_if_absent(path, p.data)
                                         for s, path, p in zip(storages, paths, proposals, strict=True)),
                                       return_exceptions=True)
        # Every name is fresh for this attempt: a file it created is its own, and nobody else's to ratify.
        created = [(s, path) for s, path, w in zip(storages, paths, written, strict=True) if isinstance(w, FileInfo)]
        failed = [w for w in written if not isinstance(w, FileInfo)]
        if failed:
            await self._remove(created)  # nothing was asked of the database: the refusal is certain
            raise failed[0]  # (a storage failure is the seam's UnavailableError already)
        rows = [new_commit_row(p.table_id, p.version, p.data, file_name=path.rsplit("/", 1)[1], uid=uid,
                               commit_timestamp=b.in_commit_timestamp, file=w)
                for p, path, w, b in zip(proposals, paths, written, bodies, strict=True) if isinstance(w, FileInfo)]
        try:
            tx, new = await self.store.transactions.ratify(uid, sha, rows,
                                                           max_unbackfilled=self.settings.max_unbackfilled_commits)
        except TransactionRefused as e:
            await self._remove(created)
            raise await self._refusal(e, proposals) from None
        except (CommitFailedError, TableNotFoundError):
            await self._remove(created)
            raise
        if not new:  # a racing attempt under the same key won, with its own files: ours are orphans
            await self._remove(created)
            return await self._replayed(tx, sha, proposals)  # (authorized above)
        for row, body in zip(rows, bodies, strict=True):
            await self.ratifier.after_ratified(row, body)
        return self._answer(tx, {r.table_id: r for r in rows}, tables, ids)

    async def _replayed(self, prior: TransactionRow, sha: str, proposals: Sequence[Proposal],
                        authorize: Authorize | None = None) -> Ratified:
        """The answer to a transaction whose key was already ratified: its first answer when it asks the same,
        to a caller allowed every table of it (as the first attempt was)."""
        ids = [p.table_id for p in proposals]
        tables = await self.store.transactions.tables(ids)
        for t in ids:  # (the permission first, as for the first attempt)
            if authorize is not None and t in tables:
                authorize(tables[t])
        if prior.request_sha256 != sha:
            raise IdempotencyKeyReusedError(f"idempotency key {prior.id} was already used for a transaction with "
                                            "other tables, versions or bodies")
        handed: dict[str, Handed] = {}
        for t, v in prior.commits:
            row = await self.store.get_commit(t, v)
            if row is not None:  # (its staged file, written before the transaction, made sure of as for any reader)
                handed[t] = (await self.ctx.for_readers(tables[t], [row]))[0]
        return Ratified(prior, [(t, handed[t]) for t in ids])

    @staticmethod
    def _answer(tx: TransactionRow, rows: dict[str, CommitRow], tables: dict[str, TableRow],
                order: Sequence[str]) -> Ratified:
        return Ratified(tx, [(t, Handed.of(tables[t].location, tables[t].commit_dir, rows[t])) for t in order])

    async def _refusal(self, refused: TransactionRefused, proposals: Sequence[Proposal]) -> CommitOwnerError:
        """The one error of a refused transaction: a TransactionConflictError listing every refusing table when
        any of them is a version conflict, else the first refusal (request order), naming its table."""
        versions = {p.table_id: p.version for p in proposals}
        order = [p.table_id for p in proposals if p.table_id in refused.refusals]
        if not any(isinstance(refused.refusals[t], CommitVersionConflictError) for t in order):
            first = refused.refusals[order[0]]
            first.message = f"table {order[0]}: {first.message}; nothing of the transaction was committed"
            first.args = (first.message,)
            return first
        listed = []
        for t in sorted(order):
            err = refused.refusals[t]
            if isinstance(err, CommitVersionConflictError):
                await self.reads.add_unseen_commits(err, t, versions[t])
            listed.append({"tableId": t, "version": versions[t], **err.to_envelope()["error"]})
        conflicts = [e["tableId"] for e in listed if e["conflict"]]
        out = TransactionConflictError(
            f"transaction refused, nothing was committed: table(s) {', '.join(conflicts)} moved past the "
            f"version proposed" + (f"; {len(listed) - len(conflicts)} other table(s) refused it too"
                                   if len(listed) > len(conflicts) else ""),
            retryable=all(refused.refusals[t].retryable for t in order))
        out.tables = listed
        return out

    async def _remove(self, created: Sequence[tuple[Any, str]]) -> None:
        for storage, path in created:
            await self.ctx.remove_orphan(storage, path)

    # -- consistent reads -----------------------------------------------------------------------------

    async def snapshot(self, table_ids: Sequence[str], *,
                       authorize: Authorize | None = None) -> list[tuple[TableRow, list[Handed]]]:
        """Each table (its latest ratified version) and its unpublished commits (as getCommits hands them), all as
        of one instant, in request order. Raises InvalidArgumentError (empty, a table twice, over the limit), TableNotFoundError,
        PermissionDeniedError (from ``authorize``)."""
        self._check_tables(table_ids, "tableIds")
        read = await self.store.transactions.snapshot(table_ids)
        for i, t in enumerate(table_ids):
            if t not in read:
                raise TableNotFoundError(f"tableIds[{i}]: no table with id {t}")
            if authorize is not None:
                authorize(read[t][0])
        return [(read[t][0], await self.ctx.for_readers(*read[t])) for t in table_ids]

    # -- ops view -------------------------------------------------------------------------------------

    async def recent(self, limit: int = 20, table_id: str | None = None) -> list[TransactionRow]:
        """The newest transactions (of ``table_id`` only, when given), newest first."""
        return await self.store.transactions.recent(limit, table_id)


__all__ = ["Authorize", "Proposal", "Ratified", "TransactionService", "request_sha256"]
