"""The log-storage seam: the only code that touches files.

Contract every backend keeps:

* ``put_if_absent`` is atomic: afterwards the object exists with exactly the given bytes, or the call
  raised ``FileExistsError`` and the object that was there is untouched. No reader ever sees a
  partially written object.
* A successful ``put_if_absent`` is durable (fsync on local disk; S3 acknowledges only stored objects).
* Every call is safe to run concurrently; none blocks the event loop.
* ``prepare`` + ``put_prepared`` is ``put_if_absent`` in two halves, for a write that may go ahead only once
  something else is decided (decision 62): whatever a backend can do before the name appears is done in
  ``prepare`` (local disk: the bytes in a hidden temporary file, synced), ``put_prepared`` makes the object
  appear as ``put_if_absent`` would, ``drop_prepared`` undoes ``prepare``. A backend that cannot split the
  write (S3) does it all in ``put_prepared``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

from client.contract.errors import InvalidArgumentError
from client.contract.layout import split_cloud


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    modification_time: int  # milliseconds since the epoch


@dataclass(frozen=True)
class Prepared:
    """A write of ``data`` to ``uri`` prepared by ``StorageBackend.prepare``; ``token`` is the backend's own."""

    uri: str
    data: bytes
    token: Any = None


class StorageBackend(abc.ABC):
    """Storage of one URI scheme."""

    scheme: str

    @abc.abstractmethod
    async def put_if_absent(self, uri: str, data: bytes) -> FileInfo:
        """Create ``uri`` with ``data``. Raises FileExistsError if it already exists, OSError on failure."""

    @abc.abstractmethod
    async def read(self, uri: str) -> bytes:
        """Whole content. Raises FileNotFoundError, OSError."""

    @abc.abstractmethod
    async def exists(self, uri: str) -> bool:
        """Whether ``uri`` exists. Raises OSError."""

    @abc.abstractmethod
    async def delete(self, uri: str) -> None:
        """Remove ``uri``; a missing file is not an error. Raises OSError."""

    @abc.abstractmethod
    async def list_names(self, dir_uri: str) -> list[str]:
        """Names (not paths) of the files directly in ``dir_uri``; empty if it does not exist."""

    @abc.abstractmethod
    async def info(self, uri: str) -> FileInfo:
        """Size and modification time. Raises FileNotFoundError."""

    async def prepare(self, uri: str, data: bytes) -> Prepared:
        """The first half of ``put_if_absent(uri, data)``: nothing is visible at ``uri`` yet. Raises OSError."""
        return Prepared(uri, data)

    async def put_prepared(self, prepared: Prepared) -> FileInfo:
        """The second half: as ``put_if_absent(prepared.uri, prepared.data)``, the prepared write used up
        either way. Raises FileExistsError, OSError."""
        return await self.put_if_absent(prepared.uri, prepared.data)

    async def drop_prepared(self, prepared: Prepared) -> None:  # noqa: B027 - optional: most backends prepare nothing
        """Undo ``prepare`` (the write is not wanted). Never raises for a prepared write already used or dropped."""

    async def replace(self, uri: str, data: bytes) -> None:
        """Create or overwrite ``uri`` with ``data`` atomically (readers see the old or the new bytes; used only
        for hints such as ``_last_checkpoint``). Raises OSError."""
        raise NotImplementedError(f"{type(self).__name__} cannot overwrite files")

    async def walk(self, dir_uri: str) -> list[FileInfo]:
        """Every file below ``dir_uri`` at any depth (``path`` is its URI); empty if it does not exist. Raises OSError."""
        raise NotImplementedError(f"{type(self).__name__} cannot list recursively")

    async def check_container(self, location: str) -> None:  # noqa: B027 - local disk: folders are made as needed
        """Refuse a table ``location`` this backend cannot hold, before anything is registered there: its bucket
        (Azure: container) does not exist, or it names a storage account other than the owner's. Raises
        InvalidArgumentError (400: the location is wrong, nothing changed), OSError when storage fails."""

    async def ping(self) -> None:  # noqa: B027 - optional: most backends need no check
        """Check that the backend is reachable (readiness). Raises OSError."""

    async def close(self) -> None:  # noqa: B027 - optional: most backends hold nothing
        """Release connections and threads."""


def no_such_container(location: str) -> InvalidArgumentError:
    """The one refusal of a table location whose bucket or container does not exist (every cloud backend's
    ``check_container``)."""
    place = split_cloud(location)
    if place.scheme == "abfss":
        what = f"Azure container {place.bucket!r} does not exist in storage account {place.account!r}"
    else:
        what = f"{'S3' if place.scheme == 's3' else 'Cloud Storage'} bucket {place.bucket!r} does not exist"
    return InvalidArgumentError(f"location {location}: {what}; create it first (the owner never creates buckets "
                                "or containers)")
