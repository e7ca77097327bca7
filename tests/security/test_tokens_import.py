"""`commit-owner tokens generate|import`: a deployment's first token, made outside and stored once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import make_backend
from tests.security.conftest import cli
from tests.support import Backend


@pytest.fixture(scope="module")
def b(request: pytest.FixtureRequest) -> Backend:
    return make_backend(request, "sqlite", "local", "tok-import")


def rows(b: Backend) -> list[dict]:
    return json.loads(cli(b, "tokens", "list", "--json").stdout)


def import_env(b: Backend, token: str, *scopes: str) -> object:
    os.environ["TEST_IMPORTED_TOKEN"] = token
    try:
        return cli(b, "tokens", "import", *[a for s in scopes or ("*:admin",) for a in ("--scope", s)],
                   "--from-env", "TEST_IMPORTED_TOKEN", check=False)
    finally:
        del os.environ["TEST_IMPORTED_TOKEN"]


def test_a_generated_token_is_imported_once_and_then_works_as_a_bearer_token(b: Backend, tmp_path: Path) -> None:
    token = cli(b, "tokens", "generate").stdout.strip()
    token_id = token.split("_")[1]
    assert token_id not in {r["id"] for r in rows(b)}  # generate stores nothing
    first = import_env(b, token)
    assert first.returncode == 0 and f"token {token_id} imported (*:admin)" in first.stderr
    assert token not in first.stdout + first.stderr
    again = import_env(b, token, "*:read")
    assert again.returncode == 0 and "already present (*:admin)" in again.stderr  # scopes of the stored one
    path = tmp_path / "secret"
    path.write_text(token + "\n")
    assert cli(b, "tokens", "import", "--scope", "*:admin", "--from-file", str(path), check=False).returncode == 0
    assert [r["scopes"] for r in rows(b) if r["id"] == token_id] == [[{"prefix": "*", "actions": ["admin"]}]]


def test_import_never_replaces_another_secret_or_revives_a_revoked_token(b: Backend) -> None:
    token = cli(b, "tokens", "generate").stdout.strip()
    assert import_env(b, token).returncode == 0
    prefix, token_id, _ = token.split("_", 2)
    impostor = f"{prefix}_{token_id}_{'A' * 43}"
    before = rows(b)
    res = import_env(b, impostor)
    assert res.returncode == 1 and f"token id {token_id} is already stored with another secret" in res.stderr
    assert rows(b) == before
    cli(b, "tokens", "revoke", token_id)
    revoked = rows(b)
    res = import_env(b, token)
    assert res.returncode == 1 and "was revoked" in res.stderr
    assert rows(b) == revoked


@pytest.mark.parametrize("value, message", [
    ("", "is empty or unset"), ("not-a-token", "does not hold a token"), ("dco_xyz_short", "does not hold a token"),
])
def test_import_of_something_that_is_no_token_is_a_usage_error(b: Backend, value: str, message: str) -> None:
    before = rows(b)
    res = import_env(b, value)
    assert res.returncode == 2 and message in res.stderr
    assert rows(b) == before
