"""Log storage, one backend per URI scheme: ``file://`` on local disk, ``s3://`` through s3fs, ``abfss://`` through
azure-storage-blob, ``gs://`` through gcsfs (docs/storage.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordinator.runtime.settings import Settings
from coordinator.storage.base import FileInfo, Prepared, StorageBackend
from coordinator.storage.metering import metered
from coordinator.storage.unavailable import StorageUnavailableError, UnavailableStorage

log = logging.getLogger("commit_owner.storage")

Wrap = Callable[[StorageBackend], StorageBackend]


class StorageRouter:
    """Hands out the backend for a location's scheme; backends are created on first use. Every call of a backend
    it hands out raises ``StorageUnavailableError`` (an ``UnavailableError``) when storage fails
    (``unavailable.py``: the one place storage errors are translated); FileExistsError and FileNotFoundError
    stay the answers they are."""

    def __init__(self, settings: Settings, *, wrap: Wrap | None = None, inner: Wrap | None = None) -> None:
        """``wrap`` wraps each backend outside its deadline (the metrics: timeouts are counted); ``inner`` wraps
        each scheme's own backend, inside the deadline (the test harness's fault injection, whose latency the
        deadline must cut: harness/storage_faults.py)."""
        self._settings = settings
        self._backends: dict[str, StorageBackend] = {}
        self._outer = wrap
        self._inner = inner

    def for_uri(self, uri: str) -> StorageBackend:
        scheme = uri.split("://", 1)[0]
        backend = self._backends.get(scheme)
        if backend is None:
            backend = self._wrap(self._make(scheme))
            if self._outer is not None:
                backend = self._outer(backend)
            # outermost, so the wrappers inside see the backend's own errors (the metrics count timeouts)
            backend = self._backends[scheme] = UnavailableStorage(backend)
        return backend

    def _wrap(self, backend: StorageBackend) -> StorageBackend:
        s = self._settings
        if self._inner is not None:
            backend = self._inner(backend)
        if s.request_timeout_seconds > 0:
            from coordinator.storage.deadline import DeadlineStorage

            backend = DeadlineStorage(backend, s.request_timeout_seconds)
        return backend

    def _make(self, scheme: str) -> StorageBackend:
        s = self._settings
        if scheme == "file":
            from coordinator.storage.local import LocalStorage

            return LocalStorage(threads=s.storage_threads)
        if scheme == "s3":
            from coordinator.storage.s3 import S3Storage

            return S3Storage(
                endpoint_url=s.s3_endpoint_url,
                region=s.s3_region,
                key=s.s3_access_key_id,
                secret=s.s3_secret_access_key,
                timeout=s.request_timeout_seconds,
            )
        if scheme == "abfss":
            from coordinator.storage.azure import AzureStorage

            return AzureStorage(s)
        if scheme == "gs":
            from coordinator.storage.gcs import GcsStorage

            return GcsStorage(s)
        raise ValueError(f"no storage backend for scheme {scheme!r}")

    async def drop_prepared(self, prepared: Prepared) -> None:
        """Undo a prepared write that will not be used (``StorageBackend.prepare``); never raises: a write that
        cannot be dropped leaves a hidden temporary file, which no listing and no reader sees."""
        try:
            await self.for_uri(prepared.uri).drop_prepared(prepared)
        except OSError as e:
            log.warning("dropping the prepared write of %s failed: %s", prepared.uri.rsplit("/", 1)[-1], e)

    async def ping(self) -> None:
        for b in list(self._backends.values()):
            await b.ping()

    async def close(self) -> None:
        for b in list(self._backends.values()):
            await b.close()
        self._backends.clear()


async def check_credentials(settings: Settings, schemes: set[str]) -> None:
    """Raise ValueError, naming the settings to give, when storage of one of ``schemes`` would have no
    credentials to sign with (s3:// without a key in the settings or the AWS credential chain; abfss:// without an
    account and its key, SAS, connection string or identity; gs:// without a key file, token, emulator endpoint or
    Google's application-default credentials). Checked
    before `serve` opens its port, so a missing key is one line at start, not an error on every request."""
    if "s3" in schemes and not settings.s3_access_key_id:
        from coordinator.storage.s3 import NO_CREDENTIALS, credentials_found

        if not await credentials_found():
            raise ValueError(f"s3:// tables are allowed here, but {NO_CREDENTIALS}")
    if "abfss" in schemes:
        from coordinator.storage import azure

        if not azure.has_credentials(settings):
            raise ValueError(f"abfss:// tables are allowed here, but {azure.NO_CREDENTIALS}")
    if "gs" in schemes:
        from coordinator.storage import gcs

        if not gcs.credentials_found(settings):
            raise ValueError(f"gs:// tables are allowed here, but {gcs.NO_CREDENTIALS}")


__all__ = ["FileInfo", "Prepared", "StorageBackend", "StorageRouter", "StorageUnavailableError", "Wrap",
           "check_credentials", "metered"]
