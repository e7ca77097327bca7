"""Writer-staged commits (catalog-managed tables): the writer writes ``_delta_log/_staged_commits/<v>.<uuid>.json``
itself and asks the owner to ratify it, reporting in the same request what it published and the metadata it
set. The Unity Catalog and Delta REST APIs both come through ``WriterStaged.writer_commit``, in its one order.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any

from client.contract.errors import (
    CommitOwnerError,
    InvalidArgumentError,
    InvalidCommitError,
    PayloadTooLargeError,
)
from client.contract.layout import STAGED_COMMITS_DIR, parse_staged_file, staged_file
from coordinator.core.context import check_version
from coordinator.core.ratify import Ratifier
from coordinator.store import TableRow

log = logging.getLogger("commit_owner.service")


@dataclasses.dataclass(frozen=True)
class StagedCommit:
    """A commit the writer staged as ``_delta_log/_staged_commits/<file_name>``, ``file_size`` bytes long."""

    version: int
    file_name: str
    file_size: int


class WriterStaged:
    """The catalog APIs' commit path, over the ratifier."""

    def __init__(self, ratifier: Ratifier) -> None:
        self.ratifier = ratifier
        self.ctx = ratifier.ctx

    async def writer_commit(self, table: TableRow, *, published: int | None = None, commit: StagedCommit | None = None,
                            metadata: dict[str, Any] | None = None) -> None:
        """A catalog API's commit request, in its one order: first what the writer published (that frees the
        backlog; its failed check only logged when a commit rides on the same request), then its commit, then
        the metadata it reports (``columns``, ``properties``, ``comment``: advisory, the log rules)."""
        if published is not None:
            await self.report_published(table.table_id, published, quiet=commit is not None, known=table)
        if commit is not None:
            await self.commit_staged(table, commit.version, commit.file_name, commit.file_size)
        if metadata is not None:
            await self.ctx.names.update_metadata(table.table_id, **metadata)

    async def commit_staged(self, table: TableRow, version: int, file_name: str, file_size: int) -> None:
        """Ratify the file the writer staged as ``_delta_log/_staged_commits/<file_name>`` as ``version``.

        The file is read and checked like an owner-written body (its size must be ``file_size``). The same
        version with the same file name again is a no-op, even once the staged file was cleaned up. Raises
        InvalidArgumentError / InvalidCommitError (bad name, missing or wrong-sized file), PayloadTooLargeError,
        UnavailableError, and the CommitFailedError family of ``commit``.
        """
        if table.commit_dir != STAGED_COMMITS_DIR:
            raise InvalidArgumentError(f"table {table.table_id} does not take writer-staged commits (its "
                                       "commits are written by the owner: use /api/v1)")
        staged = parse_staged_file(file_name)
        if staged is None:
            raise InvalidArgumentError(f"file name {file_name[:80]!r} is not one path segment of the form "
                                       "<version:020>.<uuid>.json")
        if staged.version != version:
            raise InvalidArgumentError(f"file name {file_name[:80]!r} names version {staged.version}, not {version}")
        uid = staged.uid
        try:
            canonical = str(uuid.UUID(uid))
        except ValueError:
            canonical = ""
        if canonical != uid:
            raise InvalidArgumentError("the uuid of a staged file name must be a UUID written in lower case")
        check_version(version)
        limit = self.ctx.settings.max_body_bytes
        if file_size > limit:
            raise PayloadTooLargeError(f"file size {file_size} is above the largest accepted commit "
                                       f"({limit} bytes, --max-body-bytes)")
        path = staged_file(table.location, STAGED_COMMITS_DIR, file_name)
        storage = self.ctx.storage.for_uri(path)
        try:
            stat = await storage.info(path)
            data = await storage.read(path) if stat.size == file_size else b""
        except FileNotFoundError:
            if await self.ctx.store.replayed(table.table_id, version, file_name) is not None:
                return  # the retry of a commit already ratified (its staged file was cleaned up since)
            raise InvalidCommitError(f"the staged commit file _delta_log/{STAGED_COMMITS_DIR}/{file_name} does not "
                                     "exist: write it before committing") from None
        if stat.size != file_size or len(data) != file_size:
            raise InvalidCommitError(f"the staged commit file {file_name} holds {max(stat.size, len(data))} "
                                     f"bytes, not the {file_size} bytes sent")
        await self.ratifier.commit(table.table_id, version, data, uid, staged=dataclasses.replace(stat, size=len(data)))

    async def report_published(self, table_id: str, version: int, *, quiet: bool = False,
                               known: TableRow | None = None) -> None:
        """The writer published every version <= ``version``: check (identical bytes) and record it.

        Raises InvalidArgumentError beyond the latest ratified version; with ``quiet`` a failed check is
        logged rather than raised (the writer's new commit rides on the same request). ``known``: the table
        as the caller read it moments ago; versions only grow, so it answers without a read when it can."""
        table = known
        if table is None or version > table.latest_version:
            table = await self.ctx.store.get_table(table_id)
        if version > table.latest_version:
            raise InvalidArgumentError(f"the published version {version} is beyond the latest committed "
                                       f"version {table.latest_version}")
        if version <= table.latest_backfilled_version:
            return
        try:
            await self.ctx.publisher.backfill(table_id, version, wait_seconds=5.0)
        except CommitOwnerError as e:
            if not quiet:
                raise
            log.warning("table %s: recording the writer's backfill through %d failed: %s", table_id, version,
                        e.message)


__all__ = ["StagedCommit", "WriterStaged"]
