"""S3 log storage (``s3://``) on s3fs's asyncio API, so no thread is spent per request.

put-if-absent is a conditional PUT (``If-None-Match: *``): S3 answers 412 when the key exists and
stores nothing. Credentials and endpoint come only from the service's settings or environment.
"""

from __future__ import annotations

import errno
import time
from typing import Any

from client.contract.layout import lost_put_if_absent, split_cloud
from coordinator.storage.base import FileInfo, no_such_container
from coordinator.storage.object_store import FsspecObjectStorage

NO_CREDENTIALS = ("no S3 credentials: set COMMIT_OWNER_S3_ACCESS_KEY_ID and COMMIT_OWNER_S3_SECRET_ACCESS_KEY (or "
                  "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an instance or task role)")


async def credentials_found() -> bool:
    """Whether the AWS credential chain (environment, shared files and profile, container or instance role)
    yields credentials: what an S3Storage without a key of its own signs with."""
    from aiobotocore.session import AioSession

    return await AioSession().get_credentials() is not None


class S3Storage(FsspecObjectStorage):
    scheme = "s3"
    store = "S3"

    def __init__(
        self,
        *,
        endpoint_url: str = "",
        region: str = "us-east-1",
        key: str = "",
        secret: str = "",
        timeout: float = 30.0,
    ) -> None:
        self._kwargs: dict[str, Any] = {
            "asynchronous": True,
            "skip_instance_cache": True,
            # No listing cache: a listing must never answer for an object written since (by anyone).
            "use_listings_cache": False,
            "config_kwargs": {
                "connect_timeout": min(timeout, 10.0),
                "read_timeout": timeout,
                "retries": {"max_attempts": 2, "mode": "standard"},
            },
            "client_kwargs": {"region_name": region},
        }
        if endpoint_url:
            self._kwargs["endpoint_url"] = endpoint_url
        if key:
            self._kwargs["key"] = key
            self._kwargs["secret"] = secret
        self._fs: Any = None
        self._session: Any = None

    async def _get(self) -> Any:
        if self._fs is None:
            import s3fs  # imported only when an s3:// table is used

            fs = s3fs.S3FileSystem(**self._kwargs)
            self._session = await fs.set_session()
            self._fs = fs
        return self._fs

    async def put_if_absent(self, uri: str, data: bytes) -> FileInfo:
        fs = await self._get()
        try:
            await fs._pipe_file(self._path(uri), data, mode="create")
        except Exception as e:  # s3fs maps 412 to FileExistsError or to a generic OSError
            if lost_put_if_absent(e):
                raise FileExistsError(errno.EEXIST, "object exists", uri) from None
            raise self._error(e) from e
        return FileInfo(path=uri, size=len(data), modification_time=int(time.time() * 1000))

    async def exists(self, uri: str) -> bool:
        fs = await self._get()
        try:
            await fs._info(self._path(uri))
            return True
        except FileNotFoundError:
            return False
        except Exception as e:
            raise self._error(e) from e

    async def info(self, uri: str) -> FileInfo:
        fs = await self._get()
        try:
            d = await fs._info(self._path(uri), refresh=True)
        except FileNotFoundError:
            raise
        except Exception as e:
            raise self._error(e) from e
        return FileInfo(path=uri, size=int(d.get("size", 0)), modification_time=self._mtime(d))

    def _mtime(self, entry: dict[str, Any]) -> int:
        lm = entry.get("LastModified")
        return int(lm.timestamp() * 1000) if lm is not None else int(time.time() * 1000)

    async def check_container(self, location: str) -> None:
        fs = await self._get()
        try:
            await fs._call_s3("head_bucket", Bucket=split_cloud(location).bucket)
        except FileNotFoundError:
            raise no_such_container(location) from None
        except Exception as e:
            raise self._error(e) from e

    async def ping(self) -> None:
        fs = await self._get()
        try:
            await fs._call_s3("list_buckets")
        except Exception as e:
            raise self._error(e) from e

    async def close(self) -> None:
        fs, self._fs = self._fs, None
        if fs is not None:
            s3 = getattr(fs, "_s3", None)
            if s3 is not None:
                await s3.__aexit__(None, None, None)

