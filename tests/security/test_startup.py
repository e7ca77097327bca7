"""Listening on a non-loopback address requires tokens, unless forced with a flag that logs a warning."""

from __future__ import annotations

import subprocess
import sys

import pytest

from client.errors import UnauthenticatedError
from tests.conftest import make_backend
from tests.support import ROOT, Service, free_port


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator", "serve", "--database-url",
                           "sqlite+aiosqlite:////nonexistent/never-opened.db", *args],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", ""])
def test_serve_without_auth_on_a_non_loopback_address_refuses_to_start(host: str) -> None:
    res = serve("--host", host, "--port", str(free_port()))
    assert res.returncode == 2
    assert "refusing to listen" in res.stderr and "--auth tokens" in res.stderr
    assert "--allow-insecure-no-auth" in res.stderr
    assert "listening on" not in res.stderr


def test_an_unknown_auth_mode_is_a_usage_error() -> None:
    res = serve("--auth", "maybe")
    assert res.returncode == 2 and "auth must be tokens or none" in res.stderr


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
