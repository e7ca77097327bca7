"""Listening on a non-loopback address requires tokens, unless forced with a flag that logs a warning."""

from __future__ import annotations

import subprocess
import sys

import pytest

from client.contract.errors import UnauthenticatedError
from tests.conftest import make_backend
from tests.support import ROOT, Service, free_port


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator", "serve", "--database-url",
                           "sqlite+aiosqlite:////nonexistent/never-opened.db", *args],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=60)


def test_serve_without_auth_on_0_0_0_0_refuses_to_start_with_a_clear_message() -> None:
    res = serve("--host", "0.0.0.0", "--port", str(free_port()))
    assert res.returncode == 2
    assert "refusing to listen on 0.0.0.0 without authentication" in res.stderr
    assert "--auth tokens" in res.stderr and "--allow-insecure-no-auth" in res.stderr
    assert "listening on" not in res.stderr


@pytest.mark.parametrize("host,refused", [
    ("0.0.0.0", True), ("::", True), ("192.0.2.10", True), ("", True), ("example.org", True),
    ("127.0.0.1", False), ("127.9.9.9", False), ("::1", False), ("[::1]", False), ("localhost", False),
])
def test_only_loopback_hosts_may_run_without_auth(host: str, refused: bool) -> None:
    from coordinator.api.auth import check_auth_mode
    from coordinator.runtime.settings import Settings

    settings = Settings.load({"host": host}, environ={})
    if refused:
        with pytest.raises(ValueError, match="refusing to listen"):
            check_auth_mode(settings)
        check_auth_mode(Settings.load({"host": host, "auth": "tokens"}, environ={}))
        check_auth_mode(Settings.load({"host": host, "allow_insecure_no_auth": True}, environ={}), warn=False)
    else:
        check_auth_mode(settings)


def test_an_unknown_auth_mode_is_a_usage_error() -> None:
    from coordinator.runtime.settings import Settings

    with pytest.raises(ValueError, match="auth must be tokens or none"):
        Settings.load({"auth": "maybe"}, environ={})


@pytest.mark.parametrize("extra", [{"COMMIT_OWNER_AUTH": "tokens"}, {"COMMIT_OWNER_ALLOW_INSECURE_NO_AUTH": "true"}])
def test_tokens_or_the_explicit_flag_let_it_listen_everywhere(request: pytest.FixtureRequest,
                                                              extra: dict[str, str]) -> None:
    b = make_backend(request, "sqlite", "local", "sec-start")
    svc = Service(b, extra_env={**extra, "COMMIT_OWNER_HOST": "0.0.0.0"})
    # Service.start sets the host to 127.0.0.1; the extra environment is applied after it.
    svc.start()
    try:
        if extra.get("COMMIT_OWNER_AUTH") == "tokens":
            with pytest.raises(UnauthenticatedError):
                svc.client().list_tables()
        else:
            assert svc.client().list_tables() == []
    finally:
        svc.stop()
    log = svc.log_text()
    if "COMMIT_OWNER_ALLOW_INSECURE_NO_AUTH" in extra:
        assert "authentication is OFF" in log
    else:
        assert "authentication is OFF" not in log
