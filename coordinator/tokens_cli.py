"""`commit-owner tokens create / revoke / list`: bearer tokens, straight against the database.

The secret of a new token is printed once and never stored; only its sha256 is.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any, Awaitable, Callable, TypeVar

import click

from client.errors import CommitOwnerError

from .settings import Settings
from .store import check_schema, create_engine
from .store.tokens import TokenStore
from .tokens import new_token, parse_scope

T = TypeVar("T")


def _run(settings: Settings, work: Callable[[TokenStore], Awaitable[T]]) -> T:
    async def go() -> T:
        engine = create_engine(settings.database_url, pool_size=1, timeout=settings.request_timeout_seconds)
        try:
            await check_schema(engine)
            return await work(TokenStore(engine))
        finally:
            await engine.dispose()

    try:
        return asyncio.run(go())
    except CommitOwnerError as e:
        click.echo(f"error: {e.message}", err=True)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001  (schema out of date, database unreachable)
        click.echo(f"error: {e}", err=True)
        sys.exit(3 if type(e).__name__ == "SchemaOutOfDateError" else 2)


def _options(f: Callable[..., Any]) -> Callable[..., Any]:
    from .cli import _settings_options

    f = _settings_options(("database_url",))(f)
    return click.option("--config", type=click.Path(dir_okay=False), default=None,
                        help="TOML file with settings.")(f)


def _settings(config: str | None, overrides: dict[str, Any]) -> Settings:
    from .cli import _load

    return _load(config, **overrides)


@click.group()
def tokens() -> None:
    """Bearer tokens of the HTTP API (used when the service runs with --auth tokens)."""


@tokens.command("create")
@click.option("--scope", "scopes", multiple=True, required=True, metavar="PREFIX:ACTION[,ACTION]",
              help="Location prefix (or *) and actions read, commit, admin; repeatable. "
                   "Example: --scope s3://bucket/team-a:commit")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (id, token, scopes).")
@_options
def tokens_create(scopes: tuple[str, ...], as_json: bool, config: str | None, **overrides: Any) -> None:
    """Create a token; its secret is printed once (store it now, it cannot be shown again)."""
    try:
        parsed = [parse_scope(s) for s in scopes]
    except CommitOwnerError as e:
        raise click.UsageError(e.message) from None
    token_id, secret_hash, token = new_token()
    row = _run(_settings(config, overrides), lambda store: store.create(token_id, secret_hash, parsed))
    if as_json:
        click.echo(json.dumps({**row.to_json(), "token": token}, indent=2))
        return
    click.echo(f"token id: {row.id}", err=True)
    for s in row.scopes:
        click.echo(f"  scope: {s['prefix']} -> {', '.join(s['actions'])}", err=True)
    click.echo("the token (shown only now):", err=True)
    click.echo(token)


@tokens.command("revoke")
@click.argument("token_id")
@_options
def tokens_revoke(token_id: str, config: str | None, **overrides: Any) -> None:
    """Revoke a token at once (requests with it get 401 from then on)."""
    if not _run(_settings(config, overrides), lambda store: store.revoke(token_id)):
        click.echo(f"error: no token with id {token_id}", err=True)
        sys.exit(1)
    click.echo(f"revoked {token_id}")


@tokens.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_options
def tokens_list(as_json: bool, config: str | None, **overrides: Any) -> None:
    """Every token: id, scopes, created, revoked (never a secret or a hash)."""
    rows = _run(_settings(config, overrides), lambda store: store.list())
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], indent=2))
        return

    def when(ms: int | None) -> str:
        return "-" if ms is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))

    click.echo(f"{'TOKEN ID':16}  {'CREATED':20}  {'REVOKED':20}  SCOPES")
    for r in rows:
        scopes = "; ".join(f"{s['prefix']}:{','.join(s['actions'])}" for s in r.scopes)
        click.echo(f"{r.id:16}  {when(r.created):20}  {when(r.revoked):20}  {scopes}")
