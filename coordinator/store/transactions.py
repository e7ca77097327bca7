"""Multi-table transactions: N commits of N tables ratified in ONE database transaction, or none of them.

* ``ratify`` runs, in one transaction, the same conditional UPDATE of each table row as a single commit
  (``rules.ratification``, judged by ``rules.acceptance``), in table-id order (two transactions over the same
  tables take their row locks in the same order, so they never deadlock each other), then the INSERT of every
  commit row and of the transaction's row. When any UPDATE matches nothing, the whole transaction is rolled back
  and every table of it is judged again by the same rule (``Commits.refusal``): the refusals name each table
  that refused. The database stays the arbiter: nothing is checked before acting.
* The transaction's id is its idempotency key; every commit row of it carries that key too, so the unique
  (table_id, idempotency_key) of ``commits`` and the primary key of ``transactions`` turn a racing duplicate
  into an IntegrityError that undoes it whole, and a replay finds the transaction's row (``get``).
* ``snapshot`` reads the rows of several tables and their unpublished commits in ONE statement: one instant,
  so a transaction is seen whole or not at all.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, select
from sqlalchemy.exc import IntegrityError

from client.contract.errors import (
    CommitFailedError,
    IdempotencyKeyReusedError,
    UnavailableError,
)
from coordinator.store.commits import Commits
from coordinator.store.db import Db
from coordinator.store.rows import CommitRow, TableRow, now_ms
from coordinator.store.rules import BOUND, commit_values, ratification, ratify_params
from coordinator.store.schema import commits, owned_tables, transactions
from coordinator.store.tables import named_tables, table_of


@dataclass(frozen=True)
class TransactionRow:
    """A ratified transaction: its id (idempotency key), the checksum of what it asked, the (table id,
    version) of each of its commits in table-id order, and when it was ratified (ms since the epoch)."""

    id: str
    request_sha256: str
    commits: tuple[tuple[str, int], ...]
    committed_at: int

    def to_json(self) -> dict[str, Any]:
        return {"transactionId": self.id, "committedAt": self.committed_at,
                "commits": [{"tableId": t, "version": v} for t, v in self.commits]}


class TransactionRefused(Exception):
    """The transaction was rolled back: ``refusals`` maps each table that refused it to its refusal (the
    error a single commit of that table would have got), in table-id order."""

    def __init__(self, refusals: dict[str, CommitFailedError]) -> None:
        super().__init__(f"{len(refusals)} table(s) refused the transaction")
        self.refusals = refusals


class _Lost(Exception):
    """An UPDATE of the transaction matched nothing: roll it all back, then judge."""


class Transactions:
    def __init__(self, db: Db, commits_part: Commits) -> None:
        self.db = db
        self.commits = commits_part

    async def ratify(self, tx_id: str, request_sha256: str, rows: Sequence[CommitRow], *,
                     max_unbackfilled: int) -> tuple[TransactionRow, bool]:
        """Ratify every row of ``rows`` (distinct tables) or none, in one database transaction.

        Returns the transaction's row and True, or the row already ratified under ``tx_id`` and False (the
        caller compares its checksum). Raises TransactionRefused (each table's refusal), IdempotencyKeyReusedError
        (``tx_id`` is the key of a commit of one of these tables outside this transaction), TableNotFoundError,
        UnavailableError (the outcome is then unknown, as for a single commit).
        """
        ordered = sorted(rows, key=lambda r: r.table_id)
        for _attempt in range(3):
            now = now_ms()
            tx = TransactionRow(tx_id, request_sha256, tuple((r.table_id, r.version) for r in ordered), now)
            try:
                await self._run(tx, ordered, max_unbackfilled, now)
                return tx, True
            except _Lost:
                pass
            except IntegrityError:
                pass  # a racing duplicate of this transaction won, or the key is taken: see below
            except UnavailableError as e:
                if not self.db.dialect.deadlock(e):
                    raise
                continue  # (transactions over the same tables lock in one order; a deadlock is with another kind)
            prior = await self.replayed(tx_id)
            if prior is not None:
                return prior, False
            used = await self.key_used(tx_id, [r.table_id for r in ordered])
            if used:
                raise IdempotencyKeyReusedError(
                    f"idempotency key {tx_id} was already used for a commit of table(s) {', '.join(used)} outside "
                    "this transaction")
            refusals: dict[str, CommitFailedError] = {}
            for row in ordered:
                refused = await self.commits.refusal(row, max_unbackfilled)
                if refused is not None:
                    refusals[row.table_id] = refused
            if refusals:
                raise TransactionRefused(refusals)
            # nothing refuses it now: what refused it a moment ago has passed (a backlog drained): again
        raise UnavailableError(f"the tables of transaction {tx_id} changed three times while it was judged; retry")

    async def _run(self, tx: TransactionRow, ordered: Sequence[CommitRow], cap: int, now: int) -> None:
        async with self.db.tx() as conn:
            # One executemany: the UPDATEs run one after the other in table-id order (on PostgreSQL psycopg sends
            # them in one pipeline, one round trip); the rows they matched are summed.
            res = await conn.execute(_ratification(), [ratify_params(row, cap, now) for row in ordered])
            if res.rowcount != len(ordered):
                raise _Lost()  # (leaving the block rolls every UPDATE back)
            await conn.execute(commits.insert(), [commit_values(r) for r in ordered])
            await conn.execute(transactions.insert(), {
                "id": tx.id, "request_sha256": tx.request_sha256, "committed_at": tx.committed_at,
                "commits": [[t, v] for t, v in tx.commits]})

    # -- reads --------------------------------------------------------------------------------------

    async def get(self, tx_id: str) -> TransactionRow | None:
        return await self._get(tx_id, settle=False)

    async def replayed(self, tx_id: str) -> TransactionRow | None:
        """The transaction ratified under ``tx_id``; None when there is none. Either answer is settled first, on
        the connection that read it (as a single commit's replay, ``Commits.replay``: the earlier attempt's
        COMMIT may have been cut by the deadline, its rows not yet as durable as a fresh commit's)."""
        return await self._get(tx_id, settle=True)

    async def _get(self, tx_id: str, *, settle: bool) -> TransactionRow | None:
        async with self.db.tx(write=False, single=True) as conn:
            r = (await conn.execute(select(transactions).where(transactions.c.id == tx_id))).first()
            if settle:
                await self.db.dialect.settle(self.db, conn)
        return _transaction(r) if r is not None else None

    async def key_used(self, key: str, table_ids: Sequence[str]) -> list[str]:
        """The tables of ``table_ids`` that hold a commit with idempotency key ``key``, in table-id order."""
        c = commits.c
        stmt = (select(c.table_id).where(and_(c.idempotency_key == key, c.table_id.in_(list(table_ids))))
                .order_by(c.table_id))
        async with self.db.tx(write=False, single=True) as conn:
            return [str(t) for t, in (await conn.execute(stmt)).all()]

    async def tables(self, table_ids: Sequence[str]) -> dict[str, TableRow]:
        """The rows of the tables ``table_ids`` that exist (with their names), by id, in one read."""
        stmt = named_tables().where(owned_tables.c.table_id.in_(list(table_ids)))
        async with self.db.tx(write=False, single=True) as conn:
            return {t.table_id: t for t in map(table_of, (await conn.execute(stmt)).all())}

    async def snapshot(self, table_ids: Sequence[str]) -> dict[str, tuple[TableRow, list[CommitRow]]]:
        """Each table of ``table_ids`` that exists and its unpublished commits (ascending), read in ONE
        statement: as of one instant, so a transaction's commits are all in it or none."""
        async with self.db.tx(write=False, single=True) as conn:
            rows = (await conn.execute(_snapshot_statement(), {"p_ids": list(table_ids)})).all()
        out: dict[str, tuple[TableRow, list[CommitRow]]] = {}
        for r in rows:
            m = r._mapping
            got = out.get(m["table_id"])
            if got is None:
                got = out[m["table_id"]] = (table_of(r), [])
            if m["c_version"] is not None:
                got[1].append(CommitRow.of(m, "c_"))
        return out

    async def recent(self, limit: int = 20, table_id: str | None = None) -> list[TransactionRow]:
        """The newest ``limit`` transactions (of ``table_id`` only, when given: read from its commit rows'
        keys), newest first."""
        stmt = select(transactions)
        if table_id is not None:
            keys = select(commits.c.idempotency_key).where(commits.c.table_id == table_id)
            stmt = stmt.where(transactions.c.id.in_(keys))
        stmt = stmt.order_by(transactions.c.committed_at.desc(), transactions.c.id).limit(limit)
        async with self.db.tx(write=False, single=True) as conn:
            return [_transaction(r) for r in (await conn.execute(stmt)).all()]


def _transaction(r: Any) -> TransactionRow:
    m = r._mapping
    return TransactionRow(id=m["id"], request_sha256=m["request_sha256"],
                          commits=tuple((str(t), int(v)) for t, v in m["commits"]), committed_at=m["committed_at"])


@functools.cache
def _ratification() -> Any:
    return ratification(BOUND)


@functools.cache
def _snapshot_statement() -> Any:
    """The table rows named by ``p_ids`` outer-joined with their unpublished commits, built once."""
    on = and_(commits.c.table_id == owned_tables.c.table_id, commits.c.backfilled_at.is_(None))
    return (select(owned_tables, *[c.label("c_" + c.name) for c in commits.c])
            .select_from(owned_tables.outerjoin(commits, on))
            .where(owned_tables.c.table_id.in_(bindparam("p_ids", expanding=True)))
            .order_by(owned_tables.c.table_id, commits.c.version))


__all__ = ["TransactionRefused", "TransactionRow", "Transactions"]
