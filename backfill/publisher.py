"""Publishing ratified commits of one table, in ascending order, put-if-absent.

Rules (docs/backfill.md):

* version v is published only after v-1: the loop walks the unbackfilled rows in order and stops at
  the first failure, so ``<v+1>.json`` never exists without ``<v>.json``;
* "already exists with the same bytes" is success (a client or another worker got there first);
* already exists with other bytes: someone wrote the log without the owner. The table is fenced
  (no more commits), the fact recorded, and the file never overwritten;
* bookkeeping happens once per run, after the copies, in one transaction: a crash between a copy and
  the bookkeeping is harmless because the next run finds identical bytes.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from client.contract.errors import ForeignCommitFileError, UnavailableError
from client.contract.layout import LOG_DIR, delta_file, delta_file_name, staged_file
from coordinator.storage import Prepared, StorageRouter
from coordinator.storage.staged import commit_bytes
from coordinator.store import CommitRow, OwnershipStore, TableRow

log = logging.getLogger("commit_owner.backfill")


@dataclass
class BackfillResult:
    table_id: str
    published: list[int] = field(default_factory=list)
    already_present: list[int] = field(default_factory=list)
    backfilled_through: int = -1


async def backfill_table(
    store: OwnershipStore,
    storage: StorageRouter,
    table: TableRow,
    up_to: int | None = None,
    *,
    cached: Callable[[str, int], bytes | None] | None = None,
    on_version: Callable[[int], None] | None = None,
    on_row: Callable[[CommitRow], None] | None = None,
    rows: list[CommitRow] | None = None,
    mark: Callable[[str, int], Awaitable[None]] | None = None,
    prepared: Prepared | None = None,
) -> BackfillResult:
    """Publish every unbackfilled commit of ``table`` with version <= ``up_to`` (all when None).

    Raises ForeignCommitFileError (table fenced), UnavailableError (storage or database down; what was
    published before the failure is recorded first). ``mark`` records the published versions (default:
    ``store.mark_backfilled`` at once; the background backfiller defers it, decision 44). ``prepared``: the
    write of one version's ``<v>.json``, prepared while it was ratified (decision 62); used for that version,
    dropped when the run does not get that far.
    """
    result = BackfillResult(table.table_id, backfilled_through=table.latest_backfilled_version)
    if rows is None:  # else the caller read them in the same statement as ``table``
        rows = await store.unbackfilled(table.table_id, up_to, settle=True)  # published from: settled
    done = table.latest_backfilled_version
    try:
        for row in rows:
            if row.version <= done:
                continue  # bookkeeping lag: already published
            if row.version != done + 1:
                raise UnavailableError(
                    f"backfill of table {table.table_id} found version {row.version} after {done}: waiting for the gap"
                )
            data = cached(table.table_id, row.version) if cached else None
            if data is None:
                data = await _ratified_bytes(storage, table, row)
            await _check_ratified(store, table, row, data)
            target = delta_file(table.location, row.version)
            backend = storage.for_uri(target)
            try:
                if prepared is not None and prepared.uri == target:
                    ahead: Prepared = prepared
                    prepared = None  # used up, whatever the outcome
                    await backend.put_prepared(ahead)
                else:
                    await backend.put_if_absent(target, data)
                result.published.append(row.version)
            except FileExistsError:
                existing = await _read(storage, target)
                if existing != data:
                    reason = (
                        f"_delta_log/{delta_file_name(row.version)} exists with content the owner did not ratify "
                        "(written around the owner); the table is fenced and the file left untouched"
                    )
                    log.error("FOREIGN COMMIT FILE in table %s at %s: %s", table.table_id, table.location, reason)
                    await store.set_not_accepting(table.table_id, "FENCED", reason)
                    await store.record_backfill_error(table.table_id, reason)
                    raise ForeignCommitFileError(reason, latest_table_version=table.reported_latest) from None
                result.already_present.append(row.version)
            done = row.version
            if on_version:
                on_version(row.version)
            if on_row:
                on_row(row)
    finally:
        if prepared is not None:
            await storage.drop_prepared(prepared)
        if done > table.latest_backfilled_version:
            await (mark or store.mark_backfilled)(table.table_id, done)
        result.backfilled_through = done
    return result


async def _check_ratified(store: OwnershipStore, table: TableRow, row: CommitRow, data: bytes) -> None:
    """Refuse to publish bytes other than the ones ratified as ``row``: fence the table and raise.

    A writer-staged file (catalog-managed tables) lies where the table's vended credentials can write, so
    the same credential could overwrite it after the owner ratified it. The SHA-256 kept at ratification is
    the judge: other bytes are never published, the table stops taking commits until an operator restores
    the ratified bytes and unfences it (docs/decisions.md, staged-file overwrite).
    """
    if hashlib.sha256(data).hexdigest() == row.content_sha256:
        return
    reason = (f"{LOG_DIR}/{table.commit_dir}/{row.file_name} of version {row.version} no longer holds the bytes the owner "
              f"ratified (SHA-256 {row.content_sha256[:12]}..., {row.file_size} bytes; found {len(data)} bytes): "
              "overwritten after ratification; not published, the table is fenced")
    log.error("STAGED COMMIT FILE CHANGED in table %s at %s: %s", table.table_id, table.location, reason)
    await store.set_not_accepting(table.table_id, "FENCED", reason)
    await store.record_backfill_error(table.table_id, reason)
    raise ForeignCommitFileError(reason, latest_table_version=table.reported_latest)


async def _ratified_bytes(storage: StorageRouter, table: TableRow, row: CommitRow) -> bytes:
    """The bytes of ``row``: from its row while it keeps them (decision 43; its staged file is made sure of
    first, so a published version always has both files), else from its staged file."""
    if row.body is None:
        return await _read(storage, staged_file(table.location, table.commit_dir, row.file_name))
    return await commit_bytes(storage, table.location, table.commit_dir, row)


async def _read(storage: StorageRouter, uri: str, missing: str | None = None) -> bytes:
    """The file's bytes. Raises UnavailableError, saying ``missing`` (or naming the file) when it is not there."""
    try:
        return await storage.for_uri(uri).read(uri)
    except FileNotFoundError:
        raise UnavailableError(missing or f"commit file missing: {uri.rsplit('/', 2)[-2:]}") from None


async def repair_hole(store: OwnershipStore, storage: StorageRouter, table: TableRow, from_version: int) -> list[int]:
    """Re-publish already-backfilled versions >= ``from_version`` whose ``<v>.json`` went missing.

    Uses the kept commit rows and their staged files (every ratified commit has one, decision 67); stops at the
    first version that is present. A version whose staged file was cleaned up too is reported, not repaired.
    Returns the versions re-published.
    """
    fixed: list[int] = []
    v = max(from_version, table.base_version + 1)
    while v <= table.latest_backfilled_version:
        target = delta_file(table.location, v)
        backend = storage.for_uri(target)
        if await backend.exists(target):
            break
        row = await store.get_commit(table.table_id, v)
        if row is None:
            break
        data = await _read(storage, staged_file(table.location, table.commit_dir, row.file_name), missing=(
            f"_delta_log/{delta_file_name(v)} of published version {v} is missing, and so is its staged file (it was "
            "cleaned up): restore the file from a backup"))
        await _check_ratified(store, table, row, data)
        try:
            await backend.put_if_absent(target, data)
            fixed.append(v)
        except FileExistsError:
            pass
        v += 1
    return fixed
