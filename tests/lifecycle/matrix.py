"""The lifecycle suites on every backend: the owner in this process, tables wherever the backend keeps them.

``lifecycle_app`` (conftest.py) is the real app (``create_app``) on SQLite/PostgreSQL x local disk/S3 (moto server), with
a database and bucket of its own per module, so a picture of every row of the store is the module's alone;
no background backfill and a large backlog cap, so nothing is published behind a test's back (a release
commit is still published at once, and ``backfill_to_version`` still publishes). ``place`` is a fresh
table location on that backend with what the client library and delta-rs need to reach it.

The client library blocks: a test's body runs in a thread (``in_thread``) while the app answers on the
session's event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from client import CommitOwnerClient
from client.storage import LogStorage
from tests.inprocess import InProcess
from tests.lifecycle.helpers import append_through_owner
from tests.security.conftest import db_state
from tests.support import Backend, delta_rs_table, delta_rs_target

T = TypeVar("T")

QUIET = {"COMMIT_OWNER_BACKFILL": "false", "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": "1000"}


def in_thread(test: Callable[..., T]) -> Callable[..., Coroutine[Any, Any, T]]:
    """Run a blocking test body in a thread, so the in-process owner keeps answering on the event loop."""

    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(test, *args, **kwargs)

    return run


@dataclass
class Place:
    """A fresh table location on the app's backend."""

    app: InProcess
    location: str  # file:///... or s3://bucket/...

    @property
    def backend(self) -> Backend:
        return self.app.backend

    @property
    def options(self) -> dict[str, Any] | None:
        """storage_options for the client library."""
        return self.backend.storage_options()

    def client(self) -> CommitOwnerClient:
        return self.app.client()

    def child(self, name: str) -> Place:
        return Place(self.app, f"{self.location}/{name}")

    def write_delta(self, data: pa.Table, mode: str = "error") -> None:
        """A filesystem writer (delta-rs) writes the table, as it would without any owner."""
        if self.backend.storage == "gcs":
            import pytest

            pytest.skip("delta-rs cannot write to fake-gcs-server: object_store uploads with the XML API's object "
                        "PUT, which the emulator does not serve (docs/storage.md)")
        uri, opts = delta_rs_target(self.backend, self.location)
        write_deltalake(uri, data, mode=mode, storage_options=opts)  # type: ignore[arg-type]

    def delta_table(self, version: int | None = None) -> DeltaTable:
        """The table as delta-rs (an owner-unaware reader) sees it."""
        return delta_rs_table(self.backend, self.location, version)

    def ids(self, version: int | None = None) -> list[int]:
        """The ``id`` column delta-rs reads, sorted."""
        return sorted(pa.table(self.delta_table(version).to_pyarrow_table()).column("id").to_pylist())

    def delta_rs_files(self, version: int) -> list[str]:
        return sorted(a["path"] for a in pa.table(self.delta_table(version).get_add_actions(flatten=True)).to_pylist())

    @property
    def log(self) -> LogStorage:
        """The table's ``_delta_log`` through the client library's storage."""
        return LogStorage(self.location, self.options)

    def append(self, owner: CommitOwnerClient, ids: list[int]) -> int:
        """An engine's append: a Parquet file in the table, its ``add`` committed through the owner."""
        return append_through_owner(owner, self.location, ids, storage_options=self.options)

    def write(self, rel: str, data: bytes) -> None:
        self.backend.write(f"{self.location}/{rel}", data)

    def files(self) -> dict[str, bytes]:
        """Every file under the location, with its bytes."""
        return self.backend.snapshot(self.location)

    def picture(self) -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, bytes]]:
        """Every row of the owner's store and every file of the table: equal before and after a refusal."""
        return db_state(self.backend.database_url), self.files()

    def registered(self) -> list[str]:
        """Ids of the tables the owner lists at this location."""
        with self.client() as c:
            return [t.table_id for t in c.list_tables() if t.location == self.location]
