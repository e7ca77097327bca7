"""`commit-owner staging list / clean`: staging reservations (POST /staging-tables), straight against the database.

A reservation never turned into a table expires after ``staging_expiry_seconds``; the service's janitor
removes it (and, where safe, the files under its location) on its rounds, `staging clean` does one round now
(coordinator/ops/staging.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click

from coordinator.cli.options import load_settings, settings_options

_STORAGE = ("database_url", "s3_endpoint_url", "s3_region", "s3_access_key_id", "s3_secret_access_key",
            "managed_location", "staging_expiry_seconds")


@click.group()
def staging() -> None:
    """Staging reservations of the Unity Catalog facade: list them, expire the old ones."""


@staging.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(("database_url", "staging_expiry_seconds"))
def staging_list(as_json: bool, config: str | None, **overrides: Any) -> None:
    """Every reservation: id, name, age, when it expires, location."""
    from coordinator.ops.context import iso_time
    from coordinator.ops.staging import list_reservations

    rows = asyncio.run(list_reservations(load_settings(config, **overrides)))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'ID':36}  {'AGE':>9}  {'EXPIRES':20}  {'NAME':30}  LOCATION")
    for r in rows:
        click.echo(f"{r['id']:36}  {r['ageSeconds']:>8}s  {iso_time(r['expiresAt']) or 'never':20}  {r['name']:30}  "
                   f"{r['location']}")


@staging.command("clean")
@click.option("--dry-run", is_flag=True, help="Report what would expire; remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(_STORAGE)
def staging_clean(dry_run: bool, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Remove reservations older than --staging-expiry-seconds and, where safe, the files under their location."""
    from coordinator.ops.staging import clean_reservations

    rep = asyncio.run(clean_reservations(load_settings(config, **overrides), dry_run=dry_run))
    if as_json:
        click.echo(json.dumps(rep, indent=2))
    else:
        verb = "would remove" if dry_run else "removed"
        click.echo(f"reservations expired: {rep['reservationsExpired']}, files {verb}: "
                   f"{rep['filesRemoved'] if not dry_run else sum(r.get('files', 0) for r in rep['expired'])}, "
                   f"errors {rep['errors']} (expiry {rep['expirySeconds']:.0f}s)")
        for r in rep["expired"]:
            kept = f"; files kept: {r['filesKept']}" if r.get("filesKept") else ""
            click.echo(f"  {r['id']} {r['name']} {r['location']} ({r.get('files', 0)} file(s){kept})"
                       + (f" ERROR {r['error']}" if r.get("error") else ""))
    sys.exit(1 if rep["errors"] else 0)
