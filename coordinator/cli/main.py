"""The `commit-owner` command line.

Exit codes: 0 success, 1 the work failed (e.g. some backfills failed), 2 bad usage or configuration,
3 the database schema is out of date.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from coordinator.cli.bench import bench
from coordinator.cli.consistency import store_check, tables_reconcile
from coordinator.cli.exit_codes import ConfigError, OwnerGroup
from coordinator.cli.ops import MAINTENANCE_COMMANDS, TABLE_COMMANDS, config
from coordinator.cli.options import load_settings, settings_options
from coordinator.cli.staging import staging
from coordinator.cli.store import store
from coordinator.cli.tokens import tokens


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`--version`: the release (pyproject.toml's version) and the schema revision this build migrates to."""
    if not value or ctx.resilient_parsing:
        return
    from coordinator import __version__
    from coordinator.store.engine import head_revision

    click.echo(f"commit-owner {__version__} (schema revision {head_revision()})")
    ctx.exit()


@click.group(cls=OwnerGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the release and the schema revision it needs, and exit.")
def main() -> None:
    """delta-commit-owner: a commit owner for Delta Lake managed commits.

    Writers send commits to the owner's HTTP API; the owner writes them to
    _delta_log/_commits, ratifies exactly one file per version in its database and
    backfills them in order to _delta_log/<v>.json.

    \b
    Settings come from flags, COMMIT_OWNER_* environment variables or a TOML file
    (--config / COMMIT_OWNER_CONFIG), in that order; see `commit-owner config show`.

    \b
    Exit codes:
      0  success (also `serve` stopped by SIGTERM or SIGINT)
      1  the work failed (e.g. some backfills failed, a table was not found)
      2  bad usage or configuration, or the database/storage cannot be reached
      3  the database schema is out of date: run `commit-owner migrate`
    """


@main.command()
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options()
def serve(config: str | None, **overrides: Any) -> None:
    """Run the HTTP API (and, unless --no-backfill, the backfiller) in --workers processes.

    SIGTERM or SIGINT stops it gracefully: the listener closes, requests in flight
    (commits included) are answered within --shutdown-grace-seconds, the backfiller
    stops and the database pool closes; then it exits 0. With --workers 2 or more a
    supervising process starts the workers on the one port, restarts one that dies and
    forwards the signal to all of them.
    """
    from coordinator.cli.supervisor import metrics_dir
    from coordinator.runtime.settings import worker_count

    settings = load_settings(config, **overrides)
    workers = worker_count(settings.workers)
    # Before prometheus_client is imported (below): it picks its multiprocess mode at import.
    with metrics_dir(workers) as folder:
        serve_settings(settings, workers, folder)


def serve_settings(settings: Any, workers: int, metrics_dir: str | None, *,
                   app_factory: Callable[[Any], Any] | None = None) -> None:
    """`serve` with loaded settings: the checks before the port opens, then ``workers`` processes serving
    ``app_factory(settings)`` (``create_app`` by default; the test harness passes its own: harness/with_faults.py)."""
    from coordinator.api import create_app
    from coordinator.api.auth import check_auth_mode
    from coordinator.runtime.logs import setup_logging
    from coordinator.store import check_database

    setup_logging(settings.log_level, settings.log_format)
    try:
        check_auth_mode(settings, warn=False)  # create_app logs the warning when forced
        from coordinator.cli.serve import new_event_loop

        new_event_loop(settings.event_loop).close()  # refuse a bad choice before anything starts
    except ValueError as e:
        raise ConfigError(str(e)) from None

    asyncio.run(check_database(settings))  # refused before the port opens; exit codes from exit_codes.classify
    from coordinator.cli.serve import root_schemes
    from coordinator.storage import check_credentials

    try:
        asyncio.run(check_credentials(settings, root_schemes(settings)))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    from coordinator.cli.serve import addresses_of, bind, run_service

    try:
        socks = bind(settings.host, settings.port, listen=workers == 1)
    except OSError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    if workers == 1:
        run_service((app_factory or create_app)(settings), settings, socks)
        return
    from coordinator.cli.supervisor import Supervisor

    addresses = addresses_of(socks)
    for sock in socks:  # a probe: the port is free; the workers bind it with SO_REUSEPORT
        sock.close()
    code = Supervisor(settings, workers, addresses, metrics_dir=metrics_dir, app_factory=app_factory).run()
    if code:
        sys.exit(code)


@main.command()
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@click.option("--create", is_flag=True, help="Create a new SQLite store (and its folder) if the file is not there; "
                                             "without it only the default ./commit-owner.db is created.")
@settings_options(("database_url",))
def migrate(config: str | None, create: bool, **overrides: Any) -> None:
    """Create or upgrade the ownership store's schema (Alembic migrations in schema/)."""
    from coordinator.runtime.settings import BY_NAME
    from coordinator.store import migrate as do_migrate

    settings = load_settings(config, **overrides)
    default = settings.database_url == BY_NAME["database_url"].default  # what `make run` creates
    head = do_migrate(settings.database_url, create=create or default)
    click.echo(f"database at schema revision {head}")


# What `backfill-worker` reads: no listener, no authentication, no registrations (so no allowed roots).
WORKER_SETTINGS = ("database_url", "db_pool_size", "db_connect_timeout_seconds", "request_timeout_seconds",
                   "s3_endpoint_url", "s3_region", "s3_access_key_id", "s3_secret_access_key", "storage_threads",
                   "backfill_batch_size", "backfill_interval_ms", "backfill_lease_seconds", "group_commit_max_rows",
                   "log_level", "log_format")


@main.command("backfill-worker")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(WORKER_SETTINGS)
def backfill_worker(config: str | None, **overrides: Any) -> None:
    """Run only the backfiller, for deployments that separate it from the API."""
    from coordinator.cli.worker import run_worker
    from coordinator.runtime.logs import setup_logging

    settings = load_settings(config, **overrides)
    setup_logging(settings.log_level, settings.log_format)
    sys.exit(asyncio.run(run_worker(settings)))


@main.command()
@click.option("--table", "table", default=None, help="Table location or id.")
@click.option("--all", "all_tables", is_flag=True, help="Every table with unbackfilled commits.")
@click.option("--to-version", type=int, default=None, help="Backfill through this version (default: latest).")
@click.option("--endpoint", default=None, help="Go through a running service's API at this URL.")
@click.option("--token", envvar="COMMIT_OWNER_TOKEN", default=None, help="Bearer token for --endpoint.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(("database_url", "s3_endpoint_url", "s3_region", "s3_access_key_id", "s3_secret_access_key"))
def backfill(table: str | None, all_tables: bool, to_version: int | None, endpoint: str | None, token: str | None,
             as_json: bool, progress: bool | None, config: str | None, **overrides: Any) -> None:
    """Force backfill of one table or all of them, through the API or straight against the database."""
    from coordinator.ops.commands import run_backfill

    if bool(table) == bool(all_tables):
        raise click.UsageError("give exactly one of --table and --all")
    settings = load_settings(config, **overrides)
    show = sys.stderr.isatty() if progress is None else progress
    summary = asyncio.run(run_backfill(settings, table=table, to_version=to_version, endpoint=endpoint, token=token,
                                       progress=show))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(f"tables done: {summary['tables_done']}, versions published: {summary['versions_published']}, "
                   f"failures: {len(summary['failures'])}")
        for f in summary["failures"]:
            click.echo(f"  FAILED {f['table']}: {f['reason']}")
    sys.exit(1 if summary["failures"] else 0)


@main.command()
@click.option("--dry-run", is_flag=True, help="Report the orphans that would be removed; remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(("database_url", "s3_endpoint_url", "s3_region", "s3_access_key_id", "s3_secret_access_key",
                    "request_timeout_seconds", "janitor_min_age_seconds", "staging_expiry_seconds",
                    "managed_location"))
def janitor(dry_run: bool, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Remove orphan commit files (written, never ratified) older than the safe age (docs/reliability.md)."""
    from coordinator.ops.commands import run_janitor

    rep = asyncio.run(run_janitor(load_settings(config, **overrides), dry_run=dry_run))
    if as_json:
        click.echo(json.dumps(rep, indent=2))
    else:
        verb = "would remove" if dry_run else "removed"
        click.echo(f"tables {rep['tables']}, staged files {rep['stagedFiles']}, orphans {rep['orphans']}, "
                   f"{verb} {rep['removed']}, kept: too young {rep['keptTooYoung']}, undecided {rep['keptUndecided']}, "
                   f"errors {rep['errors']} (min age {rep['minAgeSeconds']:.0f}s)")
        for f in rep["removedFiles"]:
            click.echo(f"  {verb}: {f}")
        staging = rep.get("staging") or {}
        for r in staging.get("expired", []):
            click.echo(f"  staging reservation {r['id']} ({r['name']}) expired: {r['location']}, {r.get('files', 0)} "
                       f"file(s) {'kept: ' + r['filesKept'] if r.get('filesKept') else verb}")
    sys.exit(1 if rep["errors"] else 0)


@main.group()
def tables() -> None:
    """Inspect and repair owned tables; create and release them through a running owner."""


@tables.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(("database_url",))
def tables_list(as_json: bool, config: str | None, **overrides: Any) -> None:
    """Every table: id, name, latest, backfilled, unbackfilled, accepting, status, last commit time, location."""
    from coordinator.cli.human import cell
    from coordinator.ops.commands import list_tables
    from coordinator.ops.context import iso_time
    from coordinator.store.rows import shown_name

    rows = asyncio.run(list_tables(load_settings(config, **overrides)))
    for r in rows:
        r["lastCommitTime"] = iso_time(r.get("lastCommitAt"))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    names = {r["tableId"]: cell(shown_name(r["name"], r["droppedName"])) for r in rows}
    width = max([len("NAME"), *map(len, names.values())])
    click.echo(f"{'TABLE ID':36}  {'NAME':{width}}  {'LATEST':>7}  {'BACKFILLED':>10}  {'UNBACKFILLED':>12}  "
               f"{'ACCEPTING':9}  {'STATUS':8}  {'LAST COMMIT':20}  LOCATION")
    for r in rows:
        click.echo(f"{r['tableId']:36}  {names[r['tableId']]:{width}}  {r['latestTableVersion']:>7}  "
                   f"{r['latestBackfilledVersion']:>10}  {r['unbackfilledCommits']:>12}  "
                   f"{cell(r['acceptingCommits']):9}  {r['status']:8}  {cell(r['lastCommitTime']):20}  {r['location']}")


@tables.command("show")
@click.argument("table")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--limit", default=20, show_default=True, help="How many recent commits to show.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(("database_url",))
def tables_show(table: str, as_json: bool, limit: int, config: str | None, **overrides: Any) -> None:
    """One table (by id, catalog.schema.table name, or location: path or URI) with its recent commits."""
    from coordinator.cli.human import cell, when
    from coordinator.ops.commands import show_table

    info = asyncio.run(show_table(load_settings(config, **overrides), table, limit))
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    for k in ("tableId", "name", "location", "commitDir", "status", "statusReason", "acceptingCommits",
              "latestTableVersion", "latestBackfilledVersion", "unbackfilledCommits", "lastCommitTime", "backfillError",
              "droppedName", "droppedTime"):
        click.echo(f"{k:24} {cell(info.get(k))}")
    click.echo("recent commits:" if info["recentCommits"] else "recent commits: none")
    for c in info["recentCommits"]:
        click.echo(f"  v{c['version']:<8} {c['fileName']}  committed {when(c['commitTimestamp'])}  "
                   f"{'backfilled' if c['backfilled'] else 'UNBACKFILLED'}")


@main.group()
def transactions() -> None:
    """Inspect multi-table transactions (docs/transactions.md)."""


@transactions.command("list")
@click.option("--table", default=None, help="Only the transactions of this table (id, catalog.schema.table, location).")
@click.option("--limit", default=20, show_default=True, help="How many of the newest transactions to show.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@settings_options(("database_url",))
def transactions_list(table: str | None, limit: int, as_json: bool, config: str | None, **overrides: Any) -> None:
    """The newest multi-table transactions, newest first: id, when, and each table with its version."""
    from coordinator.cli.human import cell
    from coordinator.ops.transactions import list_transactions

    rows = asyncio.run(list_transactions(load_settings(config, **overrides), table, limit))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no transactions")
    for tx in rows:
        n = len(tx["commits"])
        click.echo(f"{tx['transactionId']}  committed {cell(tx['committedTime'])}  {n} table{'s' if n != 1 else ''}")
        for c in tx["commits"]:
            click.echo(f"  v{c['version']:<8} {c['tableId']}  {cell(c['name'])}  {cell(c['location'])}")


main.add_command(config)  # operations: `config show|docs`
for _command in TABLE_COMMANDS:  # `tables create|forget|unfence|release`
    tables.add_command(_command)
tables.add_command(tables_reconcile)  # `tables reconcile` (a restored store, coordinator/ops/reconcile.py)
store.add_command(store_check)  # `store check` (coordinator/ops/store_check.py)
for _command in MAINTENANCE_COMMANDS:  # `maintain`, `vacuum`, `optimize` (docs/maintenance.md)
    main.add_command(_command)
main.add_command(tokens)  # security: `commit-owner tokens ...`
main.add_command(staging)  # `commit-owner staging list|clean` (coordinator/ops/staging.py)
main.add_command(bench)  # performance: `commit-owner bench`, docs/benchmarks.md
main.add_command(store)  # `commit-owner store backup|restore|check` (coordinator/store/backup.py, ops/store_check.py)


if __name__ == "__main__":
    main()
