"""The catalog's answers follow the table (issue 42 item 5, decision 74): after a commit ratified through any API
(Unity Catalog's preview commits, the Delta REST Catalog API's ``updateTable`` with ``add-commit``, ``/api/v1``
owner-written), every API's record of the table names that version and that commit's timestamp: Unity
Catalog's ``GET /tables/{name}`` and its list (``delta.lastUpdateVersion``, ``delta.lastCommitTimestamp``,
``updated_at``), the Delta REST load (the same properties, ``last-commit-version``,
``last-commit-timestamp-ms``, ``latest-table-version``, ``updated-time``), ``/api/v1`` (``latestTableVersion``,
``lastCommitAt``).

The real app in this process (``InProcess``) on SQLite and PostgreSQL, local disk; the writer's files are real
files. Stock delta-spark pins the same in ``tests/unity/test_spark_uc.py``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from coordinator.store import now_ms
from tests.conftest import make_backend
from tests.inprocess import InProcess
from tests.support import actions, delta_file, ndjson, next_ict, version0
from tests.unity.conftest import COLUMNS, catalog_managed_version0, db_rows

UC = "/api/2.1/unity-catalog"
DELTA = UC + "/delta/v1"
V1 = "/api/v1"
LAST_VERSION, LAST_TS = "delta.lastUpdateVersion", "delta.lastCommitTimestamp"


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=["sqlite", "postgres"])
async def app(request: pytest.FixtureRequest) -> AsyncIterator[InProcess]:
    """No background backfill: the table changes only through the requests of a test."""
    b = make_backend(request, request.param, "local", f"last-commit-{request.param}")
    a = await InProcess.start(b, {"COMMIT_OWNER_BACKFILL": "false"})
    yield a
    await a.stop()


async def ok(app: InProcess, method: str, path: str, body: Any = None) -> Any:
    status, reply = await app.call(method, path, None if body is None else json.dumps(body).encode(),
                                   {"Content-Type": "application/json"})
    assert status in (200, 201), (method, path, status, reply)
    return reply


@dataclass
class Table:
    """A MANAGED table made as delta-spark's Unity Catalog connector makes one: staging, version 0 written by
    the writer, then the create, reporting ``delta.lastUpdateVersion`` 0 and version 0's timestamp."""

    app: InProcess
    catalog: str
    table_id: str = ""
    location: str = ""
    created_ict: int = 0

    @property
    def full_name(self) -> str:
        return f"{self.catalog}.s.t"

    @classmethod
    async def managed(cls, app: InProcess) -> Table:
        t = cls(app, f"c_{uuid.uuid4().hex[:8]}")
        await ok(app, "POST", UC + "/catalogs", {"name": t.catalog})
        await ok(app, "POST", UC + "/schemas", {"name": "s", "catalog_name": t.catalog})
        staging = await ok(app, "POST", UC + "/staging-tables", {"name": "t", "catalog_name": t.catalog,
                                                                 "schema_name": "s"})
        t.table_id, t.location = staging["id"], staging["staging_location"]
        t.created_ict = next_ict()
        await asyncio.to_thread(app.backend.write, delta_file(t.location, 0),
                                ndjson(catalog_managed_version0(t.table_id, t.created_ict)))
        await ok(app, "POST", UC + "/tables", {
            "name": "t", "catalog_name": t.catalog, "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "storage_location": t.location, "columns": COLUMNS,
            "properties": {"io.unitycatalog.tableId": t.table_id, "delta.feature.catalogManaged": "supported",
                           LAST_VERSION: "0", LAST_TS: str(t.created_ict)}})
        return t

    async def stage(self, version: int, ict: int) -> tuple[str, int]:
        data = ndjson(actions(1, ict=ict))
        name = f"{version:020d}.{uuid.uuid4()}.json"
        await asyncio.to_thread(self.app.backend.write, f"{self.location}/_delta_log/_staged_commits/{name}", data)
        return name, len(data)

    async def commit_uc(self, version: int, ict: int) -> None:
        """A preview commit, as delta-spark's UC commit coordinator sends it (its ``timestamp`` is not the
        commit's: the owner takes the inCommitTimestamp of the file)."""
        name, size = await self.stage(version, ict)
        await ok(self.app, "POST", UC + "/delta/preview/commits", {
            "table_id": self.table_id, "table_uri": self.location,
            "commit_info": {"version": version, "timestamp": now_ms(), "file_name": name, "file_size": size,
                            "file_modification_timestamp": now_ms()}})

    async def commit_delta(self, version: int, ict: int, extra: list[dict[str, Any]] | None = None) -> Any:
        """``updateTable`` with ``add-commit`` alone (what delta-spark 4.4 sends for an INSERT)."""
        name, size = await self.stage(version, ict)
        return await ok(self.app, "POST", f"{DELTA}/catalogs/{self.catalog}/schemas/s/tables/t", {
            "requirements": [{"type": "assert-table-uuid", "uuid": self.table_id}],
            "updates": [{"action": "add-commit", "commit": {
                "version": version, "timestamp": ict, "file-name": name, "file-size": size,
                "file-modification-timestamp": now_ms()}}, *(extra or [])]})

    async def commit_v1(self, version: int, ict: int) -> None:
        """Owner-written, through ``/api/v1``."""
        status, reply = await self.app.commit(self.table_id, version, ndjson(actions(1, ict=ict)))
        assert status == 200, reply

    async def answers(self) -> dict[str, Any]:
        """What each API says of the table."""
        got = await ok(self.app, "GET", f"{UC}/tables/{self.full_name}")
        listed = await ok(self.app, "GET", f"{UC}/tables?catalog_name={self.catalog}&schema_name=s")
        loaded = await ok(self.app, "GET", f"{DELTA}/catalogs/{self.catalog}/schemas/s/tables/t")
        v1 = await ok(self.app, "GET", f"{V1}/tables/{self.table_id}")
        return {"uc": got, "uc_list": next(t for t in listed["tables"] if t["table_id"] == self.table_id),
                "delta": loaded, "v1": v1}


