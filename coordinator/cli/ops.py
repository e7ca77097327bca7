"""`commit-owner config ...`: the effective settings and the configuration reference."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import click
import tomllib

from client.http import DEFAULT_ENDPOINT, ENDPOINT_ENV
from coordinator.cli.options import load_settings, settings_options
from coordinator.runtime.settings import BY_NAME, ENV_PREFIX, SETTINGS, Settings


@click.group("config")
def config() -> None:
    """Show the effective settings or write the configuration reference."""


def _sources(config_file: str | None, overrides: dict[str, Any]) -> dict[str, str]:
    """Where each setting's value comes from: flag, env, file or default (same precedence as Settings.load)."""
    out = {s.name: "default" for s in SETTINGS}
    path = config_file or os.environ.get(ENV_PREFIX + "CONFIG")
    if path:
        data = tomllib.loads(Path(path).read_text())
        for k in data.get("commit-owner", data):
            key = k.replace("-", "_")
            if key in out:
                out[key] = f"file {path}"
    for s in SETTINGS:
        if s.env in os.environ:
            out[s.name] = f"env {s.env}"
    for k, v in overrides.items():
        if v is not None:
            out[k] = "flag"
    return out


def _settings_flags(f: Any) -> Any:
    return settings_options()(f)


@config.command("show")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_settings_flags
def config_show(config_file: str | None, as_json: bool, **overrides: Any) -> None:
    """Effective settings (after flags, environment and file) with their source; secrets masked."""
    import json

    from coordinator.cli.human import cell
    from coordinator.runtime.logs import redact

    settings: Settings = load_settings(config_file, **overrides)
    sources = _sources(config_file, overrides)
    values = {k: (redact(v) if isinstance(v, str) else v) for k, v in settings.public().items()}
    if as_json:
        click.echo(json.dumps({k: {"value": values[k], "source": sources[k]} for k in values}, indent=2))
        return
    width = max(len(k) for k in values)
    for k, v in values.items():
        click.echo(f"{k:{width}}  {cell(v):40}  ({sources[k]})")


