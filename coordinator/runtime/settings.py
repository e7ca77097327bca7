"""Every setting of the service, declared once.

Each :class:`Setting` drives a command-line flag (``--name``), an environment variable
(``COMMIT_OWNER_NAME``), a key of the optional TOML file and the configuration reference in
``docs/configuration.md``. Precedence: flag > environment > TOML file > default.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import tomllib

from client.contract.layout import COMMIT_DIRS, COMMITS_DIR

ENV_PREFIX = "COMMIT_OWNER_"


def sas_expiry(sas: str) -> datetime | None:
    """The expiry (``se=``) of an Azure SAS token, None when it has none or none readable."""
    for part in sas.lstrip("?").split("&"):
        name, _, value = part.partition("=")
        if name == "se":
            text = urllib.parse.unquote(value).replace("Z", "+00:00")
            try:
                ends = datetime.fromisoformat(text)
            except ValueError:
                return None
            return ends if ends.tzinfo else ends.replace(tzinfo=timezone.utc)
    return None


def _connection_sas(connection_string: str) -> str:
    for part in connection_string.split(";"):
        name, _, value = part.partition("=")
        if name.strip() == "SharedAccessSignature":
            return value
    return ""


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


def setting(default: Any, help: str, *, parse: Callable[[Any], Any] = str, secret: bool = False,
            flag: bool = True) -> Any:
    """One setting: its default, its help text (flags, ``config docs``), how a flag/env/TOML value is parsed,
    whether it is a secret (masked everywhere) and whether `serve` exposes it as a flag."""
    return field(default=default, repr=not secret,
                 metadata={"help": help, "parse": parse, "secret": secret, "flag": flag})


@dataclass
class Settings:
    """The service's settings: the one declaration of every setting, typed (see :func:`setting`)."""

    database_url: str = setting(
        "sqlite+aiosqlite:///./commit-owner.db",
        "SQLAlchemy URL of the ownership store (sqlite+aiosqlite:///path or postgresql+psycopg://...).")
    host: str = setting(
        "127.0.0.1",
        "Address the HTTP API listens on.")
    port: int = setting(
        8080,
        "Port the HTTP API listens on.",
        parse=int)
    commit_dir: str = setting(
        COMMITS_DIR,
        "Default staged-commit folder for new tables: _commits (RFC, Delta 3.x) or _staged_commits (Delta >= "
        "4.0).")
    s3_endpoint_url: str = setting(
        "",
        "S3 endpoint URL (MinIO, moto, ...); empty means AWS.")
    s3_region: str = setting(
        "us-east-1",
        "S3 region.")
    s3_access_key_id: str = setting(
        "",
        "S3 access key id (else the usual AWS environment/credential chain).",
        secret=True)
    s3_secret_access_key: str = setting(
        "",
        "S3 secret access key.",
        secret=True)
    azure_account_name: str = setting(
        "",
        "Azure storage account of the owner's abfss:// tables (abfss://<container>@<account>.dfs.core.windows.net/"
        "...); a location naming another account is refused. Empty = the account of azure_connection_string.")
    azure_account_key: str = setting(
        "",
        "Shared key of azure_account_name: signs the owner's requests and the service SAS it vends.",
        secret=True)
    azure_sas_token: str = setting(
        "",
        "A SAS token the owner signs its requests with instead of a key (it then vends no Azure credentials); "
        "refused at start once its expiry (se=) has passed.",
        secret=True)
    azure_connection_string: str = setting(
        "",
        "An Azure Storage connection string (account, key or SAS, endpoint) instead of the settings above.",
        secret=True)
    azure_endpoint: str = setting(
        "",
        "Blob endpoint of the account (azurite: http://127.0.0.1:10000/devstoreaccount1); empty = "
        "https://<account>.blob.core.windows.net.")
    azure_use_identity: bool = setting(
        False,
        "Sign with the owner's Entra identity (azure-identity's DefaultAzureCredential: managed identity, "
        "workload identity, environment) and vend user-delegation SAS; no key needed.",
        parse=_bool)
    azure_vend_scope: str = setting(
        "directory",
        "What a vended Azure SAS opens: directory (sr=d: the table's folder only; needs a hierarchical-namespace "
        "account, ADLS Gen2) or container (sr=c: the whole container, for flat-namespace accounts and azurite; "
        "keep one table per container then). docs/security.md.")
    gcs_project: str = setting(
        "",
        "Google Cloud project of the owner's gs:// buckets (empty = the credentials' own).")
    gcs_credentials_file: str = setting(
        "",
        "Service-account JSON key file the owner signs gs:// requests with (else GOOGLE_APPLICATION_CREDENTIALS, "
        "or gcs_token).")
    gcs_token: str = setting(
        "",
        "An OAuth 2.0 access token the owner uses for gs:// instead of a key file.",
        secret=True)
    gcs_endpoint: str = setting(
        "",
        "Cloud Storage endpoint (fake-gcs-server: http://127.0.0.1:4443); empty = https://storage.googleapis.com.")
    gcs_sts_endpoint: str = setting(
        "",
        "Security Token Service the owner exchanges its token at for downscoped gs:// credentials; empty = "
        "https://sts.googleapis.com/v1/token.")
    backfill: bool = setting(
        True,
        "Run the backfiller inside the service (--no-backfill turns it off).",
        parse=_bool)
    backfill_batch_size: int = setting(
        1,
        "Backfill once this many commits are unbackfilled (1 = after every commit).",
        parse=int)
    backfill_interval_ms: int = setting(
        0,
        "Also backfill every T milliseconds (0 = only on the batch trigger).",
        parse=int)
    backfill_mark_delay_ms: int = setting(
        20,
        "The background backfiller records published versions this much later, many tables in one round trip "
        "(0 = at once).",
        parse=int)
    publish_with_commit: bool = setting(
        True,
        "Publish an /api/v1 commit as _delta_log/<v>.json (a copy of its staged file) before answering it, when "
        "this process can publish it next (decisions 61, 62, 67): every Delta reader sees the version when its "
        "writer does; off: it is published a moment after its answer. Every commit has its staged file either way.",
        parse=_bool)
    max_unbackfilled_commits: int = setting(
        50,
        "Refuse commits with 429 once a table has this many unbackfilled commits.",
        parse=int)
    backfill_lease_seconds: float = setting(
        10.0,
        "How long a process holds a table's backfill lease before another may take it over.",
        parse=float)
    max_body_bytes: int = setting(
        64 * 1024 * 1024,
        "Largest accepted request body (413 above).",
        parse=int)
    request_timeout_seconds: float = setting(
        30.0,
        "Deadline for the storage and database work of one request: each database transaction and each log-storage "
        "call gets this long (waiting for a pooled connection included); past it the connection is closed, never "
        "reused, and the request is answered 503 UNAVAILABLE (retryable).",
        parse=float)
    db_connect_timeout_seconds: float = setting(
        5.0,
        "Deadline for opening one database connection (each host of a multi-host PostgreSQL URL in turn; at least "
        "2 s). A connect_timeout in the database URL takes precedence.",
        parse=float)
    commit_turn_seconds: float = setting(
        0.5,
        "Writers racing on one table that send a Commit-Slot ticket are served in the order they lost: the head of "
        "the line's turn waits this long for its next proposal (then passes on); 0 turns the line off.",
        parse=float)
    db_pool_size: int = setting(
        10,
        "Database connection pool size.",
        parse=int)
    group_commit_max_rows: int = setting(
        64,
        "Group commit: at most this many ratifications (and backfill marks) of different tables that arrive "
        "together share one database round trip; 1 runs each on its own. On PostgreSQL a table row held by "
        "another transaction is skipped, never waited for, so one stuck table holds up only its own writes "
        "(docs/decisions.md, group commit).",
        parse=int)
    storage_threads: int = setting(
        16,
        "Threads of the bounded pool that runs blocking local-disk I/O.",
        parse=int)
    log_level: str = setting(
        "INFO",
        "Log level (DEBUG, INFO, WARNING, ERROR). INFO writes one access line per request (a few microseconds of "
        "CPU each); WARNING and above leave the access log out, the request metrics still count every request.")
    log_format: str = setting(
        "auto",
        "Log format: auto (JSON lines when not on a terminal), json or text.")
    # -- operations --
    event_loop: str = setting(
        "auto",
        "Event loop of `serve`: auto (uvloop when installed, else asyncio), uvloop or asyncio.")
    workers: int = setting(
        0,
        "Service processes of `serve` on the one port (0 = the number of CPUs). With 2 or more, a supervising "
        "process restarts a worker that dies and sums every worker's /metrics; 1 = today's single process.",
        parse=int)
    shutdown_grace_seconds: float = setting(
        10.0,
        "On SIGTERM/SIGINT, how long requests in flight may take to finish before they are cancelled.",
        parse=float)
    # -- security: authentication, allowed roots, input limits --
    auth: str = setting(
        "none",
        "Authentication: tokens (bearer tokens from `commit-owner tokens create`) or none (loopback hosts "
        "only).")
    allow_insecure_no_auth: bool = setting(
        False,
        "Allow --auth none on a non-loopback address (logs a warning; anyone who reaches the port may "
        "commit).",
        parse=_bool)
    allow_location: tuple[str, ...] = setting(
        ("./warehouse",),
        "Roots under which tables may be registered (repeatable; comma-separated in the environment); a path "
        "without a scheme is relative to the working directory.",
        parse=_list)
    managed_location: str = setting(
        "./warehouse/managed",
        "Where the Unity Catalog facade puts new managed tables (POST /staging-tables): a local path or s3:// "
        "prefix that must lie under an --allow-location root; a path without a scheme is relative to the "
        "working directory.")
    get_commits_page_size: int = setting(
        500,
        "Most commits one Unity Catalog getCommits reply lists (from start_version on); a client that gets fewer "
        "than its range asks again from the next version, as the UC spec says.",
        parse=int)
    staging_expiry_seconds: float = setting(
        7 * 24 * 3600.0,
        "A staging-table reservation (POST /staging-tables) never turned into a table is removed after this "
        "long by the janitor's round or `commit-owner staging clean`, with the files under its location when they "
        "are surely its own; 0 keeps reservations forever.",
        parse=float)
    # -- credential vending (POST /temporary-table-credentials, /temporary-path-credentials) --
    vend_role_arn: str = setting(
        "",
        "IAM role the owner assumes (STS AssumeRole) to vend short-lived S3 credentials scoped to one table; "
        "empty = S3 credentials are refused (400 naming this setting).")
    vend_duration_seconds: int = setting(
        900,
        "Lifetime of vended credentials, in seconds (STS accepts 900 to the role's maximum session duration).",
        parse=int)
    sts_endpoint_url: str = setting(
        "",
        "STS endpoint URL for credential vending; empty = the same as s3_endpoint_url (AWS when both are "
        "empty).")
    max_transaction_tables: int = setting(
        64,
        "Largest number of tables one multi-table transaction (POST /api/v1/transactions) or consistent read "
        "(POST /api/v1/snapshots) may name (400 above).",
        parse=int)
    max_transaction_bytes: int = setting(
        16 * 1024 * 1024,
        "Largest total size of the commit bodies of one multi-table transaction (413 above; a single request "
        "is also bounded by max_body_bytes).",
        parse=int)
    max_line_bytes: int = setting(
        16 * 1024 * 1024,
        "Largest accepted line (one action) of a commit body.",
        parse=int)
    max_clock_skew_seconds: float = setting(
        300.0,
        "Refuse a commit whose inCommitTimestamp is more than this far ahead of the owner's clock (a writer with a "
        "fast clock would otherwise force every later commit to be stamped after it).",
        parse=float)
    # -- reliability: orphan janitor, test-only fault injection (docs/reliability.md) --
    janitor_interval_seconds: float = setting(
        600.0,
        "Remove orphan commit files (never ratified) every N seconds in the service; 0 turns the janitor off.",
        parse=float)
    janitor_full_round_seconds: float = setting(
        86400.0,
        "The service's janitor looks at the tables with recent activity every round, and at every other table "
        "within about this many seconds (a slice per round); `commit-owner janitor` looks at every table.",
        parse=float)
    janitor_min_age_seconds: float = setting(
        3600.0,
        "Only orphans older than this are removed (raised to 3 x request_timeout_seconds + 5 s at least).",
        parse=float)
    # -- maintenance: compaction (`commit-owner optimize`, docs/maintenance.md) --
    optimize_target_file_bytes: int = setting(
        128 * 1024 * 1024,
        "Compaction rewrites a partition's files smaller than this into files of about this size (bytes, above 0).",
        parse=int)
    optimize_min_small_files: int = setting(
        2,
        "Compaction leaves a partition alone unless it has at least this many files smaller than the target (2 or more).",
        parse=int)
    # -- maintenance: the policy `commit-owner maintain` runs (docs/maintenance.md; per table: commitowner.* properties) --
    maintain_optimize: bool = setting(
        True,
        "`commit-owner maintain` compacts a table when the policy's thresholds say so (table property "
        "commitowner.autoOptimize.enabled overrides it per table).",
        parse=_bool)
    maintain_optimize_partition_files: int = setting(
        50,
        "The policy compacts a table when one of its partitions has more than this many files smaller than the "
        "target (table property commitowner.autoOptimize.partitionSmallFiles; 2 or more).",
        parse=int)
    maintain_optimize_table_files: int = setting(
        500,
        "... or when the whole table has more than this many files smaller than the target (table property "
        "commitowner.autoOptimize.tableSmallFiles; 2 or more).",
        parse=int)
    maintain_vacuum: bool = setting(
        True,
        "`commit-owner maintain` vacuums a table (files no version within delta.deletedFileRetentionDuration "
        "needs) at most once per maintain_vacuum_interval_seconds (table property commitowner.autoVacuum.enabled "
        "overrides it per table).",
        parse=_bool)
    maintain_vacuum_interval_seconds: float = setting(
        86400.0,
        "Least time between two vacuums of a table by `commit-owner maintain` (table property "
        "commitowner.autoVacuum.interval, a Delta interval such as 'interval 12 hours').",
        parse=float)

    @classmethod
    def load(
        cls,
        overrides: dict[str, Any] | None = None,
        *,
        environ: dict[str, str] | None = None,
        config_file: str | os.PathLike[str] | None = None,
    ) -> Settings:
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
        out = cls()
        for k, v in values.items():
            setting = BY_NAME[k]
            try:
                setattr(out, k, setting.type(v))
            except (TypeError, ValueError) as e:
                raise ValueError(f"bad value for {setting.option} / {setting.env}: {v!r} ({e})") from None
        out.validate()
        return out

    def validate(self) -> None:
        from coordinator.store.engine import check_database_url

        try:
            check_database_url(self.database_url)
        except ValueError as e:
            raise ValueError(f"bad value for --database-url / COMMIT_OWNER_DATABASE_URL: {e}") from None
        if self.commit_dir not in COMMIT_DIRS:
            raise ValueError(f"commit_dir must be one of {', '.join(COMMIT_DIRS)}, got {self.commit_dir!r}")
        if self.backfill_mark_delay_ms < 0:
            raise ValueError("backfill_mark_delay_ms must be >= 0")
        if self.backfill_batch_size < 1:
            raise ValueError("backfill_batch_size must be >= 1")
        if self.db_connect_timeout_seconds <= 0:
            raise ValueError("db_connect_timeout_seconds must be > 0")
        if self.group_commit_max_rows < 1:
            raise ValueError("group_commit_max_rows must be >= 1")
        if self.workers < 0:
            raise ValueError("workers must be >= 0 (0 = the number of CPUs)")
        if self.max_unbackfilled_commits < 1:
            raise ValueError("max_unbackfilled_commits must be >= 1")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be >= 1024")
        if self.auth not in ("none", "tokens"):
            raise ValueError(f"auth must be tokens or none, got {self.auth!r}")
        if self.azure_vend_scope not in ("directory", "container"):
            raise ValueError(f"azure_vend_scope must be directory or container, got {self.azure_vend_scope!r}")
        for name, sas in (("azure_sas_token", self.azure_sas_token),
                          ("azure_connection_string", _connection_sas(self.azure_connection_string))):
            ends = sas_expiry(sas)
            if ends is not None and ends <= datetime.now(timezone.utc):
                raise ValueError(f"the SAS in {name} / {ENV_PREFIX}{name.upper()} expired at "
                                 f"{ends.isoformat()} (its se=): give one that is still valid")
        if not 900 <= self.vend_duration_seconds <= 43200:
            raise ValueError("vend_duration_seconds must be between 900 and 43200 (STS limits)")
        if self.get_commits_page_size < 1:
            raise ValueError("get_commits_page_size must be >= 1")
        if self.staging_expiry_seconds < 0:
            raise ValueError("staging_expiry_seconds must be >= 0 (0 = never expire)")
        if not 0 <= self.commit_turn_seconds <= 60:
            raise ValueError("commit_turn_seconds must be between 0 (no line) and 60")
        if not self.janitor_full_round_seconds > 0:
            raise ValueError("janitor_full_round_seconds must be > 0")
        if self.max_transaction_tables < 1:
            raise ValueError("max_transaction_tables must be >= 1")
        if self.max_transaction_bytes < 1024:
            raise ValueError("max_transaction_bytes must be >= 1024")
        if self.max_line_bytes < 1024:
            raise ValueError("max_line_bytes must be >= 1024")
        if not self.max_clock_skew_seconds > 0:
            raise ValueError("max_clock_skew_seconds must be > 0")
        if self.optimize_target_file_bytes < 1:
            raise ValueError("optimize_target_file_bytes must be > 0")
        if self.optimize_min_small_files < 2:
            raise ValueError("optimize_min_small_files must be >= 2")
        if self.maintain_optimize_partition_files < 2 or self.maintain_optimize_table_files < 2:
            raise ValueError("maintain_optimize_partition_files and maintain_optimize_table_files must be >= 2")
        if self.maintain_vacuum_interval_seconds < 0:
            raise ValueError("maintain_vacuum_interval_seconds must be >= 0")

    def public(self) -> dict[str, Any]:
        """The settings with secrets masked, for logs and status pages."""
        return {
            f.name: ("***" if BY_NAME[f.name].secret and getattr(self, f.name) else getattr(self, f.name))
            for f in fields(self)
        }


@dataclass(frozen=True)
class Setting:
    """A view of one field of :class:`Settings` for the CLI, the environment and the generated docs."""

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


SETTINGS: tuple[Setting, ...] = tuple(
    Setting(f.name, f.default, f.metadata["help"], f.metadata["parse"], f.metadata["secret"], f.metadata["flag"])
    for f in fields(Settings)
)
def worker_count(setting: int) -> int:
    """The ``workers`` setting resolved: 0 means the CPUs this process may run on."""
    if setting > 0:
        return setting
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


BY_NAME = {s.name: s for s in SETTINGS}
