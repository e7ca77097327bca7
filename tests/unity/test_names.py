"""Catalogs, schemas, staging tables and tables through the Unity Catalog facade, on every backend
(SQLite / PostgreSQL x local disk / S3). Every refusal leaves every row and file as it was."""

from __future__ import annotations

import uuid

import pytest

from tests.support import Service, delta_file, ndjson, version0
from tests.unity.conftest import COLUMNS, Writer, assert_uc_error, ok, picture, uc


def test_catalogs_are_created_listed_read_and_dropped(uc_service: Service) -> None:
    name = f"cat_{uuid.uuid4().hex[:8]}"
    made = ok(uc_service, "POST", "/catalogs", {"name": name, "comment": "sales", "properties": {"k": "v"}})
    assert made["name"] == name and made["comment"] == "sales" and made["properties"] == {"k": "v"}
    assert isinstance(made["id"], str) and made["created_at"] > 0
    assert ok(uc_service, "GET", f"/catalogs/{name}") == made
    assert name in [c["name"] for c in ok(uc_service, "GET", "/catalogs")["catalogs"]]
    assert ok(uc_service, "DELETE", f"/catalogs/{name}") == {}
    status, payload = uc(uc_service, "GET", f"/catalogs/{name}")
    assert_uc_error(status, payload, 404, "NOT_FOUND")


def test_a_second_catalog_of_the_same_name_is_already_exists_and_changes_nothing(uc_service: Service) -> None:
    name = f"cat_{uuid.uuid4().hex[:8]}"
    ok(uc_service, "POST", "/catalogs", {"name": name})
    before = picture(uc_service)
    status, payload = uc(uc_service, "POST", "/catalogs", {"name": name, "comment": "again"})
    assert_uc_error(status, payload, 409, "ALREADY_EXISTS")
    assert picture(uc_service) == before


