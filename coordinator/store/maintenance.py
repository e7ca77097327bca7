"""The record of what the owner's maintenance did to each table (decision 77): one row per step that did
something or failed, written by `commit-owner maintain`, `optimize` and `vacuum`; read by the table page and
by the maintain worker's policy (when a table was last vacuumed).

Rows are kept per table and kind up to ``KEEP`` (the worker prunes after each table's pass), so a worker
running every minute for years leaves a table of bounded size.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, delete, func, select

from client.contract.errors import CommitOwnerError
from coordinator.store.db import Db
from coordinator.store.rows import MaintenanceRun, now_ms
from coordinator.store.schema import maintenance_runs

log = logging.getLogger("commit_owner.maintain")

#: The kinds of step, in the order a pass runs them.
KINDS = ("checkpoint", "log_cleanup", "optimize", "vacuum")
#: Rows kept per table and kind.
KEEP = 50


class MaintenanceLog:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def record(self, table_id: str, kind: str, outcome: str, *, trigger: str, started_at: int,
                     figures: Mapping[str, Any] | None = None, message: str | None = None) -> MaintenanceRun:
        """Remember one step (finished now). Raises UnavailableError."""
        if kind not in KINDS or outcome not in ("done", "failed"):
            raise ValueError(f"unknown maintenance step {kind!r} / {outcome!r}")
        run = MaintenanceRun(table_id=table_id, kind=kind, outcome=outcome, trigger=trigger, started_at=started_at,
                             finished_at=max(now_ms(), started_at), figures=dict(figures or {}),
                             message=None if message is None else message[:2000])
        async with self.db.tx(single=True) as conn:
            await conn.execute(maintenance_runs.insert().values(id=str(uuid.uuid4()), **run.__dict__))
        return run

    async def note(self, table_id: str, kind: str, outcome: str, *, trigger: str, started_at: int,
                   figures: Mapping[str, Any] | None = None, message: str | None = None) -> None:
        """``record``, for a step that happened whatever the record says: a database failure is logged, not raised."""
        try:
            await self.record(table_id, kind, outcome, trigger=trigger, started_at=started_at, figures=figures,
                              message=message)
        except CommitOwnerError as e:
            log.warning("table %s: recording its %s step failed: %s", table_id, kind, e)

    async def recent(self, table_id: str, limit: int = 20) -> list[MaintenanceRun]:
        """The table's newest steps, newest first."""
        c = maintenance_runs.c
        stmt = (select(c.table_id, c.kind, c.outcome, c.trigger, c.started_at, c.finished_at, c.figures, c.message)
                .where(c.table_id == table_id).order_by(c.finished_at.desc(), c.started_at.desc()).limit(limit))
        async with self.db.tx(write=False, single=True) as conn:
            return [MaintenanceRun(**r._mapping) for r in (await conn.execute(stmt)).all()]

    async def newest(self, table_id: str, kind: str) -> MaintenanceRun | None:
        """The table's newest step of ``kind``, or None."""
        c = maintenance_runs.c
        stmt = (select(c.table_id, c.kind, c.outcome, c.trigger, c.started_at, c.finished_at, c.figures, c.message)
                .where(and_(c.table_id == table_id, c.kind == kind))
                .order_by(c.finished_at.desc(), c.started_at.desc()).limit(1))
        async with self.db.tx(write=False, single=True) as conn:
            r = (await conn.execute(stmt)).first()
        return None if r is None else MaintenanceRun(**r._mapping)

    async def last_done(self, table_id: str, kind: str) -> int | None:
        """When the table's newest successful step of ``kind`` finished (ms), or None."""
        c = maintenance_runs.c
        stmt = select(func.max(c.finished_at)).where(and_(c.table_id == table_id, c.kind == kind, c.outcome == "done"))
        async with self.db.tx(write=False, single=True) as conn:
            value = (await conn.execute(stmt)).scalar()
        return None if value is None else int(value)

    async def prune(self, table_id: str, keep: int = KEEP) -> int:
        """Delete the table's rows beyond the newest ``keep`` of each kind; returns how many went."""
        c = maintenance_runs.c
        gone = 0
        async with self.db.tx(single=True) as conn:
            for kind in KINDS:
                cutoff = (await conn.execute(
                    select(c.finished_at).where(and_(c.table_id == table_id, c.kind == kind))
                    .order_by(c.finished_at.desc()).offset(keep - 1).limit(1))).scalar()
                if cutoff is None:
                    continue
                res = await conn.execute(delete(maintenance_runs).where(
                    and_(c.table_id == table_id, c.kind == kind, c.finished_at < cutoff)))
                gone += res.rowcount or 0
        return gone


__all__ = ["KEEP", "KINDS", "MaintenanceLog", "MaintenanceRun"]
