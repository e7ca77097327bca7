"""Google Cloud Storage log storage (``gs://<bucket>/<path>``) on gcsfs's asyncio API (``gcsfs.core.GCSFileSystem``,
the plain JSON-API filesystem: ``gcsfs.GCSFileSystem`` first asks a gRPC service about every bucket).

put-if-absent is an upload with ``ifGenerationMatch=0``: the service answers 412 when the object exists and stores
nothing. It is always ONE request (``uploadType=multipart``, the precondition in its query), whatever the size: a
commit, or a checkpoint of many MiB. gcsfs would switch to a resumable upload from 50 MiB on; it sends the
precondition on that path too (on the POST that opens the session; seen on the wire, gcsfs 2026.10), and Cloud
Storage applies it when the last chunk completes the object, but fake-gcs-server ignores it there and overwrites
(tried: a second resumable create of one name succeeded), so that path cannot be proven here and is not taken.
A single request may carry up to 5 TiB; a failed one is retried whole by the caller. ``replace`` (the
``_last_checkpoint`` hint, no precondition) keeps gcsfs's own choice.
"""

from __future__ import annotations

import asyncio
import errno
import time
from typing import Any

from client.contract.layout import split_cloud
from coordinator.runtime.settings import Settings
from coordinator.storage.base import FileInfo, no_such_container
from coordinator.storage.object_store import FsspecObjectStorage

NO_CREDENTIALS = ("no Google Cloud credentials: set COMMIT_OWNER_GCS_CREDENTIALS_FILE (a service-account key file) or "
                  "COMMIT_OWNER_GCS_TOKEN, or GOOGLE_APPLICATION_CREDENTIALS, or run with a service account "
                  "(gcloud auth application-default login, or on Google Cloud)")


def credentials_source(settings: Settings) -> Any:
    """What gcsfs signs with: the key file, the token, ``"anon"`` against an emulator endpoint with neither, else
    None (gcsfs looks in the environment: GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata server)."""
    if settings.gcs_credentials_file:
        return settings.gcs_credentials_file
    if settings.gcs_token:
        return _token_credentials(settings.gcs_token)
    if settings.gcs_endpoint:
        return "anon"
    return None


def _token_credentials(token: str) -> Any:
    from google.oauth2.credentials import Credentials

    return Credentials(token)


def credentials_found(settings: Settings) -> bool:
    """Whether the settings or Google's application-default chain give the owner credentials for gs://."""
    if credentials_source(settings) is not None:
        return True
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        google.auth.default()
    except DefaultCredentialsError:
        return False
    return True


class GcsStorage(FsspecObjectStorage):
    scheme = "gs"
    store = "Cloud Storage"

    def __init__(self, settings: Settings) -> None:
        timeout = settings.request_timeout_seconds if settings.request_timeout_seconds > 0 else 30.0
        self._kwargs: dict[str, Any] = {
            "asynchronous": True,
            "skip_instance_cache": True,
            # No listing cache: a listing must never answer for an object written since (by anyone).
            "use_listings_cache": False,
            "requests_timeout": timeout,
            "project": settings.gcs_project or None,
            "token": credentials_source(settings),
        }
        if settings.gcs_endpoint:
            self._kwargs["endpoint_url"] = settings.gcs_endpoint.rstrip("/")
        self._fs: Any = None
        self._making = asyncio.Lock()

    async def _get(self) -> Any:
        if self._fs is None:
            async with self._making:  # concurrent first calls share one filesystem and one HTTP session
                if self._fs is None:
                    import warnings

                    from gcsfs.core import GCSFileSystem  # imported only when a gs:// table is used

                    with warnings.catch_warnings():  # "GCS project not set": the owner never lists or makes buckets
                        warnings.simplefilter("ignore")
                        fs = GCSFileSystem(**self._kwargs)
                    await fs._set_session()
                    self._fs = fs
        return self._fs

    async def put_if_absent(self, uri: str, data: bytes) -> FileInfo:
        fs = await self._get()
        try:
            # chunksize above the size: gcsfs's one-request upload, never its resumable one (see above)
            await fs._pipe_file(self._path(uri), data, mode="create", chunksize=len(data) + 1)
        except FileExistsError:  # 412: gcsfs says so itself
            raise FileExistsError(errno.EEXIST, "object exists", uri) from None
        except Exception as e:
            if _status(e) == 412:
                raise FileExistsError(errno.EEXIST, "object exists", uri) from None
            raise self._error(e) from e
        return FileInfo(path=uri, size=len(data), modification_time=int(time.time() * 1000))

    async def exists(self, uri: str) -> bool:
        try:
            await self._object(uri)
            return True
        except FileNotFoundError:
            return False

    async def _object(self, uri: str) -> dict[str, Any]:
        """The object's metadata (one GET of the object, never a listing). Raises FileNotFoundError, OSError."""
        fs = await self._get()
        p = split_cloud(uri)
        try:
            out: dict[str, Any] = await fs._call("GET", "b/{}/o/{}", p.bucket, p.key, json_out=True)
            return out
        except FileNotFoundError:
            raise
        except Exception as e:
            raise self._error(e) from e

    async def info(self, uri: str) -> FileInfo:
        d = await self._object(uri)
        return FileInfo(path=uri, size=int(d.get("size", 0)), modification_time=self._mtime(d))

    def _mtime(self, entry: dict[str, Any]) -> int:
        return _millis(entry.get("updated"))

    async def check_container(self, location: str) -> None:
        fs = await self._get()
        place = split_cloud(location)
        try:  # one object of the table's prefix, as a listing asks: a bucket's own metadata needs storage.buckets.get,
            # a right the owner otherwise never uses (roles/storage.objectAdmin lacks it)
            await fs._call("GET", "b/{}/o", place.bucket, prefix=f"{place.key}/", maxResults=1, json_out=True)
        except FileNotFoundError:
            raise no_such_container(location) from None
        except Exception as e:
            raise self._error(e) from e

    async def ping(self) -> None:
        fs = await self._get()
        try:  # the project's first bucket: any answer but a failure means the service is there
            await fs._call("GET", "b", project=self._kwargs["project"] or "", maxResults=1, json_out=True)
        except Exception as e:
            # Signed and answered, only not allowed to list buckets (or no project given): reachable.
            if _status(e) in (400, 403) or isinstance(e, ValueError) or str(e).startswith("Forbidden"):
                return
            raise self._error(e) from e

    async def close(self) -> None:
        fs, self._fs = self._fs, None
        if fs is not None and fs._session is not None:
            await fs._session.close()


def _status(e: BaseException) -> int | None:
    code = getattr(e, "code", None)
    return code if isinstance(code, int) else None


def _millis(stamp: Any) -> int:
    from datetime import datetime

    if isinstance(stamp, str) and stamp:
        try:
            return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            pass
    return int(time.time() * 1000)

