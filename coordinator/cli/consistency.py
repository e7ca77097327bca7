"""`commit-owner store check` (a command of the `store` group of coordinator/cli/store.py) and `commit-owner
tables reconcile`: the store against the log, and a restored store brought up to the log
(coordinator/ops/store_check.py, coordinator/ops/reconcile.py; docs/runbook.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click

from coordinator.cli.options import load_settings, settings_options

_DIRECT = ("database_url", "s3_endpoint_url", "s3_region", "s3_access_key_id", "s3_secret_access_key",
           "request_timeout_seconds")


@click.command("check")
@click.option("--table", "table", default=None, help="Only this table (id, catalog.schema.table or location).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(_DIRECT)
def store_check(table: str | None, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Compare the store with storage, table by table; change nothing. Exit 1 on a mismatch.

    Every ratified version's staged file is there with its recorded size and SHA-256 (or the row keeps its
    bytes); every version through the backfilled one is published as <v>.json, with the ratified bytes;
    nothing is published beyond the latest version. Files log cleanup removed below a checkpoint are not
    mismatches.
    """
    from coordinator.ops.store_check import check_store

    out = asyncio.run(check_store(load_settings(config, **overrides), table))
    if as_json:
        click.echo(json.dumps(out, indent=2))
    else:
        for t in out["tables"]:
            head = f"{t['location']} ({t['tableId']}, {t['status']}, latest {t['latestVersion']}, backfilled " \
                   f"{t['latestBackfilledVersion']}): "
            if t["skipped"]:
                click.echo(head + f"skipped ({t['skipped']})")
                continue
            figures = f"{t['ratifiedChecked']} ratified, {t['publishedChecked']} published checked" + (
                f"; {t['cleanedFiles']} file(s) cleaned below checkpoint {t['cleanedBelow']}" if t["cleanedFiles"] else "")
            click.echo(head + ("ok, " if t["ok"] else f"MISMATCH ({t['problemCount']}), ") + figures)
            for p in t["problems"]:
                click.echo(f"  {p['kind']} v{p['version']}: {p['message']}")
            if t["problemCount"] > len(t["problems"]):
                click.echo(f"  ... {t['problemCount'] - len(t['problems'])} more")
        click.echo(f"{out['checked']} table(s) checked, {out['mismatched']} with mismatches")
    sys.exit(0 if out["ok"] else 1)


@click.command("reconcile")
@click.argument("table")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(_DIRECT)
def tables_reconcile(table: str, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Adopt the versions published beyond the store's record (after a restore from an older backup).

    The published <latest+1>.json .. <top>.json must be one contiguous chain of valid Delta commits with
    increasing inCommitTimestamps; they are recorded as ratified and published in one database transaction.
    Anything else is refused and changes nothing.
    """
    from coordinator.ops.reconcile import reconcile_table

    out = asyncio.run(reconcile_table(load_settings(config, **overrides), table))
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"reconciled {out['location']}: adopted versions {out['adoptedFrom']}..{out['adoptedThrough']} "
               f"({out['adopted']} version(s), {out['stagedCopiesWritten']} staged copies written); latest and "
               f"published version now {out['latestVersion']}")


__all__ = ["store_check", "tables_reconcile"]
