"""What the object stores reached through an asynchronous fsspec filesystem (S3 through s3fs, Google Cloud Storage
through gcsfs) do alike: read, delete, list, overwrite and walk by ``<bucket>/<key>`` paths, a missing object
being FileNotFoundError and every other failure an OSError naming the store. Each backend keeps what differs:
making its filesystem, its conditional create, an object's metadata and its bucket check.
"""

from __future__ import annotations

import abc
import errno
from typing import Any

from client.contract.layout import object_key
from coordinator.storage.base import FileInfo, StorageBackend


def as_oserror(e: BaseException, store: str) -> OSError:
    """``e`` as the OSError the seam promises (an OSError as it is; anything else EIO naming ``store``)."""
    if isinstance(e, OSError):
        return e
    return OSError(errno.EIO, f"{store} error: {type(e).__name__}: {e}")


class FsspecObjectStorage(StorageBackend):
    """A backend over an asynchronous fsspec filesystem of one object store."""

    #: The store's name in error messages.
    store = ""

    @abc.abstractmethod
    async def _get(self) -> Any:
        """The filesystem, made on first use."""

    @abc.abstractmethod
    def _mtime(self, entry: dict[str, Any]) -> int:
        """The modification time (ms) of one entry of a listing."""

    def _error(self, e: BaseException) -> OSError:
        return as_oserror(e, self.store)

    @staticmethod
    def _path(uri: str) -> str:
        return object_key(uri)

    async def read(self, uri: str) -> bytes:
        fs = await self._get()
        try:
            return bytes(await fs._cat_file(self._path(uri)))
        except FileNotFoundError:
            raise
        except Exception as e:
            raise self._error(e) from e

    async def delete(self, uri: str) -> None:
        fs = await self._get()
        try:
            await fs._rm_file(self._path(uri))
        except FileNotFoundError:
            pass
        except Exception as e:
            raise self._error(e) from e

    async def list_names(self, dir_uri: str) -> list[str]:
        fs = await self._get()
        try:
            entries = await fs._ls(self._path(dir_uri).rstrip("/"), detail=True, refresh=True)
        except FileNotFoundError:
            return []
        except Exception as e:
            raise self._error(e) from e
        return [e["name"].rsplit("/", 1)[-1] for e in entries if e.get("type") == "file"]

    async def replace(self, uri: str, data: bytes) -> None:
        fs = await self._get()
        try:  # an object is replaced whole, at once
            await fs._pipe_file(self._path(uri), data)
        except Exception as e:
            raise self._error(e) from e

    async def walk(self, dir_uri: str) -> list[FileInfo]:
        fs = await self._get()
        try:
            found = await fs._find(self._path(dir_uri).rstrip("/"), detail=True, withdirs=False)
        except FileNotFoundError:
            return []
        except Exception as e:
            raise self._error(e) from e
        return [FileInfo(path=f"{self.scheme}://{key}", size=int(d.get("size", 0)), modification_time=self._mtime(d))
                for key, d in found.items() if d.get("type", "file") == "file"]
