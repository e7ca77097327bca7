"""The operator's command line: `tables list|show`, `config show|docs`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from coordinator.cli.config_docs import render
from coordinator.runtime.settings import SETTINGS
from tests.ops.helpers import post_commit
from tests.support import ROOT, Service, actions, create_owned_table


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`commit-owner ARGS` as a real subprocess (for commands that open the database)."""
    import os

    e = {k: v for k, v in os.environ.items() if not k.startswith("COMMIT_OWNER_")}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "coordinator", *args], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=60, env=e)


def cli_here(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The same command line run in this process (click's runner): for commands that only read settings."""
    from click.testing import CliRunner

    from coordinator.cli.main import main

    r = CliRunner().invoke(main, list(args), env=env, prog_name="commit-owner")
    return subprocess.CompletedProcess(["commit-owner", *args], r.exit_code, r.stdout, r.stderr)


def test_tables_list_shows_versions_backlog_and_last_commit(manual_service: Service) -> None:
    svc = manual_service
    table_id, loc = create_owned_table(svc)
    for v in (1, 2):
        assert post_commit(svc, table_id, v, actions())[0] == 200
    db = svc.backend.database_url
    res = cli("tables", "list", "--json", "--database-url", db)
    assert res.returncode == 0, res.stderr
    [row] = [r for r in json.loads(res.stdout) if r["tableId"] == table_id]
    assert row["location"] == loc
    assert (row["latestTableVersion"], row["latestBackfilledVersion"], row["unbackfilledCommits"]) == (2, 0, 2)
    assert row["acceptingCommits"] is True
    assert row["lastCommitTime"].endswith("Z") and row["lastCommitTime"][:2] == "20"

    res = cli("tables", "list", "--database-url", db)
    assert res.returncode == 0, res.stderr
    header, *lines = res.stdout.splitlines()
    for col in ("TABLE ID", "NAME", "LATEST", "BACKFILLED", "UNBACKFILLED", "ACCEPTING", "LAST COMMIT", "LOCATION"):
        assert col in header
    [line] = [ln for ln in lines if ln.startswith(table_id)]
    assert line.split()[1:6] == ["-", "2", "0", "2", "yes"] and line.endswith(loc)  # "-": the table has no name


def test_tables_show_by_location_lists_recent_commits_and_unknown_exits_1(manual_service: Service) -> None:
    svc = manual_service
    table_id, loc = create_owned_table(svc)
    assert post_commit(svc, table_id, 1, actions())[0] == 200
    res = cli("tables", "show", loc, "--json", "--database-url", svc.backend.database_url)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["tableId"] == table_id and [c["version"] for c in info["recentCommits"]] == [1]
    assert info["recentCommits"][0]["backfilled"] is False

    res = cli("tables", "show", "00000000-0000-0000-0000-000000000000", "--database-url", svc.backend.database_url)
    assert res.returncode == 1 and "no table" in res.stderr


def test_config_show_gives_sources_and_masks_secrets(tmp_path: Path) -> None:
    cfg = tmp_path / "owner.toml"
    cfg.write_text('[commit-owner]\nport = 9123\ns3_region = "eu-west-3"\n')
    res = cli_here("config", "show", "--json", "--config", str(cfg), "--log-level", "DEBUG",
              env={"COMMIT_OWNER_S3_SECRET_ACCESS_KEY": "very-secret-key",
                   "COMMIT_OWNER_DATABASE_URL": "postgresql+psycopg://owner:pg-password@db/x",
                   "COMMIT_OWNER_S3_REGION": "us-west-2"})
    assert res.returncode == 0, res.stderr
    shown = json.loads(res.stdout)
    assert set(shown) == {s.name for s in SETTINGS}
    assert shown["port"] == {"value": 9123, "source": f"file {cfg}"}
    assert shown["s3_region"] == {"value": "us-west-2", "source": "env COMMIT_OWNER_S3_REGION"}
    assert shown["log_level"] == {"value": "DEBUG", "source": "flag"}
    assert shown["host"]["source"] == "default"
    assert shown["s3_secret_access_key"]["value"] == "***"
    assert "very-secret-key" not in res.stdout and "pg-password" not in res.stdout


def test_config_show_refuses_a_bad_value_with_exit_2() -> None:
    res = cli_here("config", "show", env={"COMMIT_OWNER_PORT": "eighty"})
    assert res.returncode == 2 and "COMMIT_OWNER_PORT" in res.stderr


def test_the_configuration_reference_documents_every_setting_and_is_current() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for s in SETTINGS:
        assert f"| `{s.name}` |" in doc, f"setting {s.name} is not documented in docs/configuration.md"
        assert f"`{s.env}`" in doc and f"`{s.option}`" in doc
    assert doc == render(), "docs/configuration.md is stale: run `commit-owner config docs --output docs/configuration.md`"
    res = cli_here("config", "docs", "--check", str(ROOT / "docs" / "configuration.md"))
    assert res.returncode == 0, res.stderr


def test_config_docs_check_fails_on_a_stale_reference(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(render().replace("| `port` |", "| `prot` |"))
    res = cli_here("config", "docs", "--check", str(stale))
    assert res.returncode == 1 and "stale" in res.stderr


def test_exit_codes_are_the_documented_ones(tmp_path: Path) -> None:
    from tests.support import free_port

    dead = f"postgresql+psycopg://postgres:pw-not-shown@127.0.0.1:{free_port()}/nothing"
    res = cli("tables", "list", "--database-url", dead)
    assert res.returncode == 2 and res.stderr.startswith("error: cannot use the database")
    assert "Traceback" not in res.stderr and "pw-not-shown" not in res.stderr
    res = cli("tables", "list", "--database-url", f"sqlite+aiosqlite:///{tmp_path}/never-migrated.db")
    assert res.returncode == 3 and "commit-owner migrate" in res.stderr
    res = cli_here("tables", "list", "--no-such-flag")
    assert res.returncode == 2
    # A libpq parameter that does not exist is refused when the settings load, before anything connects
    res = cli_here("tables", "list", "--database-url", "postgresql+psycopg://postgres@127.0.0.1/x?keepalive=1")
    assert res.returncode == 2 and 'invalid connection option "keepalive"' in res.stderr, res.stderr


def test_a_reader_that_went_away_is_no_error() -> None:
    """`commit-owner ... | head`: once the reader closed the pipe, the command stops quietly (exit 0), without
    an error line about a broken pipe."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written
    try:
        done = subprocess.run([sys.executable, "-m", "coordinator", "config", "show"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")
