"""What every `commit-owner` command shares: one flag per declared setting, and loading the settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from coordinator.cli.exit_codes import ConfigError
from coordinator.runtime.settings import SETTINGS, Settings


def settings_options(names: tuple[str, ...] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add one flag per declared setting (the single declaration in settings.py)."""

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        for s in reversed(SETTINGS):
            if names is not None and s.name not in names:
                continue
            if s.type.__name__ == "_bool":
                f = click.option(f"{s.option}/--no-{s.option[2:]}", s.name, default=None, help=s.help)(f)
            elif getattr(s.type, "multiple", False):  # repeatable; not given -> None, so env/TOML apply
                f = click.option(s.option, s.name, multiple=True, callback=lambda _c, _p, v: v or None,
                                 help=f"{s.help} [env {s.env}; default {','.join(s.default)!r}]")(f)
            else:
                f = click.option(s.option, s.name, default=None, type=s.type if s.type in (int, float) else str,
                                 help=f"{s.help} [env {s.env}; default {s.default!r}]")(f)
        return f

    return deco


def load_settings(config: str | None, **overrides: Any) -> Settings:
    try:
        return Settings.load(overrides, config_file=config)
    except (ValueError, OSError) as e:
        raise ConfigError(str(e)) from None
