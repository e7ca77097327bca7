"""Fixtures of the security tests: services with bearer tokens on, tokens made with the real CLI, and
before/after pictures of the database and storage to assert that refused requests change nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import make_backend
from tests.support import ROOT, Backend, Service


def cli(backend: Backend, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "COMMIT_OWNER_DATABASE_URL": backend.database_url}
    res = subprocess.run([sys.executable, "-m", "coordinator", *args], cwd=str(ROOT), env=env,
                         capture_output=True, text=True, timeout=60)
    if check:
        assert res.returncode == 0, res.stderr
    return res


def make_token(backend: Backend, *scopes: str) -> dict[str, Any]:
    """A token made by `commit-owner tokens create --json`: {"id", "token", "scopes", ...}."""
    args = ["tokens", "create", "--json"]
    for s in scopes:
        args += ["--scope", s]
    return json.loads(cli(backend, *args).stdout)


def store_token(backend: Backend, *scopes: str) -> str:
    """A token written through the token store itself (no CLI start-up: for fixtures that need many)."""
    import asyncio

    from coordinator.security.tokens import new_token, parse_scope
    from coordinator.store import create_engine
    from coordinator.store.tokens import TokenStore

    token_id, secret_hash, token = new_token()

    async def go() -> None:
        engine = create_engine(backend.database_url)
        try:
            await TokenStore(engine).create(token_id, secret_hash, [parse_scope(s) for s in scopes])
        finally:
            await engine.dispose()

    asyncio.run(go())
    return token


def call(endpoint: str, method: str, path: str, body: bytes | None = None, token: str | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    hdrs = dict(headers or {})
    if token is not None:
        hdrs["Authorization"] = f"Bearer {token}"
    if body is not None and "Content-Type" not in hdrs:
        hdrs["Content-Type"] = "application/json"
    req = urllib.request.Request(endpoint + path, data=body, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw, status, rh = r.read(), r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        raw, status, rh = e.read(), e.code, dict(e.headers)
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = raw
    return status, payload, rh


_ENGINES: dict[str, Any] = {}


def db_state(database_url: str, tables: tuple[str, ...] = ("owned_tables", "commits", "tokens")) -> dict[str, list[tuple]]:
    """Every row of the ownership store's ``tables``, less the backfill lease's columns (``compared``)."""
    from sqlalchemy import create_engine, select

    from coordinator.store.engine import sync_url
    from coordinator.store.schema import metadata

    engine = _ENGINES.get(database_url)
    if engine is None:
        engine = _ENGINES[database_url] = create_engine(sync_url(database_url))
    with engine.connect() as conn:
        return {t: sorted((tuple(r) for r in conn.execute(select(*compared(metadata.tables[t])))), key=repr)
                for t in tables}


def compared(table: Any) -> list[Any]:
    """The columns of ``table`` that a before/after picture compares: all but the backfill lease's. The
    background backfiller takes a table's lease after a commit and hands it back once the table has been idle
    a second or two, whenever its sweep comes round, so those two may change while a refused request is in
    flight. A refusal never takes a lease; what a lease guards (published files, their marks) is compared."""
    from coordinator.store.schema import owned_tables

    lease = (owned_tables.c.lease_owner, owned_tables.c.lease_expires_at)
    return [c for c in table.c if not any(c is x for x in lease)]


class State:
    """Database rows plus every file under some storage prefixes, to compare before and after."""

    def __init__(self, backend: Backend, *prefixes: str) -> None:
        self.backend, self.prefixes = backend, prefixes
        self._fs: Any = None

    def take(self) -> tuple[Any, ...]:
        return (db_state(self.backend.database_url), *(self._files(p) for p in self.prefixes))

    def _files(self, prefix: str) -> dict[str, bytes]:
        if not prefix.startswith("file://"):
            if self._fs is None:
                self._fs = self.backend.fs()  # one S3 filesystem per picture-taker; listings never cached
            base = prefix[len("s3://"):]
            self._fs.invalidate_cache()
            return {p: self._fs.cat_file(p) for p in self._fs.find(base)}
        # Local disk: walk without following symlinks (the tests plant some that point out of a root).
        base, out = prefix[len("file://"):], {}
        for d, dirs, files in os.walk(base):
            for name in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
                p = os.path.join(d, name)
                if os.path.islink(p):
                    out[p] = ("link:" + os.readlink(p)).encode()
                elif not name.startswith(".tmp-") and not name.endswith((".db", ".db-wal", ".db-shm", ".log")) \
                        and os.path.isfile(p):  # (not a service's backfill socket in the test's TMPDIR)
                    with open(p, "rb") as f:
                        out[p] = f.read()
        return out


@pytest.fixture(scope="module")
def local_auth(request: pytest.FixtureRequest) -> Iterator[Service]:
    """Tokens on, SQLite + local disk, backfill after every commit; tables go under <tmp>/wh."""
    b = make_backend(request, "sqlite", "local", "sec-auth")
    (b.tmp / "wh").mkdir()
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens",
                                "COMMIT_OWNER_ALLOW_LOCATION": f"file://{b.tmp}/wh"}).start()
    yield svc
    svc.stop()


@pytest.fixture(scope="session", autouse=True)
def _dispose_engines() -> Iterator[None]:
    yield
    for engine in _ENGINES.values():
        engine.dispose()
    _ENGINES.clear()
