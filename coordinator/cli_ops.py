"""`commit-owner config ...`: the effective settings and the configuration reference."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import click

from .settings import BY_NAME, ENV_PREFIX, SETTINGS, Settings


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
    from .cli import _settings_options

    return _settings_options()(f)


@config.command("show")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None, help="TOML file with settings.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_settings_flags
def config_show(config_file: str | None, as_json: bool, **overrides: Any) -> None:
    """Effective settings (after flags, environment and file) with their source; secrets masked."""
    import json

    from .cli import _load
    from .logs import redact

    settings: Settings = _load(config_file, **overrides)
    sources = _sources(config_file, overrides)
    values = {k: (redact(v) if isinstance(v, str) else v) for k, v in settings.public().items()}
    if as_json:
        click.echo(json.dumps({k: {"value": values[k], "source": sources[k]} for k in values}, indent=2))
        return
    width = max(len(k) for k in values)
    for k, v in values.items():
        click.echo(f"{k:{width}}  {v!s:40}  ({sources[k]})")


@config.command("docs")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write the reference to this file (default: print it).")
@click.option("--check", "check", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Exit 1 if this file is not the current reference.")
def config_docs(output: str | None, check: str | None) -> None:
    """The configuration reference (docs/configuration.md), generated from the settings declaration."""
    from .config_docs import render

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
