"""The UI over plain HTTP: no page changes state, bad input gets the UI's error page (the API's code and message)
and changes nothing, the session cookie opens the UI only, and every page carries its safety headers."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from coordinator.api.app import ROUTES
from coordinator.api.routes import Permission
from coordinator.api.ui import UI
from tests.security.conftest import State
from tests.ui.conftest import World

pytestmark = pytest.mark.postgres
COOKIE = "commit_owner_ui_token"


def get(world: World, path: str, *, token: str | None = None, cookie: str | None = None,
        method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict, str]:
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    if cookie:
        h["Cookie"] = f"{COOKIE}={cookie}"
    req = urllib.request.Request(world.svc.endpoint + path, data=body, method=method, headers=h)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a: object, **k: object) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def _pages(world: World) -> list[str]:
    t = world.seeded.tables
    sales = world.seeded.catalogs[0]
    return ["/ui/", f"/ui/catalogs/{sales}", f"/ui/catalogs/{sales}/schemas/raw", "/ui/tables", "/ui/tables?unnamed=1",
            f"/ui/tables?q={sales}", "/ui/tables?q=file:///", f"/ui/tables/{t['orders']}",
            f"/ui/tables/{t['orders']}?before=5&hours=24", f"/ui/tables/{t['events']}/commits/3", "/ui/activity?hours=6"]


def test_only_sign_in_and_out_are_not_gets_and_no_page_changes_the_database_or_storage(ui_world: World) -> None:
    ui = [r for r in ROUTES if r.api is UI]
    assert {(r.method, r.path) for r in ui if r.method != "GET"} == {("POST", "/ui/login"), ("POST", "/ui/logout")}
    assert {r.path for r in ui if r.permission is Permission.PUBLIC} == {"/ui/static/ui.css", "/ui/login", "/ui/logout"}
    state = State(ui_world.svc.backend, *ui_world.seeded.locations.values())
    before = state.take()
    for path in _pages(ui_world):
        status, headers, body = get(ui_world, path, cookie=ui_world.admin)
        assert status == 200, (path, body[-500:])
        assert headers["Content-Type"].startswith("text/html")
        assert "script-src" not in headers["Content-Security-Policy"]  # default-src 'none': no script runs
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert headers["Cache-Control"] == "no-store" and headers["X-Content-Type-Options"] == "nosniff"
    status, headers, _ = get(ui_world, "/ui/login", method="POST", body=f"token={ui_world.ops}".encode(),
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 303 and COOKIE in headers["Set-Cookie"] and "HttpOnly" in headers["Set-Cookie"]
    assert "Secure" not in headers["Set-Cookie"]  # plain HTTP
    for proxy in ({"X-Forwarded-Proto": "https"}, {"Forwarded": "for=10.0.0.1;proto=https"}):  # TLS ended by a proxy
        status, headers, _ = get(ui_world, "/ui/login", method="POST", body=f"token={ui_world.ops}".encode(),
                                 headers={"Content-Type": "application/x-www-form-urlencoded", **proxy})
        assert status == 303 and "Secure" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    assert get(ui_world, "/ui/logout", method="POST")[0] == 303
    assert state.take() == before


@pytest.mark.parametrize("path, code", [
    ("/ui/tables?limit=0", "INVALID_ARGUMENT"),
    ("/ui/tables?limit=abc", "INVALID_ARGUMENT"),
    ("/ui/tables?color=red", "INVALID_ARGUMENT"),
    ("/ui/tables?q=" + "x" * 3000, "INVALID_ARGUMENT"),
    ("/ui/activity?hours=5", "INVALID_ARGUMENT"),
    ("/ui/tables/not-a-uuid", "INVALID_ARGUMENT"),
    ("/ui/tables/00000000-0000-4000-8000-000000000000", "TABLE_NOT_FOUND"),
    ("/ui/catalogs/nope", "NOT_FOUND"),
    ("/ui/catalogs/nope/schemas/nope", "NOT_FOUND"),
    ("/ui/no-such-page", "NOT_FOUND"),
])
def test_bad_input_gets_the_error_page_and_changes_nothing(ui_world: World, path: str, code: str) -> None:
    state = State(ui_world.svc.backend)
    before = state.take()
    status, headers, body = get(ui_world, path, cookie=ui_world.admin)
    assert 400 <= status < 500 and headers["Content-Type"].startswith("text/html")
    assert f'data-code="{code}"' in body, body[-800:]
    assert state.take() == before


def test_a_bad_version_and_a_foreign_sign_in_are_refused(ui_world: World) -> None:
    orders = ui_world.seeded.tables["orders"]
    for v in ("abc", "-1", "99", "9223372036854775807", "1" * 40):
        status, _, body = get(ui_world, f"/ui/tables/{orders}/commits/{v}", cookie=ui_world.admin)
        assert status in (400, 404) and 'id="error"' in body
    status, headers, body = get(ui_world, "/ui/login", method="POST", body=f"token={ui_world.admin}".encode(),
                                headers={"Content-Type": "application/x-www-form-urlencoded",
                                         "Origin": "http://evil.example"})
    assert status == 400 and "Set-Cookie" not in headers and "another site" in body
    status, headers, body = get(ui_world, "/ui/logout", method="POST", headers={"Origin": "http://evil.example"})
    assert status == 400 and "Set-Cookie" not in headers


def test_the_session_cookie_opens_the_ui_only_and_a_bad_token_gets_the_sign_in_form(ui_world: World) -> None:
    status, headers, body = get(ui_world, "/api/v1/tables", cookie=ui_world.admin)
    assert status == 401 and headers["Content-Type"].startswith("application/json")  # the API reads no cookie
    assert get(ui_world, "/api/v1/tables", token=ui_world.admin)[0] == 200
    assert get(ui_world, "/ui/", token=ui_world.admin)[0] == 200  # the header works on the UI too
    status, _, body = get(ui_world, "/ui/", cookie="dco_0123456789abcdef_" + "y" * 43)
    assert status == 401 and 'class="login"' in body and "invalid or revoked" in body
    status, headers, body = get(ui_world, "/ui/static/ui.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css") and "figure.chart" in body
