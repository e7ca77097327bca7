"""Versions that mean something (issue 43, decision 81): `commit-owner --version` names the release and the schema
revision it needs; a build serves its own schema revision, asks for `migrate` on an older one, runs on a newer one
only when that one's migration says this build's code still runs on it, and otherwise refuses in one line
naming the release to run; an older build never migrates a newer schema. Real SQLite files and PostgreSQL.

A "newer release" is made the way one would arrive: a later migration's rows (``alembic_version`` moved on and
its ``schema_compatibility`` row), written into a store this build migrated.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from sqlalchemy import create_engine, text

import coordinator
from client.contract.errors import SchemaOutOfDateError
from coordinator.store import migrate, open_engine
from coordinator.store.engine import head_revision, known_revisions, sync_url
from tests.support import ROOT


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/versions.db"
    return request.getfixturevalue("pg_database_factory")()


def _sql(url: str, *statements: str) -> list[Any]:
    engine = create_engine(sync_url(url))
    try:
        with engine.begin() as conn:
            return [conn.execute(text(s)).all() if s.lstrip().upper().startswith("SELECT") else conn.execute(text(s))
                    for s in statements]
    finally:
        engine.dispose()


def _newer(url: str, oldest_code: str | None, written_by: str = "9.9.0") -> None:
    """The store as a later release's migration leaves it: revision 9999, saying which code still runs on it."""
    statements = ["UPDATE alembic_version SET version_num = '9999'"]
    if oldest_code is not None:
        statements.append("INSERT INTO schema_compatibility (revision, oldest_code_revision, written_by) "
                          f"VALUES ('9999', '{oldest_code}', '{written_by}')")
    _sql(url, *statements)


async def _opens(url: str) -> None:
    async with open_engine(url, pool_size=1, timeout=10):
        pass


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_the_version_names_the_release_and_its_schema_revision() -> None:
    out = _cli("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"commit-owner {coordinator.__version__} (schema revision {head_revision()})"
    import tomllib

    assert coordinator.__version__ == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert known_revisions()[0] == "0001" and known_revisions()[-1] == head_revision()


async def test_a_build_serves_its_schema_and_asks_for_migrate_on_an_older_one(url: str) -> None:
    migrate(url)
    await _opens(url)
    rows = _sql(url, "SELECT revision, oldest_code_revision FROM schema_compatibility ORDER BY revision")[0]
    assert [tuple(r) for r in rows] == [("0008", "0007"), ("0009", "0007")]
    _sql(url, "UPDATE alembic_version SET version_num = '0007'")
    with pytest.raises(SchemaOutOfDateError, match="at revision 0007 but this service needs .*run `commit-owner migrate"):
        await _opens(url)


async def test_a_newer_schema_that_keeps_this_builds_statements_valid_is_served(url: str,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    migrate(url)
    _newer(url, oldest_code=head_revision())
    with caplog.at_level("WARNING", logger="commit_owner.store"):
        await _opens(url)
    assert "revision 9999 (written by delta-commit-owner 9.9.0), newer than this build's" in caplog.text


@pytest.mark.parametrize("oldest_code", ["9999", None])
async def test_a_newer_schema_this_build_cannot_run_on_is_refused_in_one_line(url: str, oldest_code: str | None) -> None:
    migrate(url)
    _newer(url, oldest_code)
    by = "delta-commit-owner 9.9.0" if oldest_code else "a newer delta-commit-owner"
    with pytest.raises(SchemaOutOfDateError) as e:
        await _opens(url)
    assert str(e.value) == (f"the database schema is at revision 9999, written by {by}, which this build "
                            f"(delta-commit-owner {coordinator.__version__}, schema revision {head_revision()}) "
                            f"cannot run on: run {by} or later")


def test_an_older_build_never_migrates_a_newer_schema(url: str) -> None:
    migrate(url)
    _newer(url, oldest_code=head_revision())
    before = _sql(url, "SELECT version_num FROM alembic_version", "SELECT * FROM schema_compatibility ORDER BY revision")
    out = _cli("migrate", "--database-url", url)
    assert out.returncode == 3, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "at revision 9999, written by delta-commit-owner 9.9.0, newer than this build" in lines[0]
    assert "nothing migrated" in lines[0]
    assert _sql(url, "SELECT version_num FROM alembic_version",
                "SELECT * FROM schema_compatibility ORDER BY revision") == before
