"""What every operator command opens and how it names a table: the database and storage of one command
(``opened``), a table by id, name or location (``resolve_table``), and times as operators read them."""

from __future__ import annotations

import contextlib
import datetime
import os
import uuid
from collections.abc import AsyncIterator

from client.contract.errors import InvalidArgumentError, NotFoundError, TableNotFoundError
from client.contract.layout import normalize_location
from coordinator.core.catalog import split_full_name
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter, Wrap
from coordinator.store import OwnershipStore, TableRow, open_engine
from coordinator.store.names import NameStore


@contextlib.asynccontextmanager
async def opened(settings: Settings, *,
                 storage_inner: Wrap | None = None) -> AsyncIterator[tuple[OwnershipStore, StorageRouter]]:
    """The ownership store and the log storage of one command, closed when the block ends (``storage_inner``:
    ``StorageRouter``'s ``inner``)."""
    async with open_engine(settings.database_url, pool_size=2, timeout=settings.request_timeout_seconds) as engine:
        storage = StorageRouter(settings, inner=storage_inner)
        try:
            yield OwnershipStore(engine), storage
        finally:
            await storage.close()


async def resolve_table(store: OwnershipStore, ref: str) -> TableRow:
    """The table an operator names: a table id, a ``catalog.schema.table`` name, or a location (an absolute or
    relative path, a file:// or s3:// URI). Raises TableNotFoundError, InvalidArgumentError."""
    try:
        return await store.get_table(str(uuid.UUID(ref)))
    except ValueError:
        pass
    if "/" not in ref and ":" not in ref and ref.count(".") == 2:
        try:
            return (await NameStore(store).get_named(*split_full_name(ref, 3)))[0]
        except NotFoundError as e:
            raise TableNotFoundError(f"{e.message} (by name; a table id or location works too)") from None
    try:
        return await store.find_table(normalize_location(ref if ":" in ref else os.path.abspath(ref)))
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{ref[:120]!r} names no table: give a table id, a catalog.schema.table name or a "
                                   f"location ({e.message})") from None


def iso_time(ms: int | None) -> str | None:
    """Milliseconds since the epoch as an ISO-8601 UTC time (None stays None)."""
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


__all__ = ["iso_time", "opened", "resolve_table"]
