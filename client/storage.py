"""The client's only access to table storage: list and read ``_delta_log``, publish a file put-if-absent.

fsspec is an optional import, loaded on first use; ``file://`` (and plain absolute paths) and ``s3://``
(s3fs; pass ``storage_options`` such as ``{"client_kwargs": {"endpoint_url": ...}}``) are supported.

Guarantees of :meth:`LogStorage.put_if_absent`: the file becomes visible whole or not at all, and of two
concurrent puts of one name exactly one succeeds. On local disk the bytes are written to a hidden
temporary file in the same folder and hard-linked to the final name (``link`` fails when the name
exists); on S3 the PUT carries ``If-None-Match: *``.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import InvalidArgumentError

_S3_SCHEMES = ("s3", "s3a", "s3n")


def normalize_location(location: str) -> str:
    """``/abs/path`` -> ``file:///abs/path``; ``s3a://`` -> ``s3://``; trailing slash dropped.

    Raises InvalidArgumentError for relative paths and other schemes.
    """
    loc = str(location).strip().rstrip("/")
    if loc.startswith("/"):
        loc = "file://" + os.path.normpath(loc)
    scheme, sep, rest = loc.partition("://")
    if not sep:
        raise InvalidArgumentError(f"location must be an absolute path, file:// or s3:// URI, got {location!r}")
    scheme = scheme.lower()
    if scheme in _S3_SCHEMES:
        if "/" not in rest or not rest.split("/", 1)[1]:
            raise InvalidArgumentError(f"s3 location needs a bucket and a prefix, got {location!r}")
        return "s3://" + rest
    if scheme == "file":
        if not rest.startswith("/"):
            raise InvalidArgumentError(f"file:// locations must be absolute, got {location!r}")
        return "file://" + os.path.normpath(rest)
    raise InvalidArgumentError(f"unsupported location scheme {scheme!r}: use file:// or s3://")


@dataclass(frozen=True)
class FileEntry:
    name: str
    size: int


class LogStorage:
    """The ``_delta_log`` folder of one table.

    :param location: table root (``file://``, absolute path or ``s3://``).
    :param storage_options: passed to fsspec (e.g. s3fs ``key``/``secret``/``client_kwargs``).
    """

    def __init__(self, location: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.location = normalize_location(location)
        self._options = dict(storage_options or {})
        self._fs: Any = None
        self.is_local = self.location.startswith("file://")

    @property
    def fs(self) -> Any:
        if self._fs is None:
            try:
                import fsspec
            except ImportError:  # pragma: no cover - depends on the environment
                raise ImportError("the snapshot reader and lifecycle need fsspec (and s3fs for s3://): "
                                  "pip install fsspec s3fs") from None
            protocol = "file" if self.is_local else "s3"
            self._fs = fsspec.filesystem(protocol, skip_instance_cache=True, **self._options)
        return self._fs

    def _path(self, rel: str) -> str:
        root = self.location[len("file://"):] if self.is_local else self.location[len("s3://"):]
        return f"{root}/_delta_log/{rel}" if rel else f"{root}/_delta_log"

    def uri(self, rel: str) -> str:
        """The full URI of ``_delta_log/<rel>``."""
        return f"{self.location}/_delta_log/{rel}"

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
        return self.fs.cat_file(self._path(rel))

    def read_uri(self, uri: str) -> bytes:
        """The bytes of a file named by a full URI or an absolute path inside this table. Raises FileNotFoundError."""
        if uri.startswith("file://"):
            uri = uri[len("file://"):]
        elif uri.split("://", 1)[0] in _S3_SCHEMES:
            uri = uri.split("://", 1)[1]
        return self.fs.cat_file(uri)

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
            folder = os.path.dirname(path)
            os.makedirs(folder, exist_ok=True)
            tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
            with open(tmp, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
            finally:
                os.unlink(tmp)
            return
        try:
            self.fs.pipe_file(path, data, mode="create")
        except FileExistsError:
            raise
        except OSError as e:
            if _is_precondition_failure(e):
                raise FileExistsError(f"{self.uri(rel)} already exists") from e
            raise
        finally:
            self.fs.invalidate_cache()


def _is_precondition_failure(e: BaseException) -> bool:
    """True when an S3 error says the conditional PUT lost (412 PreconditionFailed or 409 ConditionalRequestConflict)."""
    seen: BaseException | None = e
    while seen is not None:
        text = f"{type(seen).__name__} {seen}"
        if "PreconditionFailed" in text or "ConditionalRequestConflict" in text or "412" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False
