"""Bearer tokens: their format, their scopes and what a scope allows.

A token reads ``dco_<id>_<secret>``: ``id`` (16 hex characters) names the row in the token store,
``secret`` (256 random bits, URL-safe base64) is shown once at creation; the store keeps only its
sha256. A high-entropy secret needs no slow password hash: guessing it is 2**256 work either way.

A scope is ``{"prefix": <location prefix or "*">, "actions": [...]}``. Actions are ranked
``read < commit < admin`` and a higher one includes the lower ones (a writer that commits must also
read the table's commits; an administrator may do everything). A prefix covers a location when it is
equal to it or a parent of it on path-segment boundaries: ``s3://b/team-a`` covers ``s3://b/team-a/t``
but not ``s3://b/team-ab``.

``ops`` stands apart from that ranking: it opens what a monitoring system reads (``/metrics`` and the
status page) and the read-only browser UI over every table (``api/ui``), and no API route, so Prometheus
needs no key to the tables. It takes the prefix ``*`` only; admin over ``*`` includes it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from client.contract.errors import InvalidArgumentError
from client.contract.layout import normalize_prefix as _normalize_prefix

ACTIONS = ("read", "commit", "admin")
_RANK = {a: i for i, a in enumerate(ACTIONS)}
OPS = "ops"
_ORDER = {**_RANK, OPS: len(ACTIONS)}
ANY = "*"
PREFIX = "dco"
_TOKEN = re.compile(r"^dco_([0-9a-f]{16})_([A-Za-z0-9_-]{20,128})$")
# Compared against when the id is unknown, so a miss costs the same work as a hit.
_DUMMY_HASH = hashlib.sha256(b"no such token").hexdigest()


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str, str]:
    """A fresh token: ``(token_id, secret_hash, full_token)``. Show ``full_token`` once, store the rest."""
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return token_id, hash_secret(secret), f"{PREFIX}_{token_id}_{secret}"


def split_token(token: str) -> tuple[str, str] | None:
    """``(token_id, secret)`` of a well-formed token, else None."""
    m = _TOKEN.match(token)
    return (m.group(1), m.group(2)) if m else None


def secret_matches(secret: str, stored_hash: str | None) -> bool:
    """Constant-time comparison of the hash of ``secret`` with the stored hash (a dummy when there is none)."""
    ok = hmac.compare_digest(hash_secret(secret), stored_hash or _DUMMY_HASH)
    return ok and stored_hash is not None


def normalize_prefix(prefix: str) -> str:
    """Canonical spelling of a scope prefix: ``*``, ``s3://bucket`` or a canonical location."""
    p = prefix.strip()
    if p == ANY:
        return ANY
    return _normalize_prefix(p)


def parse_scope(text: str) -> dict[str, Any]:
    """``PREFIX:ACTION[,ACTION...]`` (the last ``:`` separates them, URIs keep theirs). Raises InvalidArgumentError."""
    prefix, sep, acts = text.rpartition(":")
    if not sep or not prefix or not acts or prefix.endswith(":/") or acts.startswith("/"):
        raise InvalidArgumentError(f"scope must look like <prefix>:<read|commit|admin>[,...], got {text!r}")
    actions = sorted({a.strip().lower() for a in acts.split(",") if a.strip()}, key=lambda a: _ORDER.get(a, -1))
    bad = [a for a in actions if a not in _ORDER]
    if bad or not actions:
        raise InvalidArgumentError(f"unknown action(s) {', '.join(bad) or '(none)'} in scope {text!r}: "
                                   f"use {', '.join(_ORDER)}")
    try:
        norm = normalize_prefix(prefix)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"bad prefix in scope {text!r}: {e.message}") from None
    if OPS in actions and norm != ANY:
        raise InvalidArgumentError(f"the ops action covers no location: write it as *:ops, not {text!r}")
    return {"prefix": norm, "actions": actions}


_SESSION_CHARS = re.compile(r"[^\w+=,.@-]")


def session_name(token_id: str) -> str:
    """The STS session name of credentials vended to ``token_id`` ("-" without tokens): the one spelling the
    vending and the revocation hint (IAM ``aws:userid`` ends with it) share."""
    return _SESSION_CHARS.sub("-", f"commit-owner-{token_id}")[:64]


def covers(prefix: str, location: str) -> bool:
    if prefix == ANY:
        return True
    return location == prefix or location.startswith(prefix + "/")


@dataclass(frozen=True)
class Principal:
    """The caller behind a verified token."""

    token_id: str
    scopes: tuple[tuple[str, int], ...]  # (prefix, highest action rank)
    ops: bool = False  # a *:ops scope

    @classmethod
    def from_scopes(cls, token_id: str, scopes: Iterable[dict[str, Any]]) -> Principal:
        out = []
        ops = False
        for s in scopes:
            actions = s.get("actions", ())
            ranks = [_RANK[a] for a in actions if a in _RANK]
            if ranks and isinstance(s.get("prefix"), str):
                out.append((s["prefix"], max(ranks)))
            ops = ops or (OPS in actions and s.get("prefix") == ANY)
        return cls(token_id, tuple(out), ops)

    def may(self, action: str, location: str | None = None) -> bool:
        """Whether a scope grants ``action`` on ``location`` (on some location when None)."""
        need = _RANK[action]
        return any(rank >= need and (location is None or covers(prefix, location)) for prefix, rank in self.scopes)

    def may_on_disk(self, action: str, real_path: str) -> bool:
        """Like :meth:`may` for a local path already resolved with realpath, comparing resolved prefixes too
        (so a symlink cannot carry a location out of the prefix, and a symlinked prefix still matches)."""
        import os

        need = _RANK[action]
        for prefix, rank in self.scopes:
            if rank < need:
                continue
            if prefix == ANY:
                return True
            if prefix.startswith("file://"):
                base = os.path.realpath(prefix[len("file://"):]).rstrip("/")
                if real_path == base or real_path.startswith(base + "/"):
                    return True
        return False

    def may_everywhere(self, action: str) -> bool:
        need = _RANK[action]
        return any(rank >= need and prefix == ANY for prefix, rank in self.scopes)

    def may_watch(self) -> bool:
        """Whether it may read what monitoring reads (``/metrics``, the status page): ops or admin over ``*``."""
        return self.ops or self.may_everywhere("admin")


_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',]+|dco_[0-9a-f]{16}_[A-Za-z0-9_-]+")


class RedactTokens(logging.Filter):
    """Replace anything that looks like a bearer token in a log record's message with ``***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if "dco_" in msg or "earer" in msg:
            msg = _BEARER.sub(lambda m: (m.group(1) or "") + "***", msg)
        record.msg, record.args = msg, None  # formatted once: the formatter's getMessage() has nothing left to do
        return True
