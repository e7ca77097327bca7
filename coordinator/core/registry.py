"""Registration: a table's place in the owner (register, take over, forget, drop), the locations it may have,
and publishing a table's ratified commits on request."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from client.contract.errors import (
    CommitOwnerError,
    ForeignCommitFileError,
    InvalidArgumentError,
    LocationNotAllowedError,
    OwnershipPublishedError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnavailableError,
)
from client.contract.layout import STAGED_COMMITS_DIR, check_commit_dir, normalize_location
from coordinator.core.context import Context
from coordinator.core.log_metadata import newest_metadata
from coordinator.core.registration import check_log_matches, clear_dead_proposal, first_commit_names, newest_version
from coordinator.security.roots import check_allowed, check_local_log, parse_root
from coordinator.store import TableRow
from coordinator.store.rows import NameRow


class Registry:
    """The tables' registrations, over the store and the log storage."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def register_table(self, location: str, current_version: int, commit_dir: str | None, *,
                             name: NameRow | None = None, table_id: str | None = None,
                             log_version: int | None = None, staging_id: str | None = None) -> TableRow:
        """Register ``location``; the client writes ``current_version + 1`` itself.

        ``log_version`` is the newest version the log must hold now (default ``current_version``; a
        catalog-managed table's writer has written version 0 before registering at -1). With ``name``
        the table is named in the same transaction, and ``staging_id`` uses that reservation up.
        """
        loc = normalize_location(location)
        cdir = commit_dir or self.ctx.settings.commit_dir
        check_commit_dir(cdir)
        if isinstance(current_version, bool) or not isinstance(current_version, int) or current_version < -1:
            raise InvalidArgumentError("currentVersion must be an integer >= -1")
        check_allowed(loc, self.ctx.roots)
        check_local_log(loc, cdir, self.ctx.roots)
        storage = self.ctx.storage.for_uri(loc)
        await storage.check_container(loc)  # no such bucket, container or account: 400, nothing registered
        await check_log_matches(storage, loc, current_version if log_version is None else log_version)
        tid = table_id or str(uuid.uuid4())
        if name is not None and name.table_id != tid:
            name = dataclasses.replace(name, table_id=tid)
        try:
            row = await self.ctx.store.register(tid, loc, cdir, current_version, name=name, staging_id=staging_id)
        except TableAlreadyExistsError:
            if not await clear_dead_proposal(self.ctx.store, storage, loc):
                raise
            row = await self.ctx.store.register(tid, loc, cdir, current_version, name=name, staging_id=staging_id)
        self.ctx.log_ahead.registered(row.table_id)  # its log was just checked: nothing beyond the registration
        return row

    async def forget_table(self, table_id: str) -> None:
        """Drop a registration whose first commit never landed. Raises TableNotFoundError, OwnershipPublishedError."""
        table = await self.ctx.store.get_table(table_id)
        if await first_commit_names(self.ctx.storage.for_uri(table.location), table.location, table.base_version, table_id):
            raise OwnershipPublishedError(f"version {table.base_version} of {table.location} is published and names "
                                          "this owner: the table is owned; release it instead")
        if not await self.ctx.store.forget_registration(table_id):
            raise OwnershipPublishedError(f"table {table_id} already has commits ratified by the owner")
        self.ctx.forget(table_id)

    async def drop_table(self, table_id: str, name: str | None) -> TableRow:
        """DROP TABLE: publish every ratified commit still unpublished, then mark the table dropped and free its
        name in one transaction (decision 'DROP TABLE'). The table's files stay where they are.

        Raises TableNotFoundError (unknown or already dropped); ForeignCommitFileError for a FENCED table with
        unpublished commits (nothing changed); when publication fails, the backfiller's error (UnavailableError,
        ForeignCommitFileError) saying the drop was refused: the table is not dropped (versions published
        before the failure stay published)."""
        what = f"table {name or table_id}"
        for _ in range(5):  # commits ratified between the publication and the drop: publish those too
            table = await self.ctx.store.get_table(table_id)
            if table.dropped_at is not None:
                raise TableNotFoundError(f"{what} was already dropped")
            if table.unbackfilled and table.status == "FENCED":
                raise ForeignCommitFileError(
                    f"DROP of {what} refused, nothing changed: it is FENCED ({table.status_reason}) with ratified "
                    f"commits through version {table.latest_version} not published; repair it first "
                    "(docs/runbook.md: `commit-owner tables unfence`, or `tables forget`)",
                    latest_table_version=table.reported_latest)
            if table.unbackfilled:
                try:
                    await self.backfill(table_id, None, None)
                except CommitOwnerError as e:
                    e.message = (f"DROP of {what} refused, the table is not dropped: its ratified commits through "
                                 f"version {table.latest_version} must be published to _delta_log first, and that "
                                 f"failed: {e.message}")
                    e.args = (e.message,)
                    raise
            reason = f"dropped (DROP TABLE{' ' + name if name else ''}); its files stay"
            if await self.ctx.store.drop_table(table_id, name, reason):
                self.ctx.forget(table_id)
                return await self.ctx.store.get_table(table_id)
        raise UnavailableError(f"DROP of {what} refused, nothing changed: commits keep arriving; retry")

    def check_location(self, location: str) -> str:
        """``location`` normalized, once it lies under an allowed root. Raises LocationNotAllowedError."""
        loc = normalize_location(location)
        check_allowed(loc, self.ctx.roots)
        return loc

    def managed_root(self) -> str:
        """The canonical managed location; raises LocationNotAllowedError when no allowed root holds it."""
        root = parse_root(self.ctx.settings.managed_location).uri
        try:
            check_allowed(root + "/x", self.ctx.roots)
        except LocationNotAllowedError:
            raise LocationNotAllowedError(
                f"the managed location {root} lies outside every allowed root: set --managed-location "
                "under an --allow-location root") from None
        return root

    async def newest_version(self, location: str) -> int:
        """The newest version published in the log at ``location`` (-1: none). Raises UnavailableError."""
        newest, _ = await newest_version(self.ctx.storage.for_uri(location), location)
        return newest

    async def register_staged_create(self, location: str, staging_id: str, name: NameRow) -> TableRow:
        """Register a catalog-managed table the writer creates at a reserved location: it writes version 0
        itself (before this call, as delta-spark does, or right after it, as Sail 0.7 does) and the owner
        ratifies from version 1 on, in ``_staged_commits``."""
        loc = normalize_location(location)
        await self.ctx.storage.for_uri(loc).check_container(loc)  # before the log is even listed
        newest = await self.newest_version(loc)
        return await self.register_table(loc, -1, STAGED_COMMITS_DIR, name=name, table_id=staging_id,
                                         log_version=-1 if newest < 0 else 0, staging_id=staging_id)

    async def register_existing(self, location: str, name: NameRow) -> TableRow:
        """Register (take over) the Delta table at ``location`` at its newest published version."""
        loc = self.check_location(location)  # before the log is even listed
        await self.ctx.storage.for_uri(loc).check_container(loc)
        return await self.register_table(loc, await self.newest_version(loc), None, name=name)

    async def log_metadata(self, table: TableRow) -> dict[str, Any] | None:
        """The newest ``metaData`` action published in ``table``'s log (None: none found in its commit files).
        Raises UnavailableError."""
        return await newest_metadata(self.ctx.storage.for_uri(table.location), table.location)

    async def backfill(self, table_id: str, version: int | None, last_known_backfilled: int | None) -> TableRow:
        """Publish ratified commits through ``version`` (all when None) now; returns the table after it."""
        return await self.ctx.publisher.backfill(table_id, version, last_known_backfilled=last_known_backfilled)


__all__ = ["Registry"]
