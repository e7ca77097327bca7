"""Exit codes of `commit-owner`, the same for every command, so that scripts can rely on them.

0 success; 1 the work failed (a backfill failed, a table not found, another refusal);
2 bad usage or configuration, or a dependency (database, storage) cannot be reached;
3 the database schema is out of date (run `commit-owner migrate`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

OK, FAILED, USAGE, OLD_SCHEMA = 0, 1, 2, 3


def classify(e: BaseException) -> tuple[int, str] | None:
    """(exit code, one-line message) for an error a command let escape; None for a bug (keep the traceback)."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    from client.contract.errors import CommitOwnerError, SchemaOutOfDateError, UnavailableError
    from coordinator.runtime.logs import redact

    if _missing_s3_credentials(e):
        from coordinator.storage.s3 import NO_CREDENTIALS

        return USAGE, NO_CREDENTIALS
    if isinstance(e, SchemaOutOfDateError):
        return OLD_SCHEMA, str(e)
    if isinstance(e, (OperationalError, DBAPIError)):
        orig = getattr(e, "orig", None) or e
        first = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
        return USAGE, redact(f"cannot use the database: {first}")
    if isinstance(e, UnavailableError):
        return USAGE, redact(e.message)
    if isinstance(e, CommitOwnerError):
        return FAILED, redact(e.message)
    if isinstance(e, OSError):
        return USAGE, redact(f"{type(e).__name__}: {e}")
    return None


def _missing_s3_credentials(e: BaseException) -> bool:
    """Whether botocore found no credentials anywhere in ``e``'s chain (a command writing to S3 itself)."""
    try:
        from botocore.exceptions import NoCredentialsError
    except ImportError:  # no S3 support installed: it cannot be this
        return False
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, NoCredentialsError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class ConfigError(click.ClickException):
    """Bad settings (a flag, a variable, the TOML file): one line on stderr, exit 2, no usage text (the
    command was spelled right; a value was not)."""

    exit_code = USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class OwnerGroup(click.Group):
    """The top-level group: known failures become one line on stderr and their exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            # Whoever read our output went away (`commit-owner tables list | head`): nothing left to tell it.
            # Point stdout at /dev/null so that the interpreter's own flush at exit does not fail again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(0)
        except Exception as e:  # noqa: BLE001 - mapped below or re-raised
            known = classify(e)
            if known is None:
                raise
            code, message = known
            click.echo(f"error: {message}", err=True)
            ctx.exit(code)
