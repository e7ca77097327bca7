"""The ledger of vended credentials: which token asked for which credential, and until when it works.

The owner cannot revoke a credential it vended (an STS session lives until its expiry); the ledger is what
lets revoking a token say which credentials outlive it, until when, and how to cut them (docs/security.md).
No secret is stored.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, select

from coordinator.store.db import Db
from coordinator.store.rows import now_ms
from coordinator.store.schema import vended_credentials


@dataclass(frozen=True)
class VendedRow:
    token_id: str
    location: str
    operation: str
    kind: str  # s3 | azure | gcs | local
    issued_at: int
    expires_at: int

    def to_json(self) -> dict[str, Any]:
        return {"location": self.location, "operation": self.operation, "kind": self.kind,
                "issuedAt": self.issued_at, "expiresAt": self.expires_at}


class VendedStore:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def record(self, token_id: str, location: str, operation: str, kind: str, expires_at: int) -> None:
        """Remember one vended credential. Raises UnavailableError."""
        async with self.db.tx(single=True) as conn:
            await conn.execute(vended_credentials.insert().values(
                id=str(uuid.uuid4()), token_id=token_id, location=location, operation=operation, kind=kind,
                issued_at=now_ms(), expires_at=expires_at))

    async def valid_for_token(self, token_id: str, at_ms: int | None = None) -> list[VendedRow]:
        """The credentials vended to ``token_id`` that still work at ``at_ms`` (now), soonest expiry first."""
        at = now_ms() if at_ms is None else at_ms
        c = vended_credentials.c
        stmt = (select(c.token_id, c.location, c.operation, c.kind, c.issued_at, c.expires_at)
                .where(and_(c.token_id == token_id, c.expires_at > at)).order_by(c.expires_at))
        async with self.db.tx(write=False, single=True) as conn:
            return [VendedRow(**r._mapping) for r in (await conn.execute(stmt)).all()]
