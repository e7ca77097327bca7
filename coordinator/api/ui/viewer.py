"""Who is looking at a UI page: the viewer of a request (its principal, None when authentication is off) and
which tables it may see, by the same ``covers`` rule as the API. How a browser signs in is ``session.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web

from client.contract.errors import PermissionDeniedError
from coordinator.api.keys import PRINCIPAL
from coordinator.security.tokens import ANY, Principal, covers


@dataclass(frozen=True)
class Viewer:
    principal: Principal | None  # None: authentication is off

    @property
    def everything(self) -> bool:
        return self.principal is None or self.principal.may_watch()

    @property
    def scope(self) -> Sequence[str] | None:
        """The location prefixes whose tables this viewer may see (None: every table)."""
        if self.everything or self.principal is None:
            return None
        prefixes = tuple(sorted({p for p, _ in self.principal.scopes}))  # every scope's action includes read
        return None if ANY in prefixes else prefixes

    def may_see(self, location: str) -> bool:
        scope = self.scope
        return scope is None or any(covers(p, location) for p in scope)

    def check(self, location: str) -> None:
        """Raises PermissionDeniedError unless this viewer may see the table at ``location``."""
        if not self.may_see(location):
            assert self.principal is not None
            raise PermissionDeniedError(f"token {self.principal.token_id} has no scope covering this table")

    @property
    def label(self) -> str:
        if self.principal is None:
            return "authentication off"
        what = "everything" if self.everything else ", ".join(self.scope or ())
        return f"token {self.principal.token_id} ({what})"


def viewer(request: web.Request) -> Viewer:
    return Viewer(request.get(PRINCIPAL))


__all__ = ["Viewer", "viewer"]
