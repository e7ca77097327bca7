"""`commit-owner store ...`: the ownership store as a whole. `store backup PATH` and `store restore PATH` copy a
SQLite store with SQLite's online backup API (coordinator/store/backup.py); a PostgreSQL store is backed up with
PostgreSQL's own tools (docs/runbook.md, "Backup and restore")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from coordinator.cli.options import load_settings, settings_options

if TYPE_CHECKING:
    from coordinator.store.backup import Contents

# What comes after a restore: the tables' logs may hold versions the restored store never heard of.
AFTER_RESTORE = ("the restored store may be behind the tables' logs (versions committed after the backup was "
                 "taken): run `commit-owner store check`, then `commit-owner tables reconcile <table>` for each "
                 "table it finds ahead, before writers come back (docs/runbook.md, \"Backup and restore\")")


@click.group("store")
def store() -> None:
    """The ownership store as a whole: back it up, restore it (SQLite; PostgreSQL: docs/runbook.md), check it
    against the tables' logs."""


def _figures(c: Contents) -> str:
    return f"{c.tables} table(s), {c.commits} commit row(s), schema revision {c.revision}, {c.bytes:,} bytes"


@store.command("backup")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(("database_url",))
def store_backup(path: str, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Copy the SQLite store to the new file PATH, consistent as of one moment, while the service serves.

    PATH must not exist (nothing is ever overwritten). The copy is one self-contained file, checked with
    SQLite's integrity check before it appears at PATH.
    """
    from coordinator.store.backup import backup_store

    settings = load_settings(config, **overrides)
    out = backup_store(settings.database_url, path)
    if as_json:
        click.echo(json.dumps(out.as_dict(), indent=2))
        return
    click.echo(f"backed up to {out.path}: {_figures(out)}; integrity ok")


@store.command("restore")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(("database_url",))
def store_restore(path: str, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Put the backup PATH (made by `store backup`) in place of the SQLite store; the store it replaces is kept
    beside it as <store>.before-restore-<UTC time>.

    Refused, changing nothing, while any process has the store open (stop the service first), and for a file
    that is not a store of this project. Then run `commit-owner store check`: the tables' logs may be ahead.
    """
    from coordinator.store.backup import restore_store

    settings = load_settings(config, **overrides)
    out = restore_store(settings.database_url, path)
    if as_json:
        click.echo(json.dumps({"restored": out.restored.as_dict(), "from": str(Path(path).resolve()),
                               "replaced": out.replaced.as_dict() if out.replaced else None,
                               "keptAt": out.kept_at, "migrateNeeded": out.migrate_needed, "next": AFTER_RESTORE},
                              indent=2))
        return
    click.echo(f"restored {out.restored.path} from {Path(path).resolve()}: {_figures(out.restored)}; integrity ok")
    if out.replaced is not None:
        click.echo(f"the store it replaced is kept at {out.kept_at}: {_figures(out.replaced)}")
    else:
        click.echo("there was no store at that path: nothing kept aside")
    if out.migrate_needed:
        click.echo("the backup's schema is older than this build's: run `commit-owner migrate` before serving")
    click.echo(f"next: {AFTER_RESTORE}")
