"""Bearer tokens and location scopes on the Delta REST Catalog API: the same tokens as the other APIs, tables
judged by their location; every refusal answers this API's envelope and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import make_backend
from tests.delta.conftest import V1Writer, assert_delta_error, v1
from tests.security.conftest import call, store_token
from tests.support import Service
from tests.unity.conftest import picture


@pytest.fixture(scope="module")
def auth_service(request: pytest.FixtureRequest) -> Iterator[Service]:
    b = make_backend(request, "sqlite", "local", "delta-auth")
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens", "COMMIT_OWNER_BACKFILL": "false"}).start()
    yield svc
    svc.stop()


def test_no_token_is_not_authorized_in_this_apis_envelope(auth_service: Service) -> None:
    status, payload, headers = call(auth_service.endpoint, "GET",
                                    "/api/2.1/unity-catalog/delta/v1/catalogs/c/schemas/s/tables/t")
    assert_delta_error(status, payload, 401, "NotAuthorizedException")
    assert headers["WWW-Authenticate"].startswith("Bearer")


def test_reading_committing_and_creating_follow_the_tokens_scopes(auth_service: Service) -> None:
    b = auth_service.backend
    managed = b.managed_location()
    admin = store_token(b, "*:admin")
    w = V1Writer(auth_service, token=admin).names()
    w.create()
    reader = store_token(b, f"{managed}:read")
    elsewhere = store_token(b, f"{b.new_location('elsewhere')}:commit")
    committer = store_token(b, f"{managed}:commit")
    name = w.stage(1)
    before = picture(auth_service, w.location)
    # a token for another prefix may not even see the table: it is answered as a name that names none
    assert_delta_error(*v1(auth_service, "GET", w.path, token=elsewhere), 404, "NoSuchTableException")
    # read may load, not commit, not stage a new table, not drop it
    assert v1(auth_service, "GET", w.path, token=reader)[0] == 200
    assert_delta_error(*v1(auth_service, "POST", w.path, w.update_body(1, name), token=reader), 403,
                       "PermissionDeniedException")
    assert_delta_error(*v1(auth_service, "POST", f"/catalogs/{w.catalog}/schemas/s/staging-tables", {"name": "u"},
                           token=committer), 403, "PermissionDeniedException")
    assert_delta_error(*v1(auth_service, "DELETE", w.path, token=committer), 403, "PermissionDeniedException")
    assert picture(auth_service, w.location) == before
    # commit may commit
    status, reply = v1(auth_service, "POST", w.path, w.update_body(1, name), token=committer)
    assert status == 200 and reply["latest-table-version"] == 1, reply
