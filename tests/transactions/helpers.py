"""What the transaction tests share: the request, and the whole state a refusal must leave unchanged."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy import select

from coordinator.store.schema import commits, owned_tables, transactions
from tests.inprocess import API, InProcess
from tests.security.conftest import compared
from tests.support import actions


def tx_body(*parts: tuple[str, int] | tuple[str, int, list[dict[str, Any]]]) -> dict[str, Any]:
    """``{"commits": [...]}`` of (table id, version[, actions]) parts (fresh actions when none are given)."""
    return {"commits": [{"tableId": p[0], "version": p[1], "actions": p[2] if len(p) > 2 else actions()}  # type: ignore[misc]
                        for p in parts]}


async def post_tx(s: InProcess, body: Any, key: str | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    import json

    return await s.call("POST", f"{API}/transactions", json.dumps(body).encode(), headers)


async def tables(s: InProcess, n: int) -> list[tuple[str, str]]:
    """``n`` new owned tables at version 0: (table id, location)."""
    return list(await asyncio.gather(*(s.create_table() for _ in range(n))))


async def settled(s: InProcess, ids: list[str]) -> None:
    """Every ratified commit of ``ids`` published, so that no background work changes them any more."""
    for t in ids:
        latest = (await s.get_commits(t))["latestTableVersion"]
        if latest > 0:
            await s.backfill_to(t, latest)


async def state(s: InProcess, made: list[tuple[str, str]]) -> tuple[Any, ...]:
    """The database rows of the tables (their row less the lease, every commit row), every transaction row,
    and every file under each table's location."""
    ids = [t for t, _ in made]
    async with s.store.db.tx(write=False) as conn:
        rows = (await conn.execute(select(*compared(owned_tables)).where(owned_tables.c.table_id.in_(ids))
                                   .order_by(owned_tables.c.table_id))).all()
        crows = (await conn.execute(select(commits).where(commits.c.table_id.in_(ids))
                                    .order_by(commits.c.table_id, commits.c.version))).all()
        txs = (await conn.execute(select(transactions).order_by(transactions.c.id))).all()
    files = [await asyncio.to_thread(s.backend.snapshot, loc) for _, loc in made]
    return [tuple(r) for r in rows], [tuple(r) for r in crows], [tuple(r) for r in txs], files


def new_key() -> str:
    return str(uuid.uuid4())
