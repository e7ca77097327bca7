"""Operator commands that work straight against the database and storage (or a service's API)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from client.contract.commits import commit_json
from client.contract.errors import (
    CommitOwnerError,
    ForeignCommitFileError,
    InvalidArgumentError,
    OwnershipPublishedError,
    TableNotFoundError,
    UnavailableError,
)
from client.contract.layout import commit_dir_uri, delta_file, delta_file_name, log_dir, parse_delta_file, staged_file
from client.contract.tables import table_json
from coordinator.ops.context import iso_time, opened, resolve_table
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter
from coordinator.store import TableRow


async def list_tables(settings: Settings) -> list[dict[str, Any]]:
    async with opened(settings) as (store, _):
        return [table_json(t) for t in await store.list_tables()]


async def show_table(settings: Settings, ref: str, limit: int = 20) -> dict[str, Any]:
    async with opened(settings) as (store, _):
        t = await resolve_table(store, ref)
        out = table_json(t)
        out["backfillError"] = t.backfill_error
        out["lastCommitTime"] = iso_time(t.last_commit_at)
        out["droppedTime"] = iso_time(t.dropped_at)
        out["recentCommits"] = [
            {**commit_json(c, staged_file(t.location, t.commit_dir, c.file_name)), "backfilled": c.backfilled_at is not None,
             "ratifiedAt": c.ratified_at, "idempotencyKey": c.idempotency_key}
            for c in await store.recent_commits(t.table_id, limit)
        ]
        return out


async def run_backfill(
    settings: Settings, *, table: str | None, to_version: int | None, endpoint: str | None, token: str | None,
    progress: bool,
) -> dict[str, Any]:
    """Backfill one table (``table``) or all tables behind; returns a summary with failures."""
    if endpoint:  # the client library is synchronous: its calls run in a thread
        return await asyncio.to_thread(_backfill_via_api, endpoint, token, table, to_version, progress)
    return await _backfill_direct(settings, table, to_version, progress)


async def _backfill_direct(settings: Settings, ref: str | None, to_version: int | None, progress: bool) -> dict[str, Any]:
    from tqdm import tqdm

    from backfill.worker import Backfiller

    summary: dict[str, Any] = {"tables_done": 0, "versions_published": 0, "failures": [], "tables": []}
    async with opened(settings) as (store, storage):
        worker = Backfiller(store, storage, settings, background=False)
        if ref is not None:
            try:
                targets = [await resolve_table(store, ref)]
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
    except UnavailableError:
        raise  # the owner cannot be reached: one line naming its URL (exit code 2), not a table's failure
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


async def run_janitor(settings: Settings, *, dry_run: bool) -> dict[str, Any]:
    """One janitor pass straight against the database and storage (``commit-owner janitor``)."""
    from coordinator.ops.janitor import Janitor, safe_min_age

    async with opened(settings) as (store, storage):
        from coordinator.store.names import NameStore

        rep = await Janitor(store, storage, settings, names=NameStore(store)).run_once(dry_run=dry_run)
        return {**rep.to_json(), "minAgeSeconds": safe_min_age(settings)}


def _published_versions(names: list[str]) -> list[int]:
    """The versions of the published commit files (``<v>.json``) among the names of ``_delta_log``."""
    return sorted(v for v in map(parse_delta_file, names) if v is not None)


async def _owners_files(storage: StorageRouter, t: TableRow) -> dict[str, Any]:
    """What the owner wrote for ``t`` that stays in storage when its registration is forgotten."""

    backend = storage.for_uri(t.location)
    published = [v for v in _published_versions(await backend.list_names(log_dir(t.location)))
                 if t.base_version < v <= t.latest_backfilled_version]
    staged = await backend.list_names(commit_dir_uri(t.location, t.commit_dir))
    return {"publishedVersions": published, "stagedFiles": len(staged)}


async def forget_table(settings: Settings, ref: str, *, force: bool, confirm: Callable[[str], bool]) -> dict[str, Any]:
    """Drop a table's registration (and its commit rows) while no reader can use its log as owned by us.

    The log is usable when ``<base>.json`` (version 0 of a created table, r+1 of a taken-over one) is
    published and names this table id, or (once log cleanup removed it) a checkpoint of a version the
    owner published above it is (coordinator.core.registration.log_used_as_owned). Then only ``force``
    with ``confirm(question)`` answering True forgets it. Files in storage are never touched. Raises
    OwnershipPublishedError (refused, nothing changed), TableNotFoundError, UnavailableError.
    """
    from coordinator.core.registration import log_used_as_owned

    async with opened(settings) as (store, storage):
        t = await resolve_table(store, ref)
        usable = await log_used_as_owned(storage.for_uri(t.location), t.location, t.base_version,
                                         t.latest_backfilled_version, t.table_id)
        if usable:
            why = (f"the log of {t.location} is published as owned by table {t.table_id} (version "
                   f"{t.base_version} names it, or a checkpoint of a later version the owner published; {t.status}, latest "
                   f"version {t.reported_latest}): readers use this log as owned")
            if not force:
                raise OwnershipPublishedError(f"{why}; hand it back with `commit-owner tables release` "
                                              "or, knowing that, forget it with --force; nothing changed")
            if not confirm(f"{why}. Forget its registration and {max(0, t.latest_version - t.base_version)} "
                           "ratified commit(s) anyway?"):
                raise OwnershipPublishedError("not confirmed; nothing changed")
        files = await _owners_files(storage, t)
        if not await store.forget_with_commits(t.table_id, t.latest_version):
            raise OwnershipPublishedError(f"table {t.table_id} took a commit while being checked; nothing "
                                          "changed: look again")
        return {"tableId": t.table_id, "location": t.location, "status": t.status, "forced": usable,
                "forgottenCommits": max(0, t.latest_version - t.base_version), **files}


async def unfence_table(settings: Settings, ref: str) -> dict[str, Any]:
    """Accept commits again on a FENCED table once its log agrees with the owner, then publish its backlog.

    The log agrees when every published ``<v>.json`` above the backfilled version is byte for byte the
    commit the owner ratified as v (so none lies above the owner's latest version). Raises
    ForeignCommitFileError naming the files that still disagree, InvalidArgumentError (not fenced),
    TableNotFoundError, UnavailableError; a refusal changes nothing.
    """
    import hashlib

    from backfill.worker import Backfiller


    async with opened(settings) as (store, storage):
        t = await resolve_table(store, ref)
        if t.status != "FENCED":
            raise InvalidArgumentError(f"table {t.table_id} is {t.status}, not FENCED: nothing to unfence")
        backend = storage.for_uri(t.location)
        ratified = {r.version: r for r in await store.unbackfilled(t.table_id)}
        problems = []
        for v in _published_versions(await backend.list_names(log_dir(t.location))):
            if v <= t.latest_backfilled_version:
                continue
            row = ratified.get(v)
            if row is None:
                problems.append(f"_delta_log/{delta_file_name(v)} lies above the owner's latest version "
                                f"{t.latest_version}")
            elif hashlib.sha256(await backend.read(delta_file(t.location, v))).hexdigest() != row.content_sha256:
                problems.append(f"_delta_log/{delta_file_name(v)} differs from the commit the owner ratified as "
                                f"version {v}")
        if problems:
            raise ForeignCommitFileError(f"{t.location} stays fenced: {'; '.join(problems)}. Save and move "
                                         "the foreign file(s) aside first (docs/runbook.md); nothing changed")
        if not await store.unfence(t.table_id, t.latest_version):
            raise InvalidArgumentError(f"table {t.table_id} changed while being checked; nothing changed: "
                                       "look again")
        out: dict[str, Any] = {"tableId": t.table_id, "location": t.location, "status": "ACTIVE"}
        try:
            after = await Backfiller(store, storage, settings, background=False).backfill(t.table_id)
            out["backfilledThrough"] = after.latest_backfilled_version
        except CommitOwnerError as e:  # unfenced all the same: the service's backfiller retries
            out["backfillError"] = e.message
        return out


__all__ = ["list_tables", "show_table", "run_backfill", "run_janitor", "TableNotFoundError", "forget_table",
           "unfence_table"]