def test_bad_names_and_unknown_fields_are_invalid_argument_and_change_nothing(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    before = picture(uc_service)
    for path, body in [
        ("/catalogs", {"name": "a.b"}),
        ("/catalogs", {"name": ""}),
        ("/catalogs", {"name": "x", "colour": "blue"}),
        ("/catalogs", {"name": "x", "storage_root": "s3://elsewhere/x"}),
        ("/schemas", {"name": "a/b", "catalog_name": w.catalog}),
        ("/schemas", {"name": "ok"}),
        ("/staging-tables", {"name": "t t", "catalog_name": w.catalog, "schema_name": w.schema}),
    ]:
        status, payload = uc(uc_service, "POST", path, body)
        assert_uc_error(status, payload, 400, "INVALID_ARGUMENT")
    status, payload = uc(uc_service, "GET", "/schemas?catalog_name=" + w.catalog + "&max_results=-1")
    assert_uc_error(status, payload, 400, "INVALID_ARGUMENT")
    assert picture(uc_service) == before


def test_schemas_are_paged_with_max_results_and_page_token(uc_service: Service) -> None:
    w = Writer(uc_service)
    ok(uc_service, "POST", "/catalogs", {"name": w.catalog})
    names = [f"s{i}" for i in range(5)]
    for n in names:
        ok(uc_service, "POST", "/schemas", {"name": n, "catalog_name": w.catalog})
    seen, token, pages = [], None, 0
    while True:
        q = f"/schemas?catalog_name={w.catalog}&max_results=2" + (f"&page_token={token}" if token else "")
        page = ok(uc_service, "GET", q)
        pages += 1
        seen += [s["name"] for s in page["schemas"]]
        assert all(s["catalog_name"] == w.catalog and s["full_name"] == f"{w.catalog}.{s['name']}"
                   for s in page["schemas"])
        token = page.get("next_page_token")
        if not token:
            break
    assert seen == names and pages == 3
    got = ok(uc_service, "GET", f"/schemas/{w.catalog}.s3")
    assert got["name"] == "s3" and got["schema_id"]
    assert ok(uc_service, "DELETE", f"/schemas/{w.catalog}.s3") == {}
    status, payload = uc(uc_service, "GET", f"/schemas/{w.catalog}.s3")
    assert_uc_error(status, payload, 404, "NOT_FOUND")


def test_a_schema_in_an_unknown_catalog_is_not_found_and_changes_nothing(uc_service: Service) -> None:
    before = picture(uc_service)
    status, payload = uc(uc_service, "POST", "/schemas", {"name": "s", "catalog_name": "nowhere_" + uuid.uuid4().hex[:6]})
    assert_uc_error(status, payload, 404, "NOT_FOUND")
    status, payload = uc(uc_service, "GET", "/schemas?catalog_name=nowhere")
    assert_uc_error(status, payload, 404, "NOT_FOUND")
    assert picture(uc_service) == before


def test_a_catalog_or_schema_holding_something_is_not_dropped(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    w.create()
    before = picture(uc_service, w.location)
    status, payload = uc(uc_service, "DELETE", f"/catalogs/{w.catalog}")
    assert_uc_error(status, payload, 400, "INVALID_ARGUMENT")
    status, payload = uc(uc_service, "DELETE", f"/schemas/{w.catalog}.{w.schema}")
    assert_uc_error(status, payload, 400, "INVALID_ARGUMENT")
    assert picture(uc_service, w.location) == before


def test_a_managed_table_is_made_from_a_staging_table_and_read_back_in_full(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    made = w.create()
    assert w.location.startswith(uc_service.backend.managed_location() + "/")
    got = ok(uc_service, "GET", f"/tables/{w.full_name}")
    assert got == made
    assert got["table_id"] == w.table_id and got["table_type"] == "MANAGED" and got["data_source_format"] == "DELTA"
    assert got["storage_location"] == w.location
    assert got["properties"]["io.unitycatalog.tableId"] == w.table_id
    assert [c["name"] for c in got["columns"]] == ["id"] and got["columns"][0]["type_name"] == "LONG"
    assert got["created_at"] > 0 and got["updated_at"] >= got["created_at"]
    listed = ok(uc_service, "GET", f"/tables?catalog_name={w.catalog}&schema_name={w.schema}")["tables"]
    assert [t["table_id"] for t in listed] == [w.table_id]
    # the same table, the same id, through /api/v1
    info = uc_service.client().get_table(w.table_id)
    assert info.name == w.full_name and info.location == w.location and info.commit_dir == "_staged_commits"


def test_a_managed_table_needs_its_staging_table(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    staging = ok(uc_service, "POST", "/staging-tables", {"name": "t", "catalog_name": w.catalog, "schema_name": "s"})
    loc = staging["staging_location"]
    base = {"name": "t", "catalog_name": w.catalog, "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": COLUMNS}
    before = picture(uc_service, loc)
    for body, want in [
        ({**base, "storage_location": loc, "properties": {"io.unitycatalog.tableId": str(uuid.uuid4())}}, 400),
        ({**base, "storage_location": loc, "name": "other"}, 400),
        ({**base, "storage_location": uc_service.backend.managed_location() + "/no-staging"}, 404),
        ({**base, "storage_location": loc, "data_source_format": "PARQUET"}, 400),
        ({**base, "storage_location": loc, "table_type": "VIEW"}, 400),
    ]:
        status, payload = uc(uc_service, "POST", "/tables", body)
        assert_uc_error(status, payload, want, "INVALID_ARGUMENT" if want == 400 else "NOT_FOUND")
    assert picture(uc_service, loc) == before
    # version 0 comes before POST /tables (delta-spark, UC's tests) or, as Sail 0.7 writes it, right after
    ok(uc_service, "POST", "/tables", {**base, "storage_location": loc})
    uc_service.backend.write(delta_file(loc, 0), ndjson(version0()))
    table_id = ok(uc_service, "GET", f"/tables/{w.catalog}.s.t")["table_id"]
    page = ok(uc_service, "GET", "/delta/preview/commits", {"table_id": table_id, "table_uri": loc, "start_version": 0})
    assert page == {"commits": [], "latest_table_version": 0}


def test_a_taken_name_is_already_exists_and_changes_nothing(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    w.create()
    before = picture(uc_service, w.location)
    status, payload = uc(uc_service, "POST", "/staging-tables",
                         {"name": w.table, "catalog_name": w.catalog, "schema_name": w.schema})
    assert_uc_error(status, payload, 409, "ALREADY_EXISTS")
    assert picture(uc_service, w.location) == before


def test_unknown_tables_are_table_not_found(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    before = picture(uc_service)
    for method in ("GET", "DELETE"):
        status, payload = uc(uc_service, method, f"/tables/{w.catalog}.{w.schema}.missing")
        assert_uc_error(status, payload, 404, "TABLE_NOT_FOUND")
    status, payload = uc(uc_service, "GET", "/tables/not-a-full-name")
    assert_uc_error(status, payload, 400, "INVALID_ARGUMENT")
    assert picture(uc_service) == before


def test_an_external_table_is_registered_at_its_newest_version(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    b = uc_service.backend
    loc = b.new_location()
    b.write(delta_file(loc, 0), ndjson(version0()))
    made = ok(uc_service, "POST", "/tables", {
        "name": "ext", "catalog_name": w.catalog, "schema_name": w.schema, "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "storage_location": loc, "columns": COLUMNS})
    info = uc_service.client().get_table(made["table_id"])
    assert info.location == loc and info.name == f"{w.catalog}.{w.schema}.ext"
    assert made["table_type"] == "EXTERNAL" and made["properties"]["io.unitycatalog.tableId"] == made["table_id"]


def test_an_external_table_outside_every_root_is_permission_denied(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    before = picture(uc_service)
    status, payload = uc(uc_service, "POST", "/tables", {
        "name": "ext", "catalog_name": w.catalog, "schema_name": w.schema, "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "storage_location": "file:///etc/elsewhere", "columns": []})
    assert_uc_error(status, payload, 403, "PERMISSION_DENIED")
    assert picture(uc_service) == before


def test_a_table_registered_through_api_v1_with_a_name_is_the_same_table_by_name(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    b = uc_service.backend
    loc = b.new_location()
    info = uc_service.client().register_table(loc, current_version=-1, name=f"{w.catalog}.{w.schema}.v1t")
    assert info.name == f"{w.catalog}.{w.schema}.v1t"
    got = ok(uc_service, "GET", f"/tables/{w.catalog}.{w.schema}.v1t")
    assert got["table_id"] == info.table_id and got["storage_location"] == loc
    assert uc_service.client().get_table(info.table_id).name == info.name


def test_api_v1_refuses_a_bad_or_taken_name_and_changes_nothing(uc_service: Service) -> None:
    from client import AlreadyExistsError, InvalidArgumentError, NotFoundError

    w = Writer(uc_service).names()
    w.create()
    b = uc_service.backend
    loc = b.new_location()
    c = uc_service.client()
    before = picture(uc_service, loc)
    for name, err in [(w.full_name, AlreadyExistsError), (f"{w.catalog}.nope.t", NotFoundError),
                      ("only.two", InvalidArgumentError)]:
        try:
            c.register_table(loc, current_version=-1, name=name)
        except err:
            pass
        else:
            raise AssertionError(f"{name} was accepted")
        assert picture(uc_service, loc) == before


def test_a_managed_table_without_a_location_gets_one_under_the_managed_root(uc_service: Service) -> None:
    """What Polars' and Daft's create_table send: MANAGED, no storage_location (and Daft: no columns)."""
    w = Writer(uc_service).names()
    made = ok(uc_service, "POST", "/tables", {"name": "m", "catalog_name": w.catalog, "schema_name": w.schema,
                                              "table_type": "MANAGED", "data_source_format": "DELTA",
                                              "columns": COLUMNS})
    assert made["storage_location"] == f"{uc_service.backend.managed_location()}/{made['table_id']}"
    assert (made["table_type"], made["columns"]) == ("MANAGED", COLUMNS)
    assert ok(uc_service, "GET", f"/tables/{w.catalog}.{w.schema}.m") == made
    info = uc_service.client().get_table(made["table_id"])
    assert (info.location, info.commit_dir, info.latest_table_version) == (made["storage_location"],
                                                                           "_staged_commits", -1)


def test_a_table_without_a_location_is_refused_unless_managed_and_changes_nothing(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    w.create()
    base = {"name": "x", "catalog_name": w.catalog, "schema_name": w.schema, "data_source_format": "DELTA"}
    before = picture(uc_service, w.location)
    for body, status_code, code, says in [
        ({**base, "table_type": "EXTERNAL"}, 400, "INVALID_ARGUMENT", "storage_location is required"),
        ({**base, "table_type": "EXTERNAL", "storage_location": ""}, 400, "INVALID_ARGUMENT", "storage_location"),
        ({**base, "table_type": "MANAGED", "name": w.table}, 409, "ALREADY_EXISTS", w.table),
        ({**base, "table_type": "MANAGED", "schema_name": "nope"}, 404, "NOT_FOUND", "nope"),
        ({**base, "table_type": "MANAGED", "data_source_format": "PARQUET"}, 400, "INVALID_ARGUMENT", "DELTA"),
        ({**base, "table_type": "MANAGED", "columns": [{"type_text": "int"}]}, 400, "INVALID_ARGUMENT", "columns[0]"),
    ]:
        status, payload = uc(uc_service, "POST", "/tables", body)
        assert_uc_error(status, payload, status_code, code)
        assert says in payload["message"], payload
    assert picture(uc_service, w.location) == before


def test_api_v1_names_a_catalog_managed_table_managed_and_refuses_a_type_that_does_not_fit(
        uc_service: Service) -> None:
    from client import InvalidArgumentError

    w = Writer(uc_service).names()
    c = uc_service.client()
    loc = uc_service.backend.new_location()
    before = picture(uc_service, loc)
    for kw, says in [({"table_type": "MANAGED", "commit_dir": "_commits", "name": f"{w.full_name}1"}, "commitDir"),
                     ({"table_type": "VIEW", "commit_dir": "_staged_commits", "name": f"{w.full_name}1"}, "tableType"),
                     ({"table_type": "MANAGED", "commit_dir": "_staged_commits"}, "only for a table registered")]:
        with pytest.raises(InvalidArgumentError, match=says):
            c.register_table(loc, current_version=-1, **kw)
        assert picture(uc_service, loc) == before
    info = c.register_table(loc, current_version=-1, commit_dir="_staged_commits", name=f"{w.full_name}1",
                            table_type="MANAGED")
    got = ok(uc_service, "GET", f"/tables/{w.full_name}1")
    assert (got["table_id"], got["table_type"], got["storage_location"]) == (info.table_id, "MANAGED", loc)


def test_unknown_routes_answer_unity_catalogs_envelope_and_api_v1_keeps_its_own(uc_service: Service) -> None:
    before = picture(uc_service)
    status, payload = uc(uc_service, "GET", "/volumes")
    assert_uc_error(status, payload, 404, "NOT_FOUND")
    status, payload = uc(uc_service, "PUT", "/catalogs", {"name": "x"})
    assert status == 405 and payload["details"][0]["reason"] == payload["error_code"]
    assert picture(uc_service) == before
    from tests.security.conftest import call

    status, payload, _ = call(uc_service.endpoint, "GET", "/api/v1/tables/00000000-0000-0000-0000-000000000000")
    assert status == 404 and payload["error"]["code"] == "TABLE_NOT_FOUND"
