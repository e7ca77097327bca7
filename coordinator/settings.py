"""Every setting of the service, declared once.

Each :class:`Setting` drives a command-line flag (``--name``), an environment variable
(``COMMIT_OWNER_NAME``), a key of the optional TOML file and the configuration reference in
``docs/configuration.md``. Precedence: flag > environment > TOML file > default.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import Any, Callable

ENV_PREFIX = "COMMIT_OWNER_"


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def _list(v: Any) -> tuple[str, ...]:
    """A list setting: repeated flags, a TOML array or a comma-separated environment variable."""
    items = [v] if isinstance(v, str) else list(v)
    return tuple(p.strip() for item in items for p in str(item).split(",") if p.strip())


_list.multiple = True  # type: ignore[attr-defined]  # the CLI makes its flag repeatable


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    type: Callable[[Any], Any] = str
    secret: bool = False
    flag: bool = True  # whether `serve` exposes it as a flag

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting("database_url", "sqlite+aiosqlite:///./commit-owner.db",
            "SQLAlchemy URL of the ownership store (sqlite+aiosqlite:///path or postgresql+psycopg://...)."),
    Setting("host", "127.0.0.1", "Address the HTTP API listens on."),
    Setting("port", 8080, "Port the HTTP API listens on.", int),
    Setting("commit_dir", "_commits",
            "Default staged-commit folder for new tables: _commits (RFC, Delta 3.x) or _staged_commits (Delta >= 4.0)."),
    Setting("s3_endpoint_url", "", "S3 endpoint URL (MinIO, moto, ...); empty means AWS."),
    Setting("s3_region", "us-east-1", "S3 region."),
    Setting("s3_access_key_id", "", "S3 access key id (else the usual AWS environment/credential chain).", secret=True),
    Setting("s3_secret_access_key", "", "S3 secret access key.", secret=True),
    Setting("backfill", True, "Run the backfiller inside the service (--no-backfill turns it off).", _bool),
    Setting("backfill_batch_size", 1, "Backfill once this many commits are unbackfilled (1 = after every commit).", int),
    Setting("backfill_interval_ms", 0, "Also backfill every T milliseconds (0 = only on the batch trigger).", int),
    Setting("max_unbackfilled_commits", 50,
            "Refuse commits with 429 once a table has this many unbackfilled commits.", int),
    Setting("backfill_lease_seconds", 10.0,
            "How long a process holds a table's backfill lease before another may take it over.", float),
    Setting("max_body_bytes", 64 * 1024 * 1024, "Largest accepted request body (413 above).", int),
    Setting("request_timeout_seconds", 30.0, "Deadline for the storage and database work of one request.", float),
    Setting("db_pool_size", 10, "Database connection pool size.", int),
    Setting("storage_threads", 16, "Threads of the bounded pool that runs blocking local-disk I/O.", int),
    Setting("log_level", "INFO", "Log level (DEBUG, INFO, WARNING, ERROR)."),
    Setting("log_format", "auto", "Log format: auto (JSON lines when not on a terminal), json or text."),
    # -- operations (issue 9) --
    Setting("event_loop", "auto",
            "Event loop of `serve`: auto (uvloop when installed, else asyncio), uvloop or asyncio."),
    Setting("shutdown_grace_seconds", 10.0,
            "On SIGTERM/SIGINT, how long requests in flight may take to finish before they are cancelled.", float),
    # -- security (issue 7): authentication, allowed roots, input limits --
    Setting("auth", "none",
            "Authentication: tokens (bearer tokens from `commit-owner tokens create`) or none (loopback hosts only)."),
    Setting("allow_insecure_no_auth", False,
            "Allow --auth none on a non-loopback address (logs a warning; anyone who reaches the port may commit).",
            _bool),
    Setting("allow_location", ("./warehouse",),
            "Roots under which tables may be registered (repeatable; comma-separated in the environment); "
            "a path without a scheme is relative to the working directory.", _list),
    Setting("max_line_bytes", 16 * 1024 * 1024, "Largest accepted line (one action) of a commit body.", int),
    # -- reliability: orphan janitor, test-only fault injection (docs/reliability.md) --
    Setting("janitor_interval_seconds", 600.0,
            "Remove orphan commit files (never ratified) every N seconds in the service; 0 turns the janitor off.",
            float),
    Setting("janitor_min_age_seconds", 3600.0,
            "Only orphans older than this are removed (raised to 3 x request_timeout_seconds + 5 s at least).", float),
    Setting("fault_injection", "",
            "TEST ONLY, never in production: make log storage fail and slow down on purpose, e.g. "
            "'put_error=0.1;put_lost_ack=0.1;latency_ms=0-300;match=TEXT;seed=1'. Empty (default) = off."),
)

BY_NAME = {s.name: s for s in SETTINGS}


class _SettingsMethods:
    """Behaviour of :class:`Settings`; its fields are generated from :data:`SETTINGS` below."""

    @classmethod
    def load(
        cls,
        overrides: dict[str, Any] | None = None,
        *,
        environ: dict[str, str] | None = None,
        config_file: str | os.PathLike[str] | None = None,
    ) -> Any:
        """Build settings from defaults, a TOML file, the environment and explicit overrides (in rising priority)."""
        environ = dict(os.environ if environ is None else environ)
        values: dict[str, Any] = {}
        path = config_file or environ.get(ENV_PREFIX + "CONFIG")
        if path:
            data = tomllib.loads(Path(path).read_text())
            data = data.get("commit-owner", data)
            for k, v in data.items():
                key = k.replace("-", "_")
                if key not in BY_NAME:
                    raise ValueError(f"unknown setting {k!r} in {path}")
                values[key] = v
        for s in SETTINGS:
            if s.env in environ:
                values[s.name] = environ[s.env]
        for k, v in (overrides or {}).items():
            if v is not None:
                values[k] = v
        out = cls()  # type: ignore[call-arg]
        for k, v in values.items():
            setting = BY_NAME[k]
            try:
                setattr(out, k, setting.type(v))
            except (TypeError, ValueError) as e:
                raise ValueError(f"bad value for {setting.option} / {setting.env}: {v!r} ({e})") from None
        out.validate()
        return out

    def validate(self) -> None:
        if self.commit_dir not in ("_commits", "_staged_commits"):
            raise ValueError(f"commit_dir must be _commits or _staged_commits, got {self.commit_dir!r}")
        if self.backfill_batch_size < 1:
            raise ValueError("backfill_batch_size must be >= 1")
        if self.max_unbackfilled_commits < 1:
            raise ValueError("max_unbackfilled_commits must be >= 1")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be >= 1024")
        if self.auth not in ("none", "tokens"):
            raise ValueError(f"auth must be tokens or none, got {self.auth!r}")
        if self.max_line_bytes < 1024:
            raise ValueError("max_line_bytes must be >= 1024")
        if self.fault_injection:
            from .storage.faults import FaultSpec

            FaultSpec.parse(self.fault_injection)

    def public(self) -> dict[str, Any]:
        """The settings with secrets masked, for logs and status pages."""
        return {
            f.name: ("***" if BY_NAME[f.name].secret and getattr(self, f.name) else getattr(self, f.name))
            for f in fields(self)
        }


# The one declaration above also defines the settings object: one field per Setting, same default.
Settings = make_dataclass(
    "Settings",
    [(st.name, Any, field(default=st.default, repr=not st.secret)) for st in SETTINGS],
    bases=(_SettingsMethods,),
)
Settings.__module__ = __name__
Settings.__doc__ = "The service's settings: one attribute per entry of SETTINGS."