def assert_follows(seen: dict[str, Any], version: int, ict: int, since: int) -> None:
    """Every API names ``version`` and its commit's timestamp ``ict``, and was updated at or after ``since``."""
    for key in ("uc", "uc_list"):
        t = seen[key]
        assert (t["properties"][LAST_VERSION], t["properties"][LAST_TS]) == (str(version), str(ict)), (key, t)
        assert t["updated_at"] >= since, (key, t["updated_at"], since)
    meta = seen["delta"]["metadata"]
    assert (meta["properties"][LAST_VERSION], meta["properties"][LAST_TS]) == (str(version), str(ict)), meta
    assert (meta["last-commit-version"], meta["last-commit-timestamp-ms"]) == (version, ict), meta
    assert seen["delta"]["latest-table-version"] == version
    assert meta["updated-time"] >= since, (meta["updated-time"], since)
    assert seen["v1"]["latestTableVersion"] == version and seen["v1"]["lastCommitAt"] >= since, seen["v1"]


async def test_every_api_names_the_newest_commit_whichever_api_it_came_through(app: InProcess) -> None:
    t = await Table.managed(app)
    seen = await t.answers()
    for key in ("uc", "uc_list"):  # before any ratified commit: the creator's report
        assert (seen[key]["properties"][LAST_VERSION], seen[key]["properties"][LAST_TS]) == ("0", str(t.created_ict))
    assert (seen["delta"]["metadata"]["last-commit-version"], seen["delta"]["latest-table-version"]) == (0, 0)
    assert seen["delta"]["metadata"]["last-commit-timestamp-ms"] == t.created_ict

    for version, commit in ((1, t.commit_uc), (2, t.commit_delta), (3, t.commit_v1), (4, t.commit_uc)):
        since, ict = now_ms(), next_ict()
        await commit(version, ict)
        assert_follows(await t.answers(), version, ict, since)


