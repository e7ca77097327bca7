"""`commit-owner tables reconcile`: the store adopts the versions published beyond its record (after a restore).

A store restored from an older backup records a table at version L while ``_delta_log`` holds
``<L+1>.json ... <top>.json``, published by this owner before the restore (the owner refuses commits to such a
table: ``coordinator/core/log_ahead.py``). Reconcile adopts them, or refuses and changes nothing:

* the table is live and accepting commits, and ``<L+1>.json`` exists (else: not ahead, nothing to adopt);
* the published versions above L form one contiguous chain ``L+1 .. top`` (a gap is refused);
* each is a valid Delta commit: UTF-8 NDJSON actions (``client.contract.delta_log.parse_actions``), the first one a
  ``commitInfo`` with an integer ``inCommitTimestamp`` (owned tables require one), increasing along the chain from
  the table's last one;
* every version the store ratified and has not marked published (above its backfilled version) is published with
  the bytes it ratified (else it is a fenced table's problem, not a restore's).

The ``<v>.json`` is the record: a staged file in the commit folder whose checksum the store never recorded is not
trusted. Its name is kept in the adopted row only when its bytes are ``<v>.json``'s own (read and compared);
otherwise a fresh staged copy of ``<v>.json`` is written, so every ratified version has its staged file as readers
handed the row expect (decision 67). Then one database transaction (``store/adopt.py``) inserts the rows, already
published, and moves the table's latest and backfilled versions to ``top``, conditioned on the row as read: a
ratification or another reconcile meanwhile makes it change nothing (the copies it wrote are removed).
"""

from __future__ import annotations

import hashlib
from typing import Any

from client.contract.delta_log import parse_actions
from client.contract.errors import InvalidArgumentError, InvalidCommitError
from client.contract.layout import (
    commit_dir_uri,
    delta_file,
    delta_file_name,
    log_dir,
    parse_delta_file,
    parse_staged_file,
    random_uuid,
    staged_file,
    staged_file_name,
)
from coordinator.core.context import new_commit_row
from coordinator.ops.context import opened, resolve_table
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageBackend
from coordinator.store import CommitRow, TableRow


def commit_timestamp(data: bytes, version: int) -> int:
    """The ``inCommitTimestamp`` of ``<version>.json``'s bytes ``data``, a valid Delta commit of an owned table.
    Raises InvalidCommitError naming the file and what is wrong."""
    where = f"_delta_log/{delta_file_name(version)}"
    try:
        actions = parse_actions(data)
    except UnicodeDecodeError as e:
        raise InvalidCommitError(f"{where} is not a Delta commit: not UTF-8 (byte {e.start})") from None
    except InvalidArgumentError as e:
        raise InvalidCommitError(f"{where} is not a Delta commit: {e.message}") from None
    info = actions[0].get("commitInfo") if actions else None
    if not isinstance(info, dict):
        raise InvalidCommitError(f"{where} is not a commit of an owned table: its first action is not a commitInfo")
    ict = info.get("inCommitTimestamp")
    if type(ict) is not int:
        raise InvalidCommitError(f"{where} is not a commit of an owned table: its commitInfo has no integer "
                                 "inCommitTimestamp")
    return ict


async def _staged_copies(backend: StorageBackend, t: TableRow) -> dict[int, list[str]]:
    """The staged files of the table's commit folder, by version."""
    out: dict[int, list[str]] = {}
    for name in await backend.list_names(commit_dir_uri(t.location, t.commit_dir)):
        parsed = parse_staged_file(name)
        if parsed is not None and parsed.version > t.latest_version:
            out.setdefault(parsed.version, []).append(name)
    return out


async def _same_bytes(backend: StorageBackend, t: TableRow, names: list[str], data: bytes) -> str | None:
    """The first of the staged files ``names`` that holds exactly ``data``."""
    for name in sorted(names):
        try:
            if await backend.read(staged_file(t.location, t.commit_dir, name)) == data:
                return name
        except FileNotFoundError:
            continue
    return None


