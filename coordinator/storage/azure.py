"""Azure log storage (``abfss://<container>@<account>.dfs.core.windows.net/<path>``) on azure-storage-blob's asyncio
client (``azure.storage.blob.aio``): no thread is spent per request.

The owner works on one storage account (``azure_account_name``, or the connection string's); a location naming
another account is refused. Requests go to the account's Blob endpoint (``azure_endpoint``, azurite's path-style
``http://127.0.0.1:<port>/<account>``, else ``https://<account>.blob.core.windows.net``): on an account with a
hierarchical namespace (ADLS Gen2) the Blob API reads and writes the same files the ``dfs`` endpoint shows.

put-if-absent is ``upload_blob(overwrite=False)``, a Put Blob with ``If-None-Match: *``: the service answers 409
``BlobAlreadyExists`` (or 412 ``ConditionNotMet`` when racing writers meet) and stores nothing. Payloads larger
than the SDK's single-put limit (64 MiB) are staged as blocks and made visible by one Put Block List carrying the
same condition, so a reader never sees part of an object either way.
"""

from __future__ import annotations

import errno
import re
from collections.abc import AsyncIterator
from typing import Any

from client.contract.errors import InvalidArgumentError
from client.contract.layout import AZURE_SUFFIX, CloudPlace, split_cloud
from coordinator.runtime.settings import Settings
from coordinator.storage.base import FileInfo, StorageBackend, no_such_container

NO_CREDENTIALS = ("no Azure credentials: set COMMIT_OWNER_AZURE_ACCOUNT_NAME with COMMIT_OWNER_AZURE_ACCOUNT_KEY or "
                  "COMMIT_OWNER_AZURE_SAS_TOKEN, or COMMIT_OWNER_AZURE_CONNECTION_STRING, or "
                  "COMMIT_OWNER_AZURE_USE_IDENTITY=true with COMMIT_OWNER_AZURE_ACCOUNT_NAME")
_ACCOUNT_IN_CONNECTION_STRING = re.compile(r"(?:^|;)\s*AccountName\s*=\s*([^;]+)", re.I)
#: What the service answers a put-if-absent whose name is taken (Put Blob, or Put Block List past 64 MiB).
_TAKEN = ("BlobAlreadyExists", "ConditionNotMet")
#: A blob standing for a folder on an account with a hierarchical namespace (its metadata says so): not a file.
_FOLDER_MARK = "hdi_isfolder"


def configured_account(settings: Settings) -> str:
    """The storage account the owner works on: ``azure_account_name``, else the connection string's (lower case)."""
    if settings.azure_account_name:
        return settings.azure_account_name.strip().lower()
    m = _ACCOUNT_IN_CONNECTION_STRING.search(settings.azure_connection_string)
    return m.group(1).strip().lower() if m else ""


def has_credentials(settings: Settings) -> bool:
    """Whether the settings give the owner something to sign Azure requests with, for a known account."""
    if settings.azure_connection_string:
        return bool(configured_account(settings))
    if not settings.azure_account_name:
        return False
    return bool(settings.azure_account_key or settings.azure_sas_token or settings.azure_use_identity)


def other_account(place: CloudPlace, account: str) -> str | None:
    """Why a location cannot be served with the owner's ``account``, or None when it names that account."""
    if place.account == account:
        return None
    return (f"location names Azure storage account {place.account!r}, but this owner works on account "
            f"{account or '(none configured)'!r} (COMMIT_OWNER_AZURE_ACCOUNT_NAME): its tables must be "
            f"abfss://<container>@{account or '<account>'}{AZURE_SUFFIX}/...")


