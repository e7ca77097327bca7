"""Expiry of staging reservations (``POST /staging-tables``) never turned into a table.

A reservation holds a table id and a location ``<managed root>/<id>``; a writer may have written files
there (version 0, data) and then never created the table. Once a reservation is older than
``staging_expiry_seconds`` (0: never), it is removed, and then the files under its location, only when
that is safe: the location still has the reservation's own shape under the current managed root and no
registered table (dropped ones included) lies at, above or below it. Files are removed after the row, so a
late ``POST /tables`` for that location is refused (no such staging table) rather than registering a table
whose files are going away. Run by the service's janitor and by ``commit-owner staging clean``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from client.contract.errors import CommitOwnerError
from coordinator.ops.context import opened
from coordinator.runtime.settings import Settings
from coordinator.security.roots import parse_root
from coordinator.storage import StorageRouter
from coordinator.store import OwnershipStore
from coordinator.store.names import NameStore
from coordinator.store.rows import StagingRow

log = logging.getLogger("commit_owner.janitor")


@dataclass
class StagingReport:
    expired: list[dict[str, Any]] = field(default_factory=list)
    files_removed: int = 0
    errors: int = 0
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"expired": self.expired[:1000], "reservationsExpired": len(self.expired),
                "filesRemoved": self.files_removed, "errors": self.errors, "dryRun": self.dry_run}


def reservation_json(row: StagingRow, now: int, expiry_ms: int) -> dict[str, Any]:
    return {"id": row.id, "name": f"{row.catalog_name}.{row.schema_name}.{row.name}", "location": row.location,
            "createdAt": row.created_at, "ageSeconds": (now - row.created_at) // 1000,
            "expiresAt": row.created_at + expiry_ms if expiry_ms > 0 else None}


def _why_files_stay(row: StagingRow, settings: Settings, near: bool) -> str | None:
    """None when the files under the reservation's location may go, else why they stay."""
    try:
        root = parse_root(settings.managed_location).uri
    except (CommitOwnerError, ValueError):
        return "no managed location configured"
    if row.location != f"{root}/{row.id}":
        return f"the location is not {root}/{row.id} (the managed location changed since)"
    if near:
        return "a registered table lies at, above or below the location"
    return None


async def expire_reservations(names: NameStore, store: OwnershipStore, storage: StorageRouter, settings: Settings,
                              *, dry_run: bool = False, now_ms: int | None = None) -> StagingReport:
    """Remove the reservations older than ``staging_expiry_seconds`` and, where safe, their files."""
    rep = StagingReport(dry_run=dry_run)
    expiry_ms = int(settings.staging_expiry_seconds * 1000)
    if expiry_ms <= 0:
        return rep
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - expiry_ms
    rows = await names.list_staging(created_before=cutoff)
    if not rows:
        return rep
    for row in rows:
        out = reservation_json(row, now, expiry_ms)
        why = _why_files_stay(row, settings, bool(await store.tables_near(row.location)))
        try:
            backend = storage.for_uri(row.location)
            files = [] if why else [f.path for f in await backend.walk(row.location)]
            out["files"] = len(files)
            out["filesKept"] = why
            if not dry_run:
                if not await names.expire_staging(row.id, cutoff):
                    continue  # turned into a table meanwhile
                for path in files:
                    await backend.delete(path)
                    rep.files_removed += 1
                log.info("staging reservation %s (%s) expired after %.0f s; %d file(s) removed%s", row.id,
                         out["name"], settings.staging_expiry_seconds, len(files), f"; files kept: {why}" if why else "")
        except (OSError, CommitOwnerError) as e:
            rep.errors += 1
            out["error"] = f"{type(e).__name__}: {e}"
            log.warning("staging reservation %s: cleanup failed, retried next round: %s", row.id, e)
        rep.expired.append(out)
    return rep


async def list_reservations(settings: Settings) -> list[dict[str, Any]]:
    """Every staging reservation with its age and when it expires (``commit-owner staging list``)."""
    async with opened(settings) as (store, _):
        now, expiry_ms = int(time.time() * 1000), int(settings.staging_expiry_seconds * 1000)
        return [reservation_json(r, now, expiry_ms) for r in await NameStore(store).list_staging()]


async def clean_reservations(settings: Settings, *, dry_run: bool) -> dict[str, Any]:
    """One expiry pass straight against the database and storage (``commit-owner staging clean``)."""
    async with opened(settings) as (store, storage):
        rep = await expire_reservations(NameStore(store), store, storage, settings, dry_run=dry_run)
        return {**rep.to_json(), "expirySeconds": settings.staging_expiry_seconds}