async def _check_unpublished(backend: StorageBackend, t: TableRow, rows: list[CommitRow], published: set[int]) -> None:
    """Every version the store ratified above its backfilled one is published with the bytes it ratified."""
    for r in rows:
        path = delta_file(t.location, r.version)
        if r.version not in published:
            raise InvalidArgumentError(f"version {r.version}, ratified in the store, is not published while later "
                                       "versions are: a gap in the log; nothing changed")
        if hashlib.sha256(await backend.read(path)).hexdigest() != r.content_sha256:
            raise InvalidArgumentError(f"_delta_log/{delta_file_name(r.version)} differs from the commit the store "
                                       f"ratified as version {r.version}: a foreign file, not a restore "
                                       "(docs/runbook.md, a fenced table); nothing changed")


async def reconcile_table(settings: Settings, ref: str) -> dict[str, Any]:
    """Adopt the versions published beyond the store's record of table ``ref`` (the module says how). Returns what
    was adopted. Raises InvalidArgumentError (not ahead, a gap, not live), InvalidCommitError (a file that is not a
    valid commit), TableNotFoundError, UnavailableError; every refusal changes nothing."""
    async with opened(settings) as (store, storage):
        t = await resolve_table(store, ref)
        if t.dropped_at is not None or not t.accepting:
            raise InvalidArgumentError(f"table {t.table_id} is {t.status}, not accepting commits: reconcile adopts "
                                       "versions of a live table only; nothing changed")
        backend = storage.for_uri(t.location)
        published = {v for v in map(parse_delta_file, await backend.list_names(log_dir(t.location))) if v is not None}
        beyond = sorted(v for v in published if v > t.latest_version)
        if not beyond or beyond[0] != t.latest_version + 1:
            what = (f"the log's newest version is {max(published, default=-1)}" if not beyond else
                    f"_delta_log/{delta_file_name(t.latest_version + 1)} is missing below {beyond[0]}")
            raise InvalidArgumentError(f"table {t.table_id} is not ahead of the store: it records version "
                                       f"{t.latest_version} and {what}; nothing to adopt, nothing changed")
        top = beyond[-1]
        missing = sorted(set(range(t.latest_version + 1, top + 1)) - published)
        if missing:
            raise InvalidArgumentError(f"the published versions above {t.latest_version} have a gap: "
                                       f"{', '.join(delta_file_name(v) for v in missing[:10])} missing below "
                                       f"{delta_file_name(top)}; nothing changed")
        await _check_unpublished(backend, t, await store.unbackfilled(t.table_id), published)
        copies = await _staged_copies(backend, t)
        last = t.last_commit_timestamp
        chain: list[tuple[int, bytes, int, str | None]] = []  # version, bytes, timestamp, staged file holding them
        for v in range(t.latest_version + 1, top + 1):
            data = await backend.read(delta_file(t.location, v))
            try:
                ict = commit_timestamp(data, v)
            except InvalidCommitError as e:
                raise InvalidCommitError(f"{e.message}; nothing changed") from None
            if last is not None and ict <= last:
                raise InvalidCommitError(f"_delta_log/{delta_file_name(v)}: inCommitTimestamp {ict} is not above the "
                                         f"previous version's {last}: not this owner's chain; nothing changed")
            last = ict
            chain.append((v, data, ict, await _same_bytes(backend, t, copies.get(v, []), data)))
        written: list[str] = []
        rows = []
        for v, data, ict, name in chain:
            if name is None:  # no staged file holds these bytes: a copy of <v>.json, a name fresh for this attempt
                name = staged_file_name(v)
                path = staged_file(t.location, t.commit_dir, name)
                await backend.put_if_absent(path, data)
                written.append(path)
            rows.append(new_commit_row(t.table_id, v, data, file_name=name, uid=random_uuid(), commit_timestamp=ict,
                                       keeps_body=False))
        if not await store.adopt(t, rows):
            for path in written:
                await backend.delete(path)
            raise InvalidArgumentError(f"table {t.table_id} changed while being reconciled (a commit or another "
                                       "reconcile); nothing changed: look again")
        return {"tableId": t.table_id, "location": t.location, "adoptedFrom": t.latest_version + 1,
                "adoptedThrough": top, "adopted": len(rows), "stagedCopiesWritten": len(written),
                "previousLatestVersion": t.latest_version, "latestVersion": top, "latestBackfilledVersion": top}


__all__ = ["commit_timestamp", "reconcile_table"]
