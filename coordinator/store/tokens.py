"""The token store: bearer tokens of the HTTP API (SQL lives here, the rules in ``coordinator.security.tokens``).

A row holds the token id, the sha256 of its secret, its scopes and when it was created and revoked.
Revocation is a timestamp, never a delete, so ``tokens list`` keeps the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from client.contract.errors import InvalidArgumentError, UnavailableError
from coordinator.store.db import Db
from coordinator.store.rows import now_ms
from coordinator.store.schema import tokens


@dataclass(frozen=True)
class TokenRow:
    id: str
    hash: str
    scopes: list[dict[str, Any]]
    created: int
    revoked: int | None

    def to_json(self) -> dict[str, Any]:
        """Everything but the hash."""
        return {"id": self.id, "scopes": self.scopes, "created": self.created, "revoked": self.revoked}


def _row(r: Any) -> TokenRow:
    return TokenRow(id=r.id, hash=r.hash, scopes=list(r.scopes), created=int(r.created),
                    revoked=None if r.revoked is None else int(r.revoked))


class TokenStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.db = Db(engine, what="token store")

    async def _run(self, stmt: Any, write: bool) -> Any:
        """One statement: the result of a write, the rows of a read. Raises UnavailableError (``Db.tx``), also
        for a token id already stored (``ensure`` re-reads then: a concurrent import won)."""
        try:
            async with self.db.tx(write=write, single=True) as conn:
                res = await conn.execute(stmt)
                return res if write else res.all()
        except IntegrityError as e:
            raise UnavailableError(f"token store unavailable: {type(e.orig).__name__}") from e

    async def create(self, token_id: str, secret_hash: str, scopes: list[dict[str, Any]]) -> TokenRow:
        row = TokenRow(id=token_id, hash=secret_hash, scopes=scopes, created=now_ms(), revoked=None)
        await self._run(tokens.insert().values(id=row.id, hash=row.hash, scopes=row.scopes, created=row.created,
                                               revoked=None), write=True)
        return row

    async def ensure(self, token_id: str, secret_hash: str, scopes: list[dict[str, Any]]) -> tuple[TokenRow, bool]:
        """Store a token whose secret was made elsewhere (a deployment's bootstrap token) unless it is stored.

        Returns (row, whether it was created now). Raises InvalidArgumentError when the id is held by
        another secret or was revoked: an imported token is never replaced or revived.
        """
        row = await self.get(token_id)
        if row is None:
            try:
                return await self.create(token_id, secret_hash, scopes), True
            except UnavailableError:
                row = await self.get(token_id)  # a concurrent import won the insert
                if row is None:
                    raise
        if row.hash != secret_hash:
            raise InvalidArgumentError(f"token id {token_id} is already stored with another secret; "
                                       "generate a new token")
        if row.revoked is not None:
            raise InvalidArgumentError(f"token {token_id} was revoked; generate a new token")
        return row, False

    async def get(self, token_id: str) -> TokenRow | None:
        rows = await self._run(select(tokens).where(tokens.c.id == token_id), write=False)
        return _row(rows[0]) if rows else None

    async def revoke(self, token_id: str) -> bool:
        """Mark the token revoked; returns False when no such token exists (revoking twice is fine)."""
        res = await self._run(
            update(tokens).where(tokens.c.id == token_id, tokens.c.revoked.is_(None)).values(revoked=now_ms()),
            write=True)
        if res.rowcount:
            return True
        return await self.get(token_id) is not None

    async def list(self) -> list[TokenRow]:
        return [_row(r) for r in await self._run(select(tokens).order_by(tokens.c.created), write=False)]