class AzureStorage(StorageBackend):
    scheme = "abfss"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.account = configured_account(settings)
        timeout = settings.request_timeout_seconds if settings.request_timeout_seconds > 0 else 30.0
        self._client_kwargs: dict[str, Any] = {
            "connection_timeout": min(timeout, 10.0),
            "read_timeout": timeout,
            "retry_total": 2,  # the deadline wrapper bounds the whole call; a retried create is refused, not doubled
        }
        self._svc: Any = None
        self._credential: Any = None

    # -- the client --

    def _endpoint(self) -> str:
        return self._settings.azure_endpoint.rstrip("/") or f"https://{self.account}.blob.core.windows.net"

    async def _service(self) -> Any:
        if self._svc is None:
            from azure.storage.blob.aio import BlobServiceClient  # imported only when an abfss:// table is used

            s = self._settings
            if s.azure_connection_string:  # it names its endpoint itself (BlobEndpoint=, or the account's)
                self._svc = BlobServiceClient.from_connection_string(s.azure_connection_string, **self._client_kwargs)
                return self._svc
            if not has_credentials(s):
                raise PermissionError(errno.EACCES, NO_CREDENTIALS)
            credential: Any
            if s.azure_account_key:
                credential = {"account_name": self.account, "account_key": s.azure_account_key}
            elif s.azure_sas_token:
                credential = s.azure_sas_token.lstrip("?")
            else:
                from azure.identity.aio import DefaultAzureCredential

                credential = self._credential = DefaultAzureCredential()
            self._svc = BlobServiceClient(self._endpoint(), credential=credential, **self._client_kwargs)
        return self._svc

    def _place(self, uri: str) -> CloudPlace:
        place = split_cloud(uri)
        why = other_account(place, self.account)
        if why is not None:  # registration refuses it first (check_container); here it fails the call
            raise PermissionError(errno.EACCES, why)
        return place

    async def _blob(self, uri: str) -> Any:
        place = self._place(uri)
        return (await self._service()).get_blob_client(place.bucket, place.key)

    async def _listing(self, dir_uri: str, *, deep: bool) -> AsyncIterator[Any]:
        """The blobs (files, not folder marks) under ``dir_uri``: directly in it, or at any depth."""
        place = self._place(dir_uri)
        container = (await self._service()).get_container_client(place.bucket)
        prefix = f"{place.key}/" if place.key else ""
        items = (container.list_blobs(name_starts_with=prefix, include=["metadata"]) if deep
                 else container.walk_blobs(name_starts_with=prefix, include=["metadata"], delimiter="/"))
        async for item in items:
            if getattr(item, "size", None) is None:  # a BlobPrefix: a sub-folder of a shallow listing
                continue
            if (item.metadata or {}).get(_FOLDER_MARK, "").lower() == "true":
                continue
            yield item

    # -- the contract --

    async def put_if_absent(self, uri: str, data: bytes) -> FileInfo:
        from azure.core.exceptions import HttpResponseError

        blob = await self._blob(uri)
        try:
            props = await blob.upload_blob(data, overwrite=False)  # If-None-Match: *
        except HttpResponseError as e:
            if getattr(e, "error_code", None) in _TAKEN or e.status_code == 412:
                raise FileExistsError(errno.EEXIST, "object exists", uri) from None
            raise _as_oserror(e) from e
        except Exception as e:
            raise _as_oserror(e) from e
        return FileInfo(path=uri, size=len(data), modification_time=_millis(props.get("last_modified")))

    async def read(self, uri: str) -> bytes:
        from azure.core.exceptions import ResourceNotFoundError

        blob = await self._blob(uri)
        try:
            stream = await blob.download_blob()
            return bytes(await stream.readall())
        except ResourceNotFoundError:  # no such blob (or container)
            raise FileNotFoundError(errno.ENOENT, "no such object", uri) from None
        except Exception as e:
            raise _as_oserror(e) from e

    async def exists(self, uri: str) -> bool:
        blob = await self._blob(uri)
        try:
            return bool(await blob.exists())
        except Exception as e:
            raise _as_oserror(e) from e

    async def delete(self, uri: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        blob = await self._blob(uri)
        try:
            await blob.delete_blob()
        except ResourceNotFoundError:
            pass
        except Exception as e:
            raise _as_oserror(e) from e

    async def list_names(self, dir_uri: str) -> list[str]:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return [item.name.rsplit("/", 1)[-1] async for item in self._listing(dir_uri, deep=False)]
        except ResourceNotFoundError:  # no such container: nothing in it
            return []
        except PermissionError:
            raise
        except Exception as e:
            raise _as_oserror(e) from e

    async def info(self, uri: str) -> FileInfo:
        from azure.core.exceptions import ResourceNotFoundError

        blob = await self._blob(uri)
        try:
            props = await blob.get_blob_properties()
        except ResourceNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such object", uri) from None
        except Exception as e:
            raise _as_oserror(e) from e
        return FileInfo(path=uri, size=int(props.size), modification_time=_millis(props.last_modified))

    async def replace(self, uri: str, data: bytes) -> None:
        blob = await self._blob(uri)
        try:
            await blob.upload_blob(data, overwrite=True)  # one Put Blob (or Put Block List) swaps the whole object
        except Exception as e:
            raise _as_oserror(e) from e

    async def walk(self, dir_uri: str) -> list[FileInfo]:
        from azure.core.exceptions import ResourceNotFoundError

        root = dir_uri.split("://", 1)[1].split("/", 1)[0]  # <container>@<account host>
        try:
            return [FileInfo(path=f"abfss://{root}/{item.name}", size=int(item.size),
                             modification_time=_millis(item.last_modified))
                    async for item in self._listing(dir_uri, deep=True)]
        except ResourceNotFoundError:
            return []
        except PermissionError:
            raise
        except Exception as e:
            raise _as_oserror(e) from e

    async def check_container(self, location: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        place = split_cloud(location)
        why = other_account(place, self.account)
        if why is not None:
            raise InvalidArgumentError(why)
        container = (await self._service()).get_container_client(place.bucket)
        try:  # one blob of the table's prefix, as a listing asks (the right the owner needs anyway; a container's
            # properties need more than a container-scoped SAS may give)
            async for _ in container.list_blobs(name_starts_with=f"{place.key}/", results_per_page=1):
                break
        except ResourceNotFoundError:
            raise no_such_container(location) from None
        except Exception as e:
            raise _as_oserror(e) from e

    async def ping(self) -> None:
        from azure.core.exceptions import HttpResponseError

        try:
            await (await self._service()).get_account_information()
        except HttpResponseError as e:
            # Signed and answered, only not allowed an account-level call (a SAS or a role scoped to containers):
            # the service is reachable.
            if e.status_code == 403 and getattr(e, "error_code", None) != "AuthenticationFailed":
                return
            raise _as_oserror(e) from e
        except Exception as e:
            raise _as_oserror(e) from e

    async def close(self) -> None:
        svc, self._svc = self._svc, None
        credential, self._credential = self._credential, None
        if svc is not None:
            await svc.close()
        if credential is not None:
            await credential.close()


def _millis(when: Any) -> int:
    import time

    return int(when.timestamp() * 1000) if when is not None else int(time.time() * 1000)


def _as_oserror(e: BaseException) -> OSError:
    if isinstance(e, OSError):
        return e
    code = getattr(e, "error_code", None)
    return OSError(errno.EIO, f"Azure error: {type(e).__name__}{f' ({code})' if code else ''}: {e}")
