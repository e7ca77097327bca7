"""Bearer tokens and location-prefix scopes on the Unity Catalog facade: the same tokens as /api/v1,
catalogs and schemas need admin over every location, tables are judged by their location. Every
refusal answers UC's envelope and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import make_backend
from tests.security.conftest import call, store_token
from tests.support import Service
from tests.unity.conftest import UC, Writer, assert_uc_error, ok, picture, uc


@pytest.fixture(scope="module")
def auth_service(request: pytest.FixtureRequest) -> Iterator[Service]:
    b = make_backend(request, "sqlite", "local", "uc-auth")
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens", "COMMIT_OWNER_BACKFILL": "false"}).start()
    yield svc
    svc.stop()


def test_no_token_is_unauthenticated_in_ucs_envelope(auth_service: Service) -> None:
    before = picture(auth_service)
    status, payload, headers = call(auth_service.endpoint, "POST", UC + "/catalogs", b'{"name": "x"}')
    assert_uc_error(status, payload, 401, "UNAUTHENTICATED")
    assert headers["WWW-Authenticate"].startswith("Bearer")
    status, payload = uc(auth_service, "GET", "/catalogs", token="dco_0000000000000000_nope")
    assert_uc_error(status, payload, 401, "UNAUTHENTICATED")
    assert picture(auth_service) == before


def test_catalogs_and_schemas_need_admin_over_every_location(auth_service: Service) -> None:
    b = auth_service.backend
    managed = b.managed_location()
    prefix_admin = store_token(b, f"{managed}:admin")
    admin = store_token(b, "*:admin")
    before = picture(auth_service)
    status, payload = uc(auth_service, "POST", "/catalogs", {"name": "blocked"}, prefix_admin)
    assert_uc_error(status, payload, 403, "PERMISSION_DENIED")
    assert picture(auth_service) == before
    w = Writer(auth_service, token=admin).names()
    before = picture(auth_service)
    for method, path, body in [("POST", "/schemas", {"name": "s2", "catalog_name": w.catalog}),
                               ("DELETE", f"/schemas/{w.catalog}.{w.schema}", None),
                               ("DELETE", f"/catalogs/{w.catalog}", None)]:
        status, payload = uc(auth_service, method, path, body, prefix_admin)
        assert_uc_error(status, payload, 403, "PERMISSION_DENIED")
    assert picture(auth_service) == before
    # reading names needs only read
    reader = store_token(b, f"{managed}:read")
    assert ok(auth_service, "GET", f"/schemas?catalog_name={w.catalog}", token=reader)["schemas"][0]["name"] == "s"


def test_tables_are_judged_by_their_location(auth_service: Service) -> None:
    b = auth_service.backend
    managed = b.managed_location()
    admin = store_token(b, "*:admin")
    w = Writer(auth_service, token=admin).names()
    w.create()
    reader = store_token(b, f"{managed}:read")
    committer = store_token(b, f"{managed}:commit")
    outsider = store_token(b, f"file://{b.tmp}/elsewhere:admin")

    assert ok(auth_service, "GET", f"/tables/{w.full_name}", token=reader)["table_id"] == w.table_id
    listed = ok(auth_service, "GET", f"/tables?catalog_name={w.catalog}&schema_name={w.schema}", token=outsider)
    assert listed["tables"] == []
    name = w.stage(1)
    before = picture(auth_service, w.location)
    # a token whose scopes do not cover the table may not see it: its name is answered as one naming none
    for method in ("GET", "DELETE"):
        assert_uc_error(*uc(auth_service, method, f"/tables/{w.full_name}", token=outsider), 404, "TABLE_NOT_FOUND")
    for token, method, path, body in [
        (reader, "DELETE", f"/tables/{w.full_name}", None),
        (reader, "POST", "/delta/preview/commits", w.commit_body(1, name)),
        (outsider, "GET", "/delta/preview/commits",
         {"table_id": w.table_id, "table_uri": w.location, "start_version": 0}),
        (outsider, "POST", "/staging-tables", {"name": "t2", "catalog_name": w.catalog, "schema_name": w.schema}),
        (committer, "POST", "/staging-tables", {"name": "t2", "catalog_name": w.catalog, "schema_name": w.schema}),
    ]:
        status, payload = uc(auth_service, method, path, body, token)
        assert_uc_error(status, payload, 403, "PERMISSION_DENIED")
        assert picture(auth_service, w.location) == before, (method, path)
    assert uc(auth_service, "POST", "/delta/preview/commits", w.commit_body(1, name), committer) == (200, {})
    page = ok(auth_service, "GET", "/delta/preview/commits",
              {"table_id": w.table_id, "table_uri": w.location, "start_version": 0}, reader)
    assert [c["file_name"] for c in page["commits"]] == [name]
