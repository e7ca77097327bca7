"""Fixtures of the Unity Catalog facade's suite: the service on every backend, a catalog-managed writer
that stages its commit files the way Sail and delta-spark do, and before/after pictures of every row
and file for the refusal tests."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.conftest import make_backend
from tests.security.conftest import call, db_state
from tests.support import Backend, Service, actions, delta_file, ndjson, next_ict

UC = "/api/2.1/unity-catalog"
STATE_TABLES = ("owned_tables", "commits", "catalogs", "schemas", "table_names", "staging_tables")


@pytest.fixture(scope="session")
def uc_service(request: pytest.FixtureRequest, backend: Backend) -> Iterator[Service]:
    """No background backfill, a backlog cap of 4: state changes only through requests (and the writer's
    own publication, reported with latest_backfilled_version). Its own database and bucket: the contract
    suite's services on ``backend`` renew and hand back backfill leases in the background, which would
    change the rows a refusal is pictured against."""
    db, storage = backend.name.split("-")
    svc = Service(make_backend(request, db, storage, backend.name + "-uc"),
                  extra_env={"COMMIT_OWNER_BACKFILL": "false", "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": "4"}).start()
    yield svc
    svc.stop()


@pytest.fixture(scope="session")
def uc_service_backfilling(request: pytest.FixtureRequest, backend: Backend) -> Iterator[Service]:
    """The server-side backfiller on, publishing after every commit. Its own database and bucket: its
    background sweep must not publish the other service's tables while their refusals are pictured."""
    db, storage = backend.name.split("-")
    svc = Service(make_backend(request, db, storage, backend.name + "-bf"),
                  extra_env={"COMMIT_OWNER_BACKFILL_BATCH_SIZE": "1"}).start()
    yield svc
    svc.stop()


def uc(svc: Service, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    raw = None if body is None else json.dumps(body).encode()
    status, payload, _ = call(svc.endpoint, method, UC + path, raw, token=token)
    return status, payload


def ok(svc: Service, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
    status, payload = uc(svc, method, path, body, token)
    assert status == 200, (method, path, status, payload)
    return payload


def assert_uc_error(status: int, payload: Any, want_status: int, want_code: str) -> None:
    assert status == want_status, payload
    assert set(payload) == {"error_code", "message", "details"}, payload
    assert payload["error_code"] == want_code, payload
    assert payload["details"] == [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": want_code}]
    assert isinstance(payload["message"], str) and payload["message"]


_ENGINES: dict[str, Any] = {}


def db_rows(database_url: str) -> dict[str, list[tuple]]:
    """Every row of ``STATE_TABLES`` as it is, each value as its repr (to pick columns out of)."""
    from sqlalchemy import create_engine, text

    from coordinator.store.engine import sync_url

    engine = _ENGINES.get(database_url)
    if engine is None:
        engine = _ENGINES[database_url] = create_engine(sync_url(database_url))
    with engine.connect() as conn:
        return {t: sorted(tuple(map(repr, r)) for r in conn.execute(text(f"SELECT * FROM {t}")))
                for t in STATE_TABLES}


@pytest.fixture(scope="session", autouse=True)
def _dispose_uc_engines() -> Iterator[None]:
    yield
    for engine in _ENGINES.values():
        engine.dispose()
    _ENGINES.clear()


def picture(svc: Service, *locations: str) -> tuple[Any, ...]:
    """Every database row and every file under ``locations`` (and the managed root)."""
    b = svc.backend
    return (db_state(b.database_url, STATE_TABLES), *(b.snapshot(loc) for loc in (*locations, b.managed_location())))


def catalog_managed_version0(table_id: str, ict: int | None = None) -> list[dict[str, Any]]:
    """Version 0 as a catalog-managed writer writes it (reader+writer feature catalogManaged, the table id)."""
    ict = ict or next_ict()
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    return [
        {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "CREATE TABLE",
                        "txnId": str(uuid.uuid4())}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["catalogManaged"],
                      "writerFeatures": ["catalogManaged", "inCommitTimestamp"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [],
                      "configuration": {"delta.enableInCommitTimestamps": "true",
                                        "delta.feature.catalogManaged": "supported",
                                        "io.unitycatalog.tableId": table_id},
                      "createdTime": ict}},
    ]


COLUMNS = [{"name": "id", "type_text": "bigint", "type_name": "LONG", "position": 0, "nullable": True,
            "type_json": json.dumps({"name": "id", "type": "long", "nullable": True, "metadata": {}})}]


@dataclass
class Writer:
    """A catalog-managed writer: names, staging table, version 0, then staged commits sent to the owner."""

    svc: Service
    token: str | None = None
    catalog: str = field(default_factory=lambda: f"c_{uuid.uuid4().hex[:8]}")
    schema: str = "s"
    table: str = "t"
    table_id: str = ""
    location: str = ""
    staged: dict[int, bytes] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.table}"

    def names(self) -> Writer:
        ok(self.svc, "POST", "/catalogs", {"name": self.catalog}, self.token)
        ok(self.svc, "POST", "/schemas", {"name": self.schema, "catalog_name": self.catalog}, self.token)
        return self

    def create(self) -> dict[str, Any]:
        staging = ok(self.svc, "POST", "/staging-tables",
                     {"name": self.table, "catalog_name": self.catalog, "schema_name": self.schema}, self.token)
        self.table_id, self.location = staging["id"], staging["staging_location"]
        self.svc.backend.write(delta_file(self.location, 0), ndjson(catalog_managed_version0(self.table_id)))
        return ok(self.svc, "POST", "/tables", {
            "name": self.table, "catalog_name": self.catalog, "schema_name": self.schema, "table_type": "MANAGED",
            "data_source_format": "DELTA", "storage_location": self.location, "columns": COLUMNS,
            "properties": {"io.unitycatalog.tableId": self.table_id, "delta.feature.catalogManaged": "supported"},
        }, self.token)

    def stage(self, version: int, data: bytes | None = None, uid: str | None = None) -> str:
        data = ndjson(actions(1)) if data is None else data
        name = f"{version:020d}.{uid or uuid.uuid4()}.json"
        self.svc.backend.write(f"{self.location}/_delta_log/_staged_commits/{name}", data)
        self.staged[version] = data
        return name

    def commit_body(self, version: int, file_name: str, *, size: int | None = None,
                    backfilled: int | None = None, uri: str | None = None) -> dict[str, Any]:
        data = self.staged.get(version, b"")
        body: dict[str, Any] = {
            "table_id": self.table_id, "table_uri": uri or self.location,
            "commit_info": {"version": version, "timestamp": next_ict(), "file_name": file_name,
                            "file_size": len(data) if size is None else size,
                            "file_modification_timestamp": next_ict()},
        }
        if backfilled is not None:
            body["latest_backfilled_version"] = backfilled
        return body

    def commit(self, version: int, **kw: Any) -> tuple[int, Any, str]:
        name = self.stage(version)
        status, payload = uc(self.svc, "POST", "/delta/preview/commits", self.commit_body(version, name, **kw),
                             self.token)
        return status, payload, name

    def get_commits(self, start: int = 0, end: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"table_id": self.table_id, "table_uri": self.location, "start_version": start}
        if end is not None:
            body["end_version"] = end
        return ok(self.svc, "GET", "/delta/preview/commits", body, self.token)

    def publish(self, version: int) -> None:
        """What Sail does after a commit: copy the staged bytes to <v>.json itself."""
        self.svc.backend.write(delta_file(self.location, version), self.staged[version])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
