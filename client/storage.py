"""The client's only access to table storage: list and read ``_delta_log``, publish a file put-if-absent, write
and delete the data files of a write (:class:`DataFiles`).

fsspec is an optional import, loaded on first use; ``file://`` (and plain absolute paths), ``s3://`` (s3fs; pass
``storage_options`` such as ``{"client_kwargs": {"endpoint_url": ...}}``), ``abfss://`` (adlfs: ``account_name``
with ``account_key``, ``sas_token`` or ``connection_string``) and ``gs://`` (gcsfs: ``token``, ``project``,
``endpoint_url``) are supported: :func:`cloud_filesystem` makes the one filesystem of each.

Guarantees of :meth:`LogStorage.put_if_absent`: the file becomes visible whole or not at all, and of two
concurrent puts of one name exactly one succeeds. On local disk the bytes are written to a hidden
temporary file in the same folder and hard-linked to the final name (``link`` fails when the name
exists); on S3 the PUT carries ``If-None-Match: *``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from client.contract.layout import LOG_DIR, is_local, lost_put_if_absent, normalize_location, object_key

#: Temporary files of a local put-if-absent start with this; listings skip them.
TMP_PREFIX = ".tmp-"


#: The fsspec package each cloud scheme needs, named when it is missing.
_PACKAGES = {"file": "fsspec", "s3": "s3fs", "abfss": "adlfs", "gs": "gcsfs"}


def cloud_filesystem(location: str, storage_options: Mapping[str, Any] | None = None) -> Any:
    """A fresh (uncached) fsspec filesystem for the canonical ``location``'s scheme; paths on it are
    :func:`client.contract.layout.object_key` (or the OS path on local disk)."""
    scheme = location.split("://", 1)[0]
    options = dict(storage_options or {})
    try:
        if scheme == "file":
            import fsspec

            return fsspec.filesystem("file", skip_instance_cache=True, **options)
        if scheme == "s3":
            import s3fs

            return s3fs.S3FileSystem(skip_instance_cache=True, **options)
        if scheme == "abfss":
            import adlfs

            return adlfs.AzureBlobFileSystem(skip_instance_cache=True, **options)
        if scheme == "gs":
            # gcsfs.core's class itself: the package's default class asks a gRPC service for every new
            # bucket's type first, which an emulator (and a closed network) answers only after a minute
            from gcsfs.core import GCSFileSystem

            return GCSFileSystem(skip_instance_cache=True, **options)
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(f"{scheme}:// tables need the {_PACKAGES[scheme]} package: pip install "
                          f"{_PACKAGES[scheme]}") from None
    raise ValueError(f"no filesystem for scheme {scheme!r}")


@dataclass(frozen=True)
class FileEntry:
    name: str
    size: int


class LogStorage:
    """The ``_delta_log`` folder of one table.

    :param location: table root (``file://``, absolute path, ``s3://``, ``abfss://`` or ``gs://``).
    :param storage_options: passed to fsspec (e.g. s3fs ``key``/``secret``/``client_kwargs``).
    """

    def __init__(self, location: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.location = normalize_location(location)
        self._options = dict(storage_options or {})
        self._fs: Any = None
        self.is_local = is_local(self.location)

    @property
    def fs(self) -> Any:
        if self._fs is None:
            self._fs = cloud_filesystem(self.location, self._options)
        return self._fs

    def _path(self, rel: str) -> str:
        root = self.location[len("file://"):] if self.is_local else object_key(self.location)
        return f"{root}/{LOG_DIR}/{rel}" if rel else f"{root}/{LOG_DIR}"

    def uri(self, rel: str) -> str:
        """The full URI of ``_delta_log/<rel>``."""
        return f"{self.location}/{LOG_DIR}/{rel}"

    def list(self, folder: str = "") -> list[FileEntry]:
        """Files directly in ``_delta_log`` (or ``_delta_log/<folder>``); empty when the folder does not exist."""
        path = self._path(folder)
        self.fs.invalidate_cache()
        try:
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            if e.get("type") == "directory":
                continue
            name = str(e["name"]).rstrip("/").rsplit("/", 1)[-1]
            out.append(FileEntry(name=name, size=int(e.get("size") or 0)))
        return out

    def read(self, rel: str) -> bytes:
        """The bytes of ``_delta_log/<rel>``. Raises FileNotFoundError."""
        return bytes(self.fs.cat_file(self._path(rel)))

    def read_uri(self, uri: str) -> bytes:
        """The bytes of a file named by a full URI or an absolute path inside this table. Raises FileNotFoundError."""
        if uri.startswith("file://"):
            uri = uri[len("file://"):]
        elif "://" in uri:
            uri = object_key(normalize_location(uri))
        return bytes(self.fs.cat_file(uri))

    def exists(self, rel: str) -> bool:
        self.fs.invalidate_cache()
        return bool(self.fs.exists(self._path(rel)))

    def local_path(self, rel: str) -> str:
        """OS path of ``_delta_log/<rel>`` (local tables only); for tools that open files themselves."""
        assert self.is_local
        return self._path(rel)

    def put_if_absent(self, rel: str, data: bytes) -> None:
        """Publish ``data`` as ``_delta_log/<rel>`` unless that file exists.

        Raises FileExistsError when the name is taken (someone else won), OSError on other failures.
        """
        path = self._path(rel)
        if self.is_local:
            put_if_absent_local(path, data)
            return
        try:
            self.fs.pipe_file(path, data, mode="create")
        except OSError as e:
            if lost_put_if_absent(e):
                raise FileExistsError(f"{self.uri(rel)} already exists") from e
            raise
        finally:
            self.fs.invalidate_cache()


class DataFiles:
    """The data files of one table (everything outside ``_delta_log``): put whole files, delete a write's folder.

    :param location: table root (``file://``, absolute path or a cloud URI).
    :param storage_options: passed to fsspec, as for :class:`LogStorage`.
    """

    def __init__(self, location: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self._log = LogStorage(location, storage_options)
        self.location = self._log.location

    def _path(self, rel: str) -> str:
        if not rel or rel.startswith("/") or rel.split("/")[0] in ("", ".", "..", LOG_DIR):
            raise ValueError(f"not a data file path inside {self.location}: {rel!r}")
        root = self.location[len("file://"):] if self._log.is_local else object_key(self.location)
        return f"{root}/{rel}"

    def put(self, rel: str, data: bytes) -> None:
        """Write ``data`` as ``<table>/<rel>`` (creating folders on local disk). Raises OSError."""
        path = self._path(rel)
        fs = self._log.fs
        if self._log.is_local:
            fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        fs.pipe_file(path, data)

    def read(self, path: str) -> bytes:
        """The bytes of a data file: ``path`` relative to the table root (already URI-decoded), or a full URI
        inside the table's storage. Raises FileNotFoundError."""
        if "://" in path:
            return self._log.read_uri(path)
        return bytes(self._log.fs.cat_file(self._path(path)))

    def remove_folder(self, rel: str) -> None:
        """Delete ``<table>/<rel>/`` and everything under it; nothing when it does not exist."""
        path = self._path(rel)
        fs = self._log.fs
        fs.invalidate_cache()
        if fs.exists(path):
            fs.rm(path, recursive=True)

    def exists(self, rel: str) -> bool:
        self._log.fs.invalidate_cache()
        return bool(self._log.fs.exists(self._path(rel)))


def _fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def put_if_absent_local(path: str, data: bytes, *, durable: bool = True) -> os.stat_result:
    """Create the local file ``path`` with ``data`` unless it exists; the one local put-if-absent.

    The bytes go to a hidden temporary file in the same folder (fsynced when ``durable``), which is then
    hard-linked to the final name: ``link`` fails with FileExistsError when the name is taken and otherwise
    makes the whole file appear at once. The folder is fsynced too, so the new name survives a crash.
    Returns the file's stat. Raises FileExistsError, OSError.
    """
    tmp, st, made_folder = prepare_local(path, data, durable=durable)
    name_local(tmp, path, made_folder, durable=durable)
    return st


def prepare_local(path: str, data: bytes, *, durable: bool = True) -> tuple[str, os.stat_result, bool]:
    """The first half of ``put_if_absent_local``: the bytes in a hidden temporary file beside ``path``
    (fsynced when ``durable``). Returns the temporary file, its stat and whether the folder was made.
    Raises OSError (nothing is left behind)."""
    folder = os.path.dirname(path)
    made_folder = not os.path.isdir(folder)
    if made_folder:
        os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f"{TMP_PREFIX}{os.urandom(16).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    return tmp, st, made_folder


def name_local(tmp: str, path: str, made_folder: bool = False, *, durable: bool = True) -> None:
    """The second half of ``put_if_absent_local``: ``tmp`` (from ``prepare_local``) appears as ``path``, all at
    once, unless ``path`` exists (FileExistsError); ``tmp`` is gone either way. Raises FileExistsError, OSError."""
    folder = os.path.dirname(path)
    try:
        os.link(tmp, path)
    finally:
        os.unlink(tmp)
    if durable:
        _fsync_dir(folder)
        if made_folder:
            _fsync_dir(os.path.dirname(folder))