@config.command("docs")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write the reference to this file (default: print it).")
@click.option("--check", "check", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Exit 1 if this file is not the current reference.")
def config_docs(output: str | None, check: str | None) -> None:
    """The configuration reference (docs/configuration.md), generated from the settings declaration."""
    from coordinator.cli.config_docs import render

    text = render()
    if check:
        if Path(check).read_text() != text:
            click.echo(f"{check} is stale: run `commit-owner config docs --output {check}`", err=True)
            sys.exit(1)
        click.echo(f"{check} is up to date")
        return
    if output:
        Path(output).write_text(text)
        click.echo(f"wrote {output} ({len(SETTINGS)} settings)", err=True)
    else:
        click.echo(text, nl=False)


__all__ = ["config", "BY_NAME"]


# -- `commit-owner tables create|release|forget|unfence` (attached to the `tables` group in cli.py) ----------

_S3 = ("s3_endpoint_url", "s3_region", "s3_access_key_id", "s3_secret_access_key")


def _table_options(names: tuple[str, ...], *, api: bool) -> Any:
    """--config and the named settings; with ``api``, the owner's endpoint and token too."""

    def deco(f: Any) -> Any:
        f = settings_options(names)(f)
        f = click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")(f)
        if api:
            f = click.option("--token", envvar="COMMIT_OWNER_TOKEN", default=None,
                             help="Bearer token (admin over the table) [env COMMIT_OWNER_TOKEN].")(f)
            f = click.option("--endpoint", envvar=ENDPOINT_ENV, default=DEFAULT_ENDPOINT,
                             show_default=True, help="The running owner's URL [env COMMIT_OWNER_ENDPOINT].")(f)
        return f

    return deco


def _client_and_options(endpoint: str, token: str | None, config: str | None, overrides: dict[str, Any]) -> Any:
    """The HTTP client, and the storage options the client library needs to write an S3 table's log itself
    (the same --s3-* settings as the service's)."""
    from client import CommitOwnerClient

    s = load_settings(config, **overrides)
    options: dict[str, Any] = {"client_kwargs": {"region_name": s.s3_region}}
    if s.s3_endpoint_url:
        options["client_kwargs"]["endpoint_url"] = s.s3_endpoint_url
    if s.s3_access_key_id:
        options.update(key=s.s3_access_key_id, secret=s.s3_secret_access_key)
    return CommitOwnerClient(endpoint, token=token), options


def _for(location: str, options: dict[str, Any]) -> dict[str, Any] | None:
    """The S3 options for an S3 location; none for a local one (client.contract.layout reads the location)."""
    from client.contract.layout import is_local, normalize_location

    return None if is_local(normalize_location(location)) else options


def _schema(text: str) -> Any:
    import json

    from client.contract.errors import InvalidArgumentError

    raw = Path(text[1:]).read_text() if text.startswith("@") else text
    try:
        return json.loads(raw)
    except ValueError as e:
        raise InvalidArgumentError(f"--schema is not JSON ({e}): give a Delta struct type or @file") from None


@click.command("create")
@click.option("--location", required=True, help="Absolute path, file:// or s3:// URI of the new table.")
@click.option("--schema", "schema", required=True, metavar="JSON|@FILE",
              help='Delta struct type, e.g. \'{"type":"struct","fields":[...]}\' (Spark\'s df.schema.json()).')
@click.option("--partition-column", "partitions", multiple=True, help="Partition column (repeatable).")
@click.option("--property", "props", multiple=True, metavar="KEY=VALUE", help="Table property (repeatable).")
@click.option("--protocol", type=click.Choice(["managedCommit", "coordinatedCommits-preview"]),
              default="managedCommit", show_default=True, help="Which owner properties the table carries.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_table_options(_S3, api=True)
def tables_create(location: str, schema: str, partitions: tuple[str, ...], props: tuple[str, ...], protocol: str,
                  as_json: bool, endpoint: str, token: str | None, config: str | None, **overrides: Any) -> None:
    """Create an owned table through a running owner: register it, then write version 0 (client.lifecycle)."""
    import json

    from client.contract.errors import InvalidArgumentError
    from client.lifecycle import create_table

    bad = [p for p in props if "=" not in p]
    if bad:
        raise InvalidArgumentError(f"--property must read KEY=VALUE, got {bad[0]!r}")
    client, options = _client_and_options(endpoint, token, config, overrides)
    t = create_table(location, _schema(schema), partitions, dict(p.split("=", 1) for p in props), client=client,
                     protocol=protocol, storage_options=_for(location, options))
    if as_json:
        click.echo(json.dumps({"tableId": t.table_id, "location": t.location, "version": t.version,
                               "commitDir": t.commit_dir, "protocol": t.protocol}, indent=2))
    else:
        click.echo(f"created {t.location} (table id {t.table_id}, version 0 written; commits go through "
                   f"{endpoint} from version 1)")


@click.command("release")
@click.argument("table")
@_table_options(_S3, api=True)
def tables_release(table: str, endpoint: str, token: str | None, config: str | None, **overrides: Any) -> None:
    """Hand a table back to filesystem writers: the release commit, through the owner (client.lifecycle)."""
    import uuid

    from client.lifecycle import release_ownership

    client, options = _client_and_options(endpoint, token, config, overrides)
    try:
        location = client.get_table(str(uuid.UUID(table))).location
    except ValueError:
        location = table
    v = release_ownership(location, client=client, storage_options=_for(location, options))
    click.echo(f"released {location} at version {v}: published; the owner takes no more commits for it")


@click.command("forget")
@click.argument("table")
@click.option("--force", is_flag=True, help="Forget it even though its log is usable as owned (asks first).")
@click.option("--yes", is_flag=True, help="With --force: do not ask.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_table_options(("database_url", *_S3, "request_timeout_seconds"), api=False)
def tables_forget(table: str, force: bool, yes: bool, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Drop a registration whose log no reader can use as owned (e.g. version 0 never written).

    Refused, changing nothing, once <base>.json is published naming the table, unless --force is
    confirmed. Straight against the database; files in storage are left as they are.
    """
    import json

    from coordinator.ops.commands import forget_table

    def confirm(question: str) -> bool:
        if yes:
            return True
        try:
            return click.confirm(question, default=False, err=True)
        except click.Abort:
            return False

    out = asyncio.run(forget_table(load_settings(config, **overrides), table, force=force, confirm=confirm))
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"forgot {out['location']} (table id {out['tableId']}, {out['forgottenCommits']} ratified commit(s))")
    if out["publishedVersions"] or out["stagedFiles"]:
        click.echo(f"left in storage: published versions {out['publishedVersions']}, {out['stagedFiles']} staged "
                   "file(s); remove the table's _delta_log before registering the location again", err=True)


@click.command("unfence")
@click.argument("table")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_table_options(("database_url", *_S3, "request_timeout_seconds", "backfill_lease_seconds"), api=False)
def tables_unfence(table: str, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Take commits again on a FENCED table once the foreign <v>.json is dealt with, then publish its backlog.

    The log is checked first: every published <v>.json above the backfilled version must be the
    owner's commit v; otherwise it is refused and nothing changes.
    """
    import json

    from coordinator.ops.commands import unfence_table

    out = asyncio.run(unfence_table(load_settings(config, **overrides), table))
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"unfenced {out['location']}: accepting commits again")
    if "backfilledThrough" in out:
        click.echo(f"published through version {out['backfilledThrough']}")
    else:
        click.echo(f"backfill not finished ({out['backfillError']}); the service retries it", err=True)


TABLE_COMMANDS = (tables_create, tables_release, tables_forget, tables_unfence)


# -- `commit-owner maintain|vacuum` (docs/maintenance.md) -------------------------------------------------------

_DIRECT = ("database_url", *_S3, "request_timeout_seconds")


def _maintenance_settings(what: str, config: str | None, overrides: dict[str, Any]) -> Settings:
    """The settings of a maintenance command that needs pyarrow (checked first, so a missing install is one
    clear line, not a traceback), with logging set up."""
    from coordinator.runtime.logs import setup_logging

    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise click.UsageError(f"commit-owner {what} and needs pyarrow: "
                               "from a clone, .venv/bin/pip install -e '.[maintain]'") from None
    settings = load_settings(config, **overrides)
    setup_logging(settings.log_level, settings.log_format)
    return settings


@click.command("maintain")
@click.argument("tables", nargs=-1)
@click.option("--every", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Run again every SECONDS (a maintenance worker; SIGTERM or SIGINT stops it after the pass in "
                   "progress, exit 0 unless that pass failed somewhere); default: one pass, then exit.")
@click.option("--metrics-file", type=click.Path(dir_okay=False), default=None,
              help="Write the maintenance metrics here (Prometheus text format) after each pass.")
@click.option("--log-cleanup/--no-log-cleanup", "log_cleanup", default=True, show_default=True,
              help="After the checkpoints, delete log files older than delta.logRetentionDuration below a checkpoint.")
@click.option("--log-cleanup-dry-run", is_flag=True, help="List the log files the cleanup would delete; delete none.")
@click.option("--policy/--no-policy", "policy", default=True, show_default=True,
              help="After the log cleanup, compact and vacuum each table as its policy says (maintain_* settings, "
                   "commitowner.* table properties).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_table_options((*_DIRECT, "log_level", "log_format", "maintain_optimize", "maintain_optimize_partition_files",
                 "maintain_optimize_table_files", "maintain_vacuum", "maintain_vacuum_interval_seconds",
                 "optimize_target_file_bytes", "optimize_min_small_files"), api=False)
def maintain(tables: tuple[str, ...], every: float | None, metrics_file: str | None, log_cleanup: bool,
             log_cleanup_dry_run: bool, policy: bool, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Write the missing checkpoints of owned tables (all of them unless TABLES are named), of published versions,
    clean up their expired log files, then compact and vacuum them as the policy says.

    One classic Parquet checkpoint every delta.checkpointInterval versions (default 10), put-if-absent, then
    _last_checkpoint. Log cleanup: <v>.json, checkpoints and staged commits older than
    delta.logRetentionDuration (default 30 days) below the checkpoint that keeps the retention readable.
    Policy: a compaction when a partition has more than maintain_optimize_partition_files (50) files smaller than
    the target, or the table more than maintain_optimize_table_files (500); a vacuum (delta.deletedFileRetentionDuration,
    default 7 days) at most every maintain_vacuum_interval_seconds (a day); per table, commitowner.* table
    properties (docs/maintenance.md). Each step that did something or failed shows on the table's web page.
    Needs pyarrow (from a clone: .venv/bin/pip install -e '.[maintain]').
    """
    import json

    from coordinator.cli.human import cell
    from coordinator.ops.maintain import run_maintain

    settings = _maintenance_settings("maintain writes Parquet checkpoints", config, overrides)
    out = asyncio.run(run_maintain(settings, tables, every=every, metrics_file=metrics_file, cleanup=log_cleanup,
                                   cleanup_dry_run=log_cleanup_dry_run, policy=policy))
    if as_json:
        click.echo(json.dumps(out, indent=2))
    else:
        for t in out["tables"]:
            click.echo(f"{t['location']}: published through {t['publishedThrough']}, checkpoints written "
                       f"{cell(t['written'] or 'none')}, newest checkpoint {cell(t['lastCheckpoint'])}, lag {t['lag']}"
                       + (f" (skipped: {t['skipped']})" if "skipped" in t else ""))
            c = t.get("logCleanup")
            if c is not None:
                verb = "would delete" if c["dryRun"] else "deleted"
                for f in c["files"]:
                    click.echo(f"  {verb}: {f['path']} ({f['size']} bytes)")
                click.echo(f"  log cleanup: {verb} {c['fileCount']} file(s), {c['bytes']} bytes"
                           + (f"; versions from {c['keptFrom']} stay readable" if c["keptFrom"] is not None else ""))
            o = t.get("optimize")
            if o is not None and o["version"] is not None:
                click.echo(f"  compaction ({o['reason']}): version {o['version']}, {o['filesRemoved']} files "
                           f"({o['bytesRemoved']} bytes) into {o['filesAdded']} ({o['bytesAdded']} bytes)")
            v = t.get("vacuum")
            if v is not None:
                click.echo(f"  vacuum: deleted {v['deleted']} file(s), {v['bytes']} bytes; versions from "
                           f"{v['oldestKeptVersion']} stay readable")
        for s in out["skipped"]:
            click.echo(f"{s['table']}: skipped: {s['reason']}")
        for f in out["failures"]:
            click.echo(f"{f['table']}: FAILED: {f['reason']}", err=True)
    sys.exit(1 if out["failures"] else 0)


@click.command("vacuum")
@click.argument("table")
@click.option("--retention", default=None, metavar="DURATION",
              help="Keep every version committed within DURATION (7d, 12h, 30m, 90s) readable; default: the "
                   "table's delta.deletedFileRetentionDuration (7 days unless set).")
@click.option("--dry-run/--no-dry-run", "dry_run", default=True, show_default=True,
              help="List what would be deleted (the default); --no-dry-run deletes.")
@click.option("--force", is_flag=True, help="Allow a retention shorter than the table's deletedFileRetentionDuration.")
@click.option("--metrics-file", type=click.Path(dir_okay=False), default=None,
              help="Write the files deleted and bytes freed here (Prometheus text format).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_table_options(_DIRECT, api=False)
def vacuum(table: str, retention: str | None, dry_run: bool, force: bool, metrics_file: str | None, as_json: bool,
           config: str | None, **overrides: Any) -> None:
    """Delete data files no version inside the retention window references (never anything in _delta_log).

    Files of failed writes (e.g. abandoned batch-*/ folders) older than the retention go too. A dry run by
    default; --no-dry-run deletes.
    """
    import json

    from coordinator.ops.maintenance import run_vacuum

    out = asyncio.run(run_vacuum(load_settings(config, **overrides), table, retention=retention, dry_run=dry_run,
                                 force=force, metrics_file=metrics_file))
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    verb = "would delete" if dry_run else "deleted"
    for f in out["files"]:
        click.echo(f"  {verb}: {f['path']} ({f['size']} bytes)")
    click.echo(f"{out['location']}: {verb} {out['fileCount']} file(s), {out['bytes']} bytes; versions "
               f"{out['oldestKeptVersion']}..{out['latestVersion']} stay readable")


@click.command("optimize")
@click.argument("table")
@click.option("--target-size", type=int, default=None, metavar="BYTES",
              help="Rewrite each partition's files smaller than BYTES into files of about BYTES; default: the setting "
                   "optimize_target_file_bytes (128 MiB).")
@click.option("--min-files", type=int, default=None, metavar="N",
              help="Leave a partition alone unless it has N or more small files; default: the setting "
                   "optimize_min_small_files (2).")
@click.option("--dry-run", is_flag=True, help="Say what would be rewritten; write and commit nothing.")
@click.option("--metrics-file", type=click.Path(dir_okay=False), default=None,
              help="Write the files and bytes rewritten (or a give-up) here (Prometheus text format).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_table_options((*_DIRECT, "allow_location", "log_level", "log_format"), api=False)
def optimize(table: str, target_size: int | None, min_files: int | None, dry_run: bool, metrics_file: str | None,
             as_json: bool, config: str | None, **overrides: Any) -> None:
    """Compact an owned table once (bin-packing OPTIMIZE): its small files, partition by partition, rewritten into
    files of about the target size, in one commit of the owner's (operation OPTIMIZE, dataChange false).

    A concurrent append does not stop it; a concurrent commit that removed a file it rewrote does (nothing is
    committed, exit 1). Deletion vectors are applied (purged) in the files it rewrites. Needs pyarrow (the maintain
    extra).
    """
    import json

    from coordinator.ops.optimize import run_optimize

    settings = _maintenance_settings("optimize rewrites Parquet files", config, overrides)
    out = asyncio.run(run_optimize(settings, table, target_size=target_size, min_files=min_files, dry_run=dry_run,
                                   metrics_file=metrics_file))
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    if out["filesRemoved"] == 0:
        click.echo(f"{out['location']}: nothing to compact at version {out['readVersion']} ({out['filesBefore']} "
                   f"file(s), target {out['targetSize']} bytes)")
    else:
        verb = "would rewrite" if out["dryRun"] else "rewrote"
        head = f"{out['location']}: {verb} {out['filesRemoved']} file(s), {out['bytesRemoved']} bytes, into " \
               f"{out['filesAdded']} file(s)" + ("" if out["dryRun"] else f", {out['bytesAdded']} bytes")
        click.echo(head + f" in {out['partitions']} partition(s); files {out['filesBefore']} -> {out['filesAfter']}")
    if out["version"] is not None:
        click.echo(f"  committed as version {out['version']} (read version {out['readVersion']}, "
                   f"{out['rebases']} lost race(s) rebased), published through {out['publishedVersion']}")
    if out["deletionVectorsPurged"]:
        click.echo(f"  deletion vectors applied: {out['deletionVectorsPurged']} file(s) rewritten without their "
                   "deleted rows")


MAINTENANCE_COMMANDS = (maintain, vacuum, optimize)
