"""`commit-owner tokens create / revoke / list`: bearer tokens, straight against the database.

The secret of a new token is printed once and never stored; only its sha256 is.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from client.contract.errors import CommitOwnerError
from coordinator.cli.exit_codes import classify
from coordinator.cli.human import when
from coordinator.cli.options import load_settings, settings_options
from coordinator.runtime.settings import Settings
from coordinator.security.tokens import new_token, parse_scope, session_name
from coordinator.store import open_engine
from coordinator.store.tokens import TokenStore

T = TypeVar("T")


def _run(settings: Settings, work: Callable[[TokenStore], Awaitable[T]]) -> T:
    async def go() -> T:
        async with open_engine(settings.database_url, pool_size=1, timeout=settings.request_timeout_seconds) as engine:
            return await work(TokenStore(engine))

    try:
        return asyncio.run(go())
    except Exception as e:  # noqa: BLE001 - mapped by the one exit-code table, or re-raised
        known = classify(e)
        if known is None:
            raise
        click.echo(f"error: {known[1]}", err=True)
        sys.exit(known[0])


def _options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = settings_options(("database_url",))(f)
    return click.option("--config", type=click.Path(dir_okay=False), default=None,
                        help="TOML file with settings.")(f)


def _settings(config: str | None, overrides: dict[str, Any]) -> Settings:
    return load_settings(config, **overrides)


@click.group()
def tokens() -> None:
    """Bearer tokens of the HTTP API (used when the service runs with --auth tokens)."""


@tokens.command("create")
@click.option("--scope", "scopes", multiple=True, required=True, metavar="PREFIX:ACTION[,ACTION]",
              help="Location prefix (or *) and actions read, commit, admin; or *:ops (only /metrics and the "
                   "status page, for monitoring); repeatable. Example: --scope s3://bucket/team-a:commit")
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


@tokens.command("generate")
def tokens_generate() -> None:
    """Print a new token without storing it: the secret for `tokens import` (e.g. a deployment's bootstrap token)."""
    click.echo(new_token()[2])


@tokens.command("import")
@click.option("--scope", "scopes", multiple=True, required=True, metavar="PREFIX:ACTION[,ACTION]",
              help="Scopes of the token if it is not stored yet (as for `tokens create`); repeatable.")
@click.option("--from-env", "env_name", default=None, metavar="NAME", help="Read the token from this variable.")
@click.option("--from-file", "file_name", type=click.Path(dir_okay=False), default=None,
              help="Read the token from this file (e.g. a mounted secret).")
@_options
def tokens_import(scopes: tuple[str, ...], env_name: str | None, file_name: str | None, config: str | None,
                  **overrides: Any) -> None:
    """Store a token made elsewhere (`tokens generate`), once: running it again with the same token is a no-op.

    This is how a deployment gets its first admin token without a secret in the image: the operator
    generates one, hands it to the service's environment or a secret file, and the start-up script
    imports it before `serve`. The token is never printed.
    """
    import os
    from pathlib import Path

    from coordinator.security.tokens import hash_secret, split_token

    if (env_name is None) == (file_name is None):
        raise click.UsageError("give exactly one of --from-env and --from-file")
    if env_name is not None:
        text, source = os.environ.get(env_name, ""), f"environment variable {env_name}"
    else:
        try:
            text, source = Path(file_name).read_text(), f"file {file_name}"  # type: ignore[arg-type]
        except OSError as e:
            raise click.UsageError(f"cannot read {file_name}: {e.strerror}") from None
    parts = split_token(text.strip())
    if parts is None:
        raise click.UsageError(f"{source} does not hold a token (dco_<16 hex>_<secret>, as `commit-owner tokens "
                               "generate` prints)" + ("; it is empty or unset" if not text.strip() else ""))
    try:
        parsed = [parse_scope(s) for s in scopes]
    except CommitOwnerError as e:
        raise click.UsageError(e.message) from None
    row, created = _run(_settings(config, overrides), lambda store: store.ensure(parts[0], hash_secret(parts[1]), parsed))
    scope_text = "; ".join(f"{s['prefix']}:{','.join(s['actions'])}" for s in row.scopes)
    click.echo(f"token {row.id} {'imported' if created else 'already present'} ({scope_text})", err=True)


def deny_statement(token_id: str) -> dict[str, Any]:
    """An IAM policy statement that ends, at once, every STS session the owner opened for ``token_id``: the owner
    names each session ``commit-owner-<token id>`` (api/vending.py), and for an assumed role AWS sets
    ``aws:userid`` to ``<role id>:<session name>``. To add to the vending role's policy (docs/security.md)."""
    return {"Sid": f"RevokedCommitOwnerToken{token_id}", "Effect": "Deny", "Action": "*", "Resource": "*",
            "Condition": {"StringLike": {"aws:userid": f"*:{session_name(token_id)}"}}}


@tokens.command("revoke")
@click.argument("token_id")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON (revoked, the credentials that outlive the token, the IAM statement that ends them).")
@_options
def tokens_revoke(token_id: str, as_json: bool, config: str | None, **overrides: Any) -> None:
    """Revoke a token at once (requests with it get 401 from then on).

    Credentials vended to the token before stay valid until they expire (S3 and Azure: at most
    vend_duration_seconds after they were issued; GCS: the owner's token's life): the command lists them and,
    for S3 ones, prints the IAM statement that ends them now.
    """
    from coordinator.store.vended import VendedStore

    async def work(store: TokenStore) -> list[Any] | None:
        if not await store.revoke(token_id):
            return None
        return await VendedStore(store.db).valid_for_token(token_id)

    settings = _settings(config, overrides)
    outstanding = _run(settings, work)
    if outstanding is None:
        click.echo(f"error: no token with id {token_id}", err=True)
        sys.exit(1)
    s3 = [v for v in outstanding if v.kind == "s3"]
    until = max((v.expires_at for v in outstanding), default=None)
    report = {"revoked": token_id, "outstanding": [v.to_json() for v in outstanding], "validUntil": until,
              "s3DenyStatement": deny_statement(token_id) if s3 else None}
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"revoked {token_id}")
    if not outstanding:
        return
    click.echo(f"{len(outstanding)} credential(s) vended to this token still work until they expire, the last at "
               f"{when(until)}:", err=True)
    for v in outstanding:
        click.echo(f"  {v.kind:5}  {v.operation:16}  until {when(v.expires_at)}  {v.location}", err=True)
    if s3:
        role = settings.vend_role_arn or "the vending role (vend_role_arn)"
        click.echo(f"The owner cannot revoke an STS session. To end the S3 ones now, add this statement to the "
                   f"policy of {role} (docs/security.md):", err=True)
        click.echo(json.dumps(report["s3DenyStatement"]), err=True)
    kinds = {v.kind for v in outstanding}
    if "azure" in kinds:
        click.echo("No single Azure SAS can be ended: rotating the account key ends every service SAS it signed, "
                   "revoking the account's user delegation keys every user-delegation SAS (docs/security.md).",
                   err=True)
    if "gcs" in kinds:
        click.echo("A downscoped GCS token cannot be ended: it lives until the owner's own token it came from "
                   "expires (docs/security.md).", err=True)


@tokens.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_options
def tokens_list(as_json: bool, config: str | None, **overrides: Any) -> None:
    """Every token: id, scopes, created, revoked (never a secret or a hash)."""
    rows = _run(_settings(config, overrides), lambda store: store.list())
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], indent=2))
        return

    click.echo(f"{'TOKEN ID':16}  {'CREATED':20}  {'REVOKED':20}  SCOPES")
    for r in rows:
        scopes = "; ".join(f"{s['prefix']}:{','.join(s['actions'])}" for s in r.scopes)
        click.echo(f"{r.id:16}  {when(r.created):20}  {when(r.revoked):20}  {scopes}")
