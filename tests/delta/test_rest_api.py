"""The Delta REST Catalog API (/delta/v1) on every backend, at the HTTP level: the requests delta-spark 4.4 sends
(shapes from its transcript), their replies, and every refusal leaving the database and storage as they were."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from client.contract.layout import delta_file
from tests.delta.conftest import V1, V1Writer, assert_delta_error, v1
from tests.ops.helpers import access_lines
from tests.security.conftest import call
from tests.support import Service, actions, ndjson, wait_until
from tests.unity.conftest import db_rows, ok, picture, uc


def new_writer(svc: Service) -> V1Writer:
    w = V1Writer(svc).names()
    w.create()
    return w


def ratified(svc: Service, table_id: str) -> list[tuple[int, str]]:
    rows = db_rows(svc.backend.database_url)["commits"]
    return sorted((int(r[1]), r[2].strip("'")) for r in rows if r[0].strip("'") == table_id)


def test_config_lists_this_apis_endpoints_and_the_protocol_version(uc_service: Service) -> None:
    w = V1Writer(uc_service).names()
    status, cfg = v1(uc_service, "GET", f"/config?catalog={w.catalog}&protocol-versions=1.0")
    assert status == 200, cfg
    assert cfg["protocol-version"] == "1.0"
    assert "POST /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}" in cfg["endpoints"]
    assert "HEAD /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}" in cfg["endpoints"]
    assert_delta_error(*v1(uc_service, "GET", "/config?catalog=nope&protocol-versions=1.0"), 404, "NotFoundException")
    assert_delta_error(*v1(uc_service, "GET", f"/config?catalog={w.catalog}&protocol-versions=2.0"), 400,
                       "BadRequestException")


def test_staging_create_and_load_give_what_delta_spark_reads(uc_service: Service) -> None:
    w = V1Writer(uc_service).names()
    status, staging = v1(uc_service, "POST", f"/catalogs/{w.catalog}/schemas/s/staging-tables", {"name": "t"})
    assert status == 200, staging
    assert staging["table-type"] == "MANAGED" and uuid.UUID(staging["table-id"])
    assert staging["location"].endswith("/" + staging["table-id"])
    assert "catalogManaged" in staging["required-protocol"]["writer-features"]
    assert staging["required-properties"]["io.unitycatalog.tableId"] == staging["table-id"]
    w = V1Writer(uc_service, catalog=w.catalog, table="t2")
    reply = w.create()
    meta = reply["metadata"]
    assert (meta["table-uuid"], meta["location"], meta["table-type"]) == (w.table_id, w.location, "MANAGED")
    assert meta["columns"]["fields"][0]["name"] == "id" and meta["partition-columns"] == ["part"]
    assert meta["properties"]["io.unitycatalog.tableId"] == w.table_id
    assert meta["properties"]["delta.feature.catalogManaged"] == "supported"
    loaded = w.load()
    assert loaded["commits"] == [] and loaded["latest-table-version"] == 0
    # no maintenance operation is left to clients: the owner compacts, vacuums and cleans the log itself
    assert reply["allowed-maintenance-operations"] == loaded["allowed-maintenance-operations"] == []
    assert loaded["metadata"]["columns"] == {"type": "struct", "fields": json.loads(json.dumps(
        [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
         {"name": "part", "type": "string", "nullable": True, "metadata": {}}]))}
    # the same table, by the same id, through the 2.1 API
    info = ok(uc_service, "GET", f"/tables/{w.catalog}.s.t2")
    assert info["table_id"] == w.table_id and [c["partition_index"] for c in info["columns"] if "partition_index" in c] == [0]


def test_a_missing_table_is_404_and_head_tells_existence(uc_service: Service) -> None:
    w = new_writer(uc_service)
    assert_delta_error(*v1(uc_service, "GET", f"/catalogs/{w.catalog}/schemas/s/tables/nope"), 404,
                       "NoSuchTableException")
    assert v1(uc_service, "HEAD", w.path)[0] == 204
    assert v1(uc_service, "HEAD", f"/catalogs/{w.catalog}/schemas/s/tables/nope")[0] == 404


def test_commits_are_ratified_in_order_and_listed_until_published(uc_service: Service) -> None:
    w = new_writer(uc_service)
    status, reply, name1 = w.commit(1, published=0)
    assert status == 200, reply
    assert [c["version"] for c in reply["commits"]] == [1] and reply["latest-table-version"] == 1
    assert reply["commits"][0]["file-name"] == name1
    w.publish(1)
    status, reply, name2 = w.commit(2, published=1)
    assert status == 200, reply
    assert [c["version"] for c in w.load()["commits"]] == [2]  # 1 was reported published
    assert ratified(uc_service, w.table_id) == [(1, name1), (2, name2)]


def test_the_same_request_again_is_200_and_ratifies_once(uc_service: Service) -> None:
    """delta-spark resends the SAME request after a 5xx or a lost answer: it must hear that its commit landed."""
    w = new_writer(uc_service)
    name = w.stage(1)
    body = w.update_body(1, name, published=0)
    assert w.update(body)[0] == 200
    status, reply = w.update(body)
    assert status == 200, reply
    assert ratified(uc_service, w.table_id) == [(1, name)]


def test_a_racing_loser_gets_409_even_reporting_its_own_version_published(uc_service: Service) -> None:
    w = new_writer(uc_service)
    assert w.commit(1, published=0)[0] == 200
    w.publish(1)
    mine, theirs = w.stage(2), w.stage(2)
    assert w.update(w.update_body(2, theirs, published=1))[0] == 200
    w.publish(2)  # the winner published version 2 before the loser listed the log
    before = ratified(uc_service, w.table_id), uc_service.backend.snapshot(w.location)
    status, payload = w.update(w.update_body(2, mine, published=2))
    assert_delta_error(status, payload, 409, "CommitVersionConflictException")
    # nothing ratified, nothing written; the report of the (true) publication of version 2 is recorded, as the
    # preview API does: a report is checked against the bytes and must free the backlog before a commit is judged
    assert (ratified(uc_service, w.table_id), uc_service.backend.snapshot(w.location)) == before
    status, reply, name3 = w.commit(3, published=2)  # the rebase: a new staged file for the next version
    assert status == 200, reply
    assert ratified(uc_service, w.table_id)[1:] == [(2, theirs), (3, name3)]


def test_concurrent_add_commits_of_one_version_ratify_exactly_one(uc_service: Service) -> None:
    w = new_writer(uc_service)
    names = [w.stage(1) for _ in range(6)]
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda n: w.update(w.update_body(1, n, published=0))[0], names))
    assert sorted(results) == [200] + [409] * 5
    assert len(ratified(uc_service, w.table_id)) == 1


def test_a_wrong_table_uuid_or_stale_etag_is_409_and_changes_nothing(uc_service: Service) -> None:
    w = new_writer(uc_service)
    name = w.stage(1)
    before = picture(uc_service, w.location)
    status, payload = w.update(w.update_body(1, name, table_uuid=str(uuid.uuid4())))
    assert_delta_error(status, payload, 409, "UpdateRequirementConflictException")
    etag = w.load()["metadata"]["etag"]
    body = w.update_body(1, name)
    body["requirements"].append({"type": "assert-etag", "etag": "0" * 32})
    assert_delta_error(*w.update(body), 409, "UpdateRequirementConflictException")
    assert picture(uc_service, w.location) == before
    body["requirements"][1]["etag"] = etag
    status, reply = w.update(body)
    assert status == 200 and reply["metadata"]["etag"] != etag  # a commit changes the etag


def test_a_missing_malformed_or_wrong_sized_staged_file_is_400_and_ratifies_nothing(uc_service: Service) -> None:
    w = new_writer(uc_service)
    missing = f"{1:020d}.{uuid.uuid4()}.json"
    bad = w.stage(1, b'{"commitInfo": not json\n')
    good = w.stage(1)
    cases = [
        w.update_body(1, missing, size=10),
        w.update_body(1, bad, size=len(b'{"commitInfo": not json\n')),
        w.update_body(1, good, size=3),
        w.update_body(1, "../../x.json", size=3),
        w.update_body(2, good),  # the name's version is not the commit's
        w.update_body(0, f"{0:020d}.{uuid.uuid4()}.json", size=3),
        {"requirements": [], "updates": []},
        {"requirements": [{"type": "assert-table-uuid", "uuid": w.table_id}], "updates": [{"action": "drop-table"}]},
        {"requirements": [{"type": "assert-etag", "etag": "x"}], "updates": [{"action": "set-table-comment", "comment": "c"}]},
    ]
    before = picture(uc_service, w.location)
    for body in cases:
        status, payload = w.update(body)
        assert status == 400, (body, payload)
        assert payload["error"]["type"] in ("BadRequestException", "InvalidParameterValueException"), payload
    assert picture(uc_service, w.location) == before
    assert ratified(uc_service, w.table_id) == []


def test_a_full_backlog_is_429_then_succeeds_once_publication_catches_up(uc_service: Service) -> None:
    w = new_writer(uc_service)
    for v in range(1, 5):  # the fixture's cap is 4 unbackfilled commits (no background backfill)
        assert w.commit(v)[0] == 200
    name = w.stage(5)
    before = picture(uc_service, w.location)
    assert_delta_error(*w.update(w.update_body(5, name)), 429, "ResourceExhaustedException")
    assert picture(uc_service, w.location) == before
    for v in range(1, 5):
        w.publish(v)
    status, reply = w.update(w.update_body(5, name, published=4))
    assert status == 200, reply
    assert [c["version"] for c in reply["commits"]] == [5]


def test_metadata_updates_ride_with_a_commit_and_show_in_both_apis(uc_service: Service) -> None:
    w = new_writer(uc_service)
    name = w.stage(1)
    wider = {"type": "struct", "fields": [*json.loads(json.dumps(w_schema())),
                                          {"name": "tags", "type": {"type": "array", "element-type": "string",
                                                                    "contains-null": True},
                                           "nullable": True, "metadata": {}}]}
    status, reply = w.update(w.update_body(1, name, published=0, extra=[
        {"action": "set-columns", "columns": wider},
        {"action": "set-properties", "updates": {"owner.team": "data"}},
        {"action": "set-table-comment", "comment": "events"},
    ]))
    assert status == 200, reply
    meta = w.load()["metadata"]
    assert meta["columns"] == wider and meta["partition-columns"] == ["part"]
    assert meta["properties"]["owner.team"] == "data" and meta["comment"] == "events"
    assert meta["last-commit-version"] == 1
    info = ok(uc_service, "GET", f"/tables/{w.catalog}.s.t")
    assert [c["name"] for c in info["columns"]] == ["id", "part", "tags"] and info["comment"] == "events"
    assert json.loads(info["columns"][2]["type_json"])["type"] == {"type": "array", "elementType": "string",
                                                                    "containsNull": True}
    status, _ = w.update({"requirements": [{"type": "assert-table-uuid", "uuid": w.table_id}],
                          "updates": [{"action": "remove-properties", "removals": ["owner.team"]}]})
    assert status == 200 and "owner.team" not in w.load()["metadata"]["properties"]


def w_schema() -> list[dict[str, object]]:
    return [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}}]


def test_commits_through_v1_are_seen_by_the_preview_commits_api(uc_service: Service) -> None:
    w = new_writer(uc_service)
    _, _, name = w.commit(1, published=0)
    got = ok(uc_service, "GET", "/delta/preview/commits", {"table_id": w.table_id, "table_uri": w.location,
                                                            "start_version": 0})
    assert [c["file_name"] for c in got["commits"]] == [name] and got["latest_table_version"] == 1


def test_the_catalog_apis_answer_the_tables_version_where_api_v1_answers_minus_one(uc_service: Service) -> None:
    """One rule per client contract (``TableRow.reported_latest`` / ``catalog_latest``): before the owner ratified a
    commit, a catalog-managed reader is told the version the log holds (0), a commit-coordinator client -1."""
    w = new_writer(uc_service)

    def latest() -> tuple[int, int, int]:
        status, v1_reply, _ = call(uc_service.endpoint, "GET", f"/api/v1/tables/{w.table_id}")
        assert status == 200, v1_reply
        return (v1_reply["latestTableVersion"], w.get_commits()["latest_table_version"],
                w.load()["latest-table-version"])

    assert latest() == (-1, 0, 0)
    status, payload, _ = w.commit(1)
    assert status == 200, payload
    assert latest() == (1, 1, 1)


def test_metrics_are_accepted_for_the_named_table_only(uc_service: Service) -> None:
    w = new_writer(uc_service)
    report = {"commit-report": {"num-files-added": 1, "num-bytes-added": 10}}
    assert v1(uc_service, "POST", w.path + "/metrics", {"table-id": w.table_id, "report": report}) == (204, None)
    assert_delta_error(*v1(uc_service, "POST", w.path + "/metrics", {"table-id": str(uuid.uuid4())}), 400,
                       "BadRequestException")


def test_rename_and_delete(uc_service: Service) -> None:
    w = new_writer(uc_service)
    assert v1(uc_service, "POST", w.path + "/rename", {"new-name": "t9"})[0] == 204
    assert_delta_error(*v1(uc_service, "GET", w.path), 404, "NoSuchTableException")
    w.table = "t9"
    assert w.load()["metadata"]["table-uuid"] == w.table_id
    other = V1Writer(uc_service, catalog=w.catalog, table="t8")
    other.create()
    assert_delta_error(*v1(uc_service, "POST", other.path + "/rename", {"new-name": "t9"}), 409,
                       "AlreadyExistsException")
    assert v1(uc_service, "DELETE", w.path)[0] == 204
    assert_delta_error(*v1(uc_service, "GET", w.path), 404, "NoSuchTableException")
    assert uc(uc_service, "GET", f"/tables/{w.catalog}.s.t9")[0] == 404


def test_credentials_of_a_table_name_its_prefix(uc_service: Service) -> None:
    w = new_writer(uc_service)
    status, creds = v1(uc_service, "GET", w.path + "/credentials?operation=READ_WRITE")
    if w.location.startswith("s3://"):  # this service has no role to assume: S3 vending is refused, clearly
        assert_delta_error(status, creds, 400, "BadRequestException")
        assert "vend_role_arn" in creds["error"]["message"]
        return
    assert status == 200, creds
    [c] = creds["storage-credentials"]
    assert c["prefix"].rstrip("/") == w.location and c["operation"] == "READ_WRITE" and c["config"] in ({}, c["config"])
    assert_delta_error(*v1(uc_service, "GET", w.path + "/credentials?operation=ALL"), 400, "BadRequestException")


def test_create_table_refuses_bad_input_and_changes_nothing(uc_service: Service) -> None:
    w = V1Writer(uc_service).names()
    status, staging = v1(uc_service, "POST", f"/catalogs/{w.catalog}/schemas/s/staging-tables", {"name": "t"})
    loc = staging["location"]
    good = {"name": "t", "location": loc, "table-type": "MANAGED", "columns": {"type": "struct", "fields": w_schema()},
            "protocol": {"min-reader-version": 3, "min-writer-version": 7}, "properties": {},
            "last-commit-timestamp-ms": 1}
    before = picture(uc_service, loc)
    for bad in [{**good, "columns": {"type": "struct", "fields": [{"name": "x", "type": "nonsense"}]}},
                {**good, "partition-columns": ["nope"]},
                {**good, "table-type": "VIEW"},
                {**good, "protocol": {"min-reader-version": "3"}},
                {**good, "name": "other"},
                {**good, "properties": {"io.unitycatalog.tableId": str(uuid.uuid4())}}]:
        status, payload = v1(uc_service, "POST", f"/catalogs/{w.catalog}/schemas/s/tables", bad)
        assert status == 400, (bad, payload)
    assert picture(uc_service, loc) == before


def test_the_error_envelope_of_unknown_routes_under_the_prefix(uc_service: Service) -> None:
    status, payload = v1(uc_service, "GET", "/no/such/route")
    assert_delta_error(status, payload, 404, "NotFoundException")


def test_a_table_not_written_by_the_staging_flow_is_refused_commits(uc_service: Service) -> None:
    """An EXTERNAL table named through the 2.1 API takes no writer-staged commits: 400, not a retry loop."""
    w = V1Writer(uc_service).names()
    loc = uc_service.backend.new_location()
    uc_service.backend.write(delta_file(loc, 0), ndjson(actions(1)))
    ok(uc_service, "POST", "/tables", {"name": "e", "catalog_name": w.catalog, "schema_name": "s",
                                       "table_type": "EXTERNAL", "data_source_format": "DELTA",
                                       "storage_location": loc})
    table_id = ok(uc_service, "GET", f"/tables/{w.catalog}.s.e")["table_id"]
    body = {"requirements": [{"type": "assert-table-uuid", "uuid": table_id}],
            "updates": [{"action": "add-commit", "commit": {"version": 1, "timestamp": 1, "file-size": 1,
                                                            "file-name": f"{1:020d}.{uuid.uuid4()}.json",
                                                            "file-modification-timestamp": 1}}]}
    status, payload = v1(uc_service, "POST", f"/catalogs/{w.catalog}/schemas/s/tables/e", body)
    assert status == 400, payload


def test_the_janitor_removes_a_racing_losers_staged_file_once_old_and_keeps_the_winners(
        request: pytest.FixtureRequest) -> None:
    """delta-spark never deletes the staged file of an add-commit that lost: the owner's janitor does, past its
    safe age; the ratified file stays."""
    import asyncio
    import os
    import time

    from coordinator.ops.commands import run_janitor
    from coordinator.runtime.settings import Settings
    from tests.conftest import make_backend

    backend = make_backend(request, "sqlite", "local", "delta-janitor")
    svc = Service(backend, extra_env={"COMMIT_OWNER_JANITOR_INTERVAL_SECONDS": "0"}).start()
    try:
        w = new_writer(svc)
        winner, loser = w.stage(1), w.stage(1)
        assert w.update(w.update_body(1, winner))[0] == 200
        assert w.update(w.update_body(1, loser))[0] == 409
        staged = f"{w.location}/_delta_log/_staged_commits"
        settings = Settings.load({"database_url": backend.database_url, "request_timeout_seconds": 2.0,
                                  "janitor_min_age_seconds": 60.0}, environ={})
        assert asyncio.run(run_janitor(settings, dry_run=False))["removed"] == 0  # too young
        for name in (winner, loser):
            t = time.time() - 120
            os.utime(backend._p(f"{staged}/{name}"), (t, t))
        rep = asyncio.run(run_janitor(settings, dry_run=False))
        assert rep["removed"] == 1 and rep["removedFiles"] == [f"{staged}/{loser}"]
        assert backend.exists(f"{staged}/{winner}") and not backend.exists(f"{staged}/{loser}")
        assert w.load()["latest-table-version"] == 1
    finally:
        svc.stop()


def test_a_table_named_through_api_v1_loads_with_its_logs_columns_in_both_apis(uc_service: Service) -> None:
    """The columns come from one conversion of the log's schema: the 2.1 ColumnInfo rows and this API's struct."""
    import pyarrow as pa

    from client.write import write_table

    w = V1Writer(uc_service).names()
    loc = uc_service.backend.new_location()
    write_table(pa.table({"id": pa.array([1], pa.int64()), "day": pa.array([1], pa.int32()), "part": ["p"]}), loc,
                client=uc_service.client(), full_name=f"{w.catalog}.s.logged", partition_by=["part"],
                storage_options=uc_service.backend.storage_options())
    status, loaded = v1(uc_service, "GET", f"/catalogs/{w.catalog}/schemas/s/tables/logged")
    assert status == 200, loaded
    meta = loaded["metadata"]
    assert meta["columns"] == {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "day", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "part", "type": "string", "nullable": True, "metadata": {}}]}
    assert (meta["partition-columns"], meta["table-type"]) == (["part"], "EXTERNAL")
    info = ok(uc_service, "GET", f"/tables/{w.catalog}.s.logged")
    assert [(c["name"], c["type_text"], c.get("partition_index")) for c in info["columns"]] == [
        ("id", "bigint", None), ("day", "int", None), ("part", "string", 0)]


def test_a_commit_and_its_refusal_are_logged_with_their_table_and_version(uc_service: Service) -> None:
    """A /delta/v1 commit names its table in the path and its version in the body: the access line names both,
    for a commit and for a refusal (the version taken again)."""
    w = new_writer(uc_service)
    status, reply, _ = w.commit(1)
    assert status == 200, reply
    status, reply, _ = w.commit(1)
    assert status == 409, reply
    path = V1 + w.path

    def lines() -> list[dict[str, Any]]:
        return [r for r in access_lines(uc_service) if r.get("path") == path and r.get("method") == "POST"]

    wait_until(lambda: len(lines()) == 2, timeout=5, what="the access lines of both commits")
    assert [(r["table_id"], int(r["version"]), r["status"]) for r in lines()] == [(w.table_id, 1, 200),
                                                                                  (w.table_id, 1, 409)]
    assert lines()[0]["outcome"] == "ok" and lines()[1]["outcome"] != "ok"
