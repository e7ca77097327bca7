"""`commit-owner bench`: the benchmark of docs/benchmarks.md."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import click


@click.command()
@click.option("--database", type=click.Choice(["postgres", "sqlite"]), default="postgres", show_default=True,
              help="Ownership store the bench's own service runs on.")
@click.option("--storage", type=click.Choice(["local", "s3", "azure", "gcs"]), default="local", show_default=True,
              help="Log storage: a local folder, S3 through a moto server the bench starts, or Azure Blob / GCS "
                   "on azurite / fake-gcs-server (emulator figures; scenarios 0-4 only; needs the repository's "
                   "harness/ and `make install-emulators`).")
@click.option("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres", show_default=True,
              help="PostgreSQL server where the bench creates (and drops) its database.")
@click.option("--smoke", is_flag=True, help="Seconds, not minutes: short scenarios, small growth (for CI).")
@click.option("--duration", type=float, default=None, help="Seconds per scenario [10; smoke 1].")
@click.option("--contention", default=None, help="Writer counts of scenario 2, comma-separated [4,16,64].")
@click.option("--tables", type=int, default=None, help="Tables (one writer each) of scenario 3 [64].")
@click.option("--lag-rate", type=float, default=None, help="Commits/s of the backfill-lag scenario [100].")
@click.option("--growth-tables", type=int, default=None, help="Tables added by scenario 6 [10000].")
@click.option("--growth-rows", type=int, default=None, help="Commit rows per added table [100].")
@click.option("--open-versions", type=int, default=None,
              help="Versions of scenario 7's table (open time with and without checkpoints) [1000; smoke 30; 0 skips].")
@click.option("--tx-sizes", default=None,
              help="Tables per multi-table transaction of scenario 10, comma-separated [2,8,32]; 0 skips it.")
@click.option("--compaction-inserts", type=int, default=None,
              help="Single-row INSERTs of scenario 12's table (scans before and after a compaction pass) "
                   "[2000; smoke 100; 0 skips].")
@click.option("--backfill-batch-size", type=int, default=1, show_default=True, help="The service's backfill trigger.")
@click.option("--workers", type=click.IntRange(min=0), default=0, show_default=True,
              help="Processes of the bench's service (serve --workers); 0 = serve's default, the number of CPUs.")
@click.option("--only", default=None,
              help="Run only these scenarios, comma-separated numbers 0-12 (e.g. 1,2: one writer, then "
                   "racing writers; 9 needs 6; 12: compaction); the targets of the others are left out.")
@click.option("--no-deltars", is_flag=True, help="Skip the delta-rs side.")
@click.option("--no-default-settings", is_flag=True,
              help="Skip scenario 3's second run on a service with default settings (restarts the service).")
@click.option("--only-ui", is_flag=True,
              help="Only the growth and scenario 9 (the browser UI's pages at the grown size).")
@click.option("--keep-workdir", is_flag=True, help="Keep the tables, database file and service log.")
@click.option("--json", "json_path", default=None, help="Write the full report as JSON here.")
@click.option("--png", "png_path", default=None, help="Draw the chart here (needs matplotlib).")
@click.option("--markdown", "md_path", default=None, help="Write the markdown table here.")
def bench(database: str, storage: str, pg_url: str, smoke: bool, duration: float | None, contention: str | None,
          tables: int | None, lag_rate: float | None, growth_tables: int | None, growth_rows: int | None,
          open_versions: int | None, tx_sizes: str | None, compaction_inserts: int | None, backfill_batch_size: int,
          workers: int,
          only: str | None, no_deltars: bool,
          no_default_settings: bool, only_ui: bool, keep_workdir: bool, json_path: str | None,
          png_path: str | None, md_path: str | None) -> None:
    """Measure the owner beside the physical floor and delta-rs; print a table, write JSON/PNG/markdown.

    Exit status 1 when a table's latest version differs from the commits acknowledged to the bench.
    """
    from coordinator.bench import report as rep
    from coordinator.bench.env import EMULATED
    from coordinator.bench.runner import EMULATOR_SCENARIOS, Bench, BenchCheckError, BenchOptions

    kw: dict = dict(database=database, storage=storage, pg_url=pg_url, deltars=not no_deltars,
                    default_settings=not no_default_settings, backfill_batch_size=backfill_batch_size,
                    keep_workdir=keep_workdir, workers=workers, only_ui=only_ui)
    for name, value in (("duration", duration), ("tables", tables), ("lag_rate", lag_rate),
                        ("growth_tables", growth_tables), ("growth_rows", growth_rows)):
        if value is not None:
            if value <= 0:
                raise click.BadParameter(f"must be positive, not {value}", param_hint=f"--{name.replace('_', '-')}")
            kw[name] = value
    if open_versions is not None:
        if open_versions != 0 and open_versions <= 10:
            raise click.BadParameter(f"must be 0 (skip) or above 10, not {open_versions}", param_hint="--open-versions")
        kw["open_versions"] = open_versions
    if compaction_inserts is not None:
        if compaction_inserts != 0 and compaction_inserts < 2:
            raise click.BadParameter(f"must be 0 (skip) or 2 or more (a compaction needs two files), not "
                                     f"{compaction_inserts}", param_hint="--compaction-inserts")
        kw["compaction_inserts"] = compaction_inserts
    if contention:
        try:
            kw["contention"] = tuple(int(x) for x in contention.split(",") if x.strip())
        except ValueError:
            raise click.BadParameter(f"a comma-separated list of integers, not {contention!r}",
                                     param_hint="--contention") from None
        if not kw["contention"] or min(kw["contention"]) < 1:
            raise click.BadParameter("writer counts must be >= 1", param_hint="--contention")
    if only:
        try:
            kw["only"] = tuple(int(x) for x in only.split(",") if x.strip())
        except ValueError:
            raise click.BadParameter(f"a comma-separated list of scenario numbers, not {only!r}",
                                     param_hint="--only") from None
        if not kw["only"] or not all(0 <= n <= 12 for n in kw["only"]):
            raise click.BadParameter("scenario numbers are 0 to 12", param_hint="--only")
    if storage in EMULATED and not only_ui:
        runs = kw.get("only") or EMULATOR_SCENARIOS
        if not set(runs) <= set(EMULATOR_SCENARIOS):
            raise click.BadParameter(
                f"--storage {storage} runs scenarios {', '.join(map(str, EMULATOR_SCENARIOS))} only, not "
                f"{', '.join(str(n) for n in runs if n not in EMULATOR_SCENARIOS)}", param_hint="--only")
        kw["only"] = tuple(runs)
    if storage == "gcs" and not no_deltars:
        raise click.BadParameter("delta-rs cannot write to fake-gcs-server (its uploads use the XML API's object PUT, "
                                 "which the emulator lacks): add --no-deltars", param_hint="--storage gcs")
    if tx_sizes is not None:
        try:
            kw["tx_sizes"] = tuple(int(x) for x in tx_sizes.split(",") if x.strip() and int(x) != 0)
        except ValueError:
            raise click.BadParameter(f"a comma-separated list of integers, not {tx_sizes!r}",
                                     param_hint="--tx-sizes") from None
        if kw["tx_sizes"] and min(kw["tx_sizes"]) < 1:
            raise click.BadParameter("table counts must be >= 1 (0 alone skips scenario 10)", param_hint="--tx-sizes")
    opts = BenchOptions.smoke(**kw) if smoke else BenchOptions(**kw)
    code = 0
    try:
        try:  # the bench's own client shares the machine: give it the cheaper loop too
            import uvloop

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        except ImportError:
            pass
        report = asyncio.run(Bench(opts, say=lambda s: click.echo(s, err=True)).run())
    except BenchCheckError as e:
        report, code = e.report, 1
        click.echo(f"error: consistency check failed: {e}", err=True)
    for path in (json_path, md_path, png_path):
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    click.echo(rep.markdown(report))
    click.echo(rep.text(report), err=True)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(report, f, indent=2)
    if md_path:
        with open(md_path, "w") as f:
            f.write(rep.markdown(report))
    if png_path:
        rep.chart(report, png_path)
    sys.exit(code)
