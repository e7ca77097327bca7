"""The ops view of multi-table transactions (`commit-owner transactions list`): which tables, which versions,
when; read from the ownership store (the database only, no running owner needed)."""

from __future__ import annotations

from typing import Any

from coordinator.ops.context import iso_time, opened, resolve_table
from coordinator.runtime.settings import Settings


async def list_transactions(settings: Settings, table: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
    """The newest ``limit`` transactions (of ``table`` only: an id, name or location), newest first, each with
    its tables (id, name, location) and versions. Raises TableNotFoundError, InvalidArgumentError."""

    async with opened(settings) as (store, _):
        table_id = (await resolve_table(store, table)).table_id if table is not None else None
        txs = await store.transactions.recent(limit, table_id)
        rows = await store.transactions.tables(sorted({t for tx in txs for t, _ in tx.commits}))
        out = []
        for tx in txs:
            out.append({
                **tx.to_json(), "committedTime": iso_time(tx.committed_at),
                "commits": [{"tableId": t, "version": v, "name": rows[t].label if t in rows else None,
                             "location": rows[t].location if t in rows else None} for t, v in tx.commits],
            })
        return out
