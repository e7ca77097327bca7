"""Operator commands that work straight against the database and storage (or a service's API)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, AsyncIterator
import contextlib

from client.errors import CommitOwnerError, TableNotFoundError

from .settings import Settings
from .storage import StorageRouter
from .store import OwnershipStore, TableRow, check_schema, create_engine


@contextlib.asynccontextmanager
async def _open(settings: Settings) -> AsyncIterator[tuple[OwnershipStore, StorageRouter]]:
    engine = create_engine(settings.database_url, pool_size=2, timeout=settings.request_timeout_seconds)
    storage = StorageRouter(settings)
    try:
        await check_schema(engine)
        yield OwnershipStore(engine), storage
    finally:
        await storage.close()
        await engine.dispose()


async def _resolve(store: OwnershipStore, ref: str) -> TableRow:
    try:
        return await store.get_table(str(uuid.UUID(ref)))
    except ValueError:
        from .locations import normalize_location

        return await store.find_table(normalize_location(ref))


def iso_time(ms: int | None) -> str | None:
    """Milliseconds since the epoch as an ISO-8601 UTC time (None stays None)."""
    if ms is None:
        return None
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def list_tables(settings: Settings) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with _open(settings) as (store, _):
            return [t.to_json() for t in await store.list_tables()]

    return asyncio.run(go())


def show_table(settings: Settings, ref: str, limit: int = 20) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with _open(settings) as (store, _):
            t = await _resolve(store, ref)
            out = t.to_json()
            out["backfillError"] = t.backfill_error
            out["lastCommitTime"] = iso_time(t.last_commit_at)
            out["recentCommits"] = [
                {**c.to_json(t.location, t.commit_dir), "backfilled": c.backfilled_at is not None,
                 "ratifiedAt": c.ratified_at, "idempotencyKey": c.idempotency_key}
                for c in await store.recent_commits(t.table_id, limit)
            ]
            return out

    return asyncio.run(go())


def run_backfill(
    settings: Settings, *, table: str | None, to_version: int | None, endpoint: str | None, token: str | None,
    progress: bool,
) -> dict[str, Any]:
    """Backfill one table (``table``) or all tables behind; returns a summary with failures."""
    if endpoint:
        return _backfill_via_api(endpoint, token, table, to_version, progress)
    return asyncio.run(_backfill_direct(settings, table, to_version, progress))


async def _backfill_direct(settings: Settings, ref: str | None, to_version: int | None, progress: bool) -> dict[str, Any]:
    from tqdm import tqdm

    from backfill.worker import Backfiller

    summary: dict[str, Any] = {"tables_done": 0, "versions_published": 0, "failures": [], "tables": []}
    async with _open(settings) as (store, storage):
        worker = Backfiller(store, storage, settings, background=False)
        if ref is not None:
            try:
                targets = [await _resolve(store, ref)]
            except CommitOwnerError as e:
                summary["failures"].append({"table": ref, "reason": e.message})
                return summary
        else:
            targets = [await store.get_table(tid) for tid in await store.tables_behind(limit=1_000_000)]
        total = sum(max(0, (to_version if to_version is not None else t.latest_version) - t.latest_backfilled_version)
                    for t in targets)
        bar = tqdm(total=total, unit="version", desc="backfill", disable=not progress, leave=True)
        worker.on_result = lambda r: bar.update(len(r.published) + len(r.already_present))
        for t in targets:
            before = t.latest_backfilled_version
            try:
                after = await worker.backfill(t.table_id, to_version)
                summary["tables_done"] += 1
                summary["versions_published"] += max(0, after.latest_backfilled_version - before)
                summary["tables"].append({"table": t.location, "backfilledThrough": after.latest_backfilled_version})
            except CommitOwnerError as e:
                summary["failures"].append({"table": t.location, "reason": e.message})
        bar.close()
    return summary


def _backfill_via_api(endpoint: str, token: str | None, ref: str | None, to_version: int | None, progress: bool) -> dict[str, Any]:
    from tqdm import tqdm

    from client import CommitOwnerClient

    summary: dict[str, Any] = {"tables_done": 0, "versions_published": 0, "failures": [], "tables": []}
    c = CommitOwnerClient(endpoint, token=token)
    try:
        if ref is None:
            targets = [t for t in c.list_tables() if t.unbackfilled_commits > 0]
        else:
            try:
                targets = [c.get_table(str(uuid.UUID(ref)))]
            except ValueError:
                targets = [c.get_table(location=ref)]
    except CommitOwnerError as e:
        summary["failures"].append({"table": ref or "*", "reason": e.message})
        return summary
    for t in tqdm(targets, unit="table", desc="backfill", disable=not progress):
        target = to_version if to_version is not None else t.latest_table_version
        if target < 0:
            summary["tables_done"] += 1
            continue
        try:
            after = c.backfill_to_version(t.table_id, target)
            summary["tables_done"] += 1
            summary["versions_published"] += max(0, after.latest_backfilled_version - t.latest_backfilled_version)
            summary["tables"].append({"table": t.location, "backfilledThrough": after.latest_backfilled_version})
        except CommitOwnerError as e:
            summary["failures"].append({"table": t.location, "reason": e.message})
    return summary


def run_janitor(settings: Settings, *, dry_run: bool) -> dict[str, Any]:
    """One janitor pass straight against the database and storage (``commit-owner janitor``)."""
    from .janitor import Janitor, safe_min_age

    async def go() -> dict[str, Any]:
        async with _open(settings) as (store, storage):
            rep = await Janitor(store, storage, settings).run_once(dry_run=dry_run)
            return {**rep.to_json(), "minAgeSeconds": safe_min_age(settings)}

    return asyncio.run(go())


__all__ = ["list_tables", "show_table", "run_backfill", "run_janitor", "iso_time", "TableNotFoundError"]