async def test_a_delta_rest_commit_with_metadata_names_its_version_and_an_echo_of_the_load_is_accepted(
        app: InProcess) -> None:
    """``set-properties`` echoing the derived keys as the load answered them is an echo (decision 65), also when
    the record is older than the answer; another value (the record's) is refused and changes nothing."""
    t = await Table.managed(app)
    ict1 = next_ict()
    await t.commit_uc(1, ict1)
    ict2 = next_ict()
    reply = await t.commit_delta(2, ict2, [{"action": "set-properties", "updates": {"owner.note": "a"}}])
    assert (reply["metadata"]["last-commit-version"], reply["metadata"]["last-commit-timestamp-ms"]) == (2, ict2)
    assert reply["metadata"]["properties"]["owner.note"] == "a"
    ict3 = next_ict()
    await t.commit_uc(3, ict3)  # (the record still says 2: the load says 3)

    path = f"{DELTA}/catalogs/{t.catalog}/schemas/s/tables/t"
    loaded = await ok(app, "GET", path)
    echo = {k: loaded["metadata"]["properties"][k] for k in (LAST_VERSION, LAST_TS)}
    reply = await ok(app, "POST", path, {"requirements": [{"type": "assert-table-uuid", "uuid": t.table_id}],
                                         "updates": [{"action": "set-properties", "updates": {**echo, "x": "1"}}]})
    assert reply["metadata"]["properties"]["x"] == "1" and reply["metadata"]["last-commit-version"] == 3

    before = await asyncio.to_thread(db_rows, app.backend.database_url)
    status, payload = await app.call("POST", path, json.dumps({
        "requirements": [{"type": "assert-table-uuid", "uuid": t.table_id}],
        "updates": [{"action": "set-properties", "updates": {LAST_VERSION: "2"}}]}).encode())
    assert status == 400 and LAST_VERSION in payload["error"]["message"], payload
    assert await asyncio.to_thread(db_rows, app.backend.database_url) == before
    assert_follows(await t.answers(), 3, ict3, 0)


async def test_an_external_table_committed_through_api_v1_follows_too(app: InProcess) -> None:
    """A table named through ``/api/v1`` (EXTERNAL to the catalog): its properties come from its log and are
    replaced by each commit's ``metaData`` configuration; the last commit's keys are the table's all the same."""
    catalog = f"c_{uuid.uuid4().hex[:8]}"
    await ok(app, "POST", UC + "/catalogs", {"name": catalog})
    await ok(app, "POST", UC + "/schemas", {"name": "s", "catalog_name": catalog})
    location = app.backend.new_location()
    status, info = await app.post_json(f"{V1}/tables", {"location": location, "currentVersion": -1,
                                                         "name": f"{catalog}.s.t"})
    assert status == 201, info
    await asyncio.to_thread(app.backend.write, delta_file(location, 0), ndjson(version0()))
    seen = await ok(app, "GET", f"{UC}/tables/{catalog}.s.t")
    assert LAST_VERSION not in seen["properties"], seen  # nothing ratified, nothing reported

    meta = next(a for a in version0() if "metaData" in a)
    ict = next_ict()
    changed = {"metaData": {**meta["metaData"], "configuration": {"delta.appendOnly": "false"}}}
    since = now_ms()
    status, reply = await app.commit(info["tableId"], 1, ndjson([*actions(1, ict=ict), changed]))
    assert status == 200, reply
    got = await ok(app, "GET", f"{UC}/tables/{catalog}.s.t")
    assert got["properties"]["delta.appendOnly"] == "false"
    assert (got["properties"][LAST_VERSION], got["properties"][LAST_TS]) == ("1", str(ict)), got
    assert got["updated_at"] >= since
    loaded = await ok(app, "GET", f"{DELTA}/catalogs/{catalog}/schemas/s/tables/t")
    assert (loaded["metadata"]["last-commit-version"], loaded["metadata"]["last-commit-timestamp-ms"]) == (1, ict)
