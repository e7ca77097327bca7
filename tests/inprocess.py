"""The service in the test's own process: the real app (``create_app``) served by aiohttp's ``TestServer``.

Same database, same storage, same handlers as `commit-owner serve`, without a process start: the app is built
from the backend's settings (a real SQLite file or PostgreSQL database, a real local folder or the moto S3
server), and the tests also reach its service, store, storage and backfiller through the app keys. Requests
go over real HTTP on 127.0.0.1 with aiohttp's client (the stdlib ``CommitOwnerClient`` blocks: run it with
``asyncio.to_thread``). Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from backfill.worker import Backfiller
from client import CommitOwnerClient
from coordinator.api.app import create_app
from coordinator.api.keys import BACKFILLER, SERVICE, SETTINGS, STORAGE, STORE
from coordinator.core.service import CommitService
from coordinator.runtime.settings import Settings
from coordinator.storage import StorageRouter
from coordinator.store import OwnershipStore
from harness.storage_faults import STORAGE_FAULTS, faults_from
from tests.support import Backend, actions, delta_file, ndjson, version0

API = "/api/v1"


def backend_settings(backend: Backend, env: dict[str, str] | None = None) -> Settings:
    """The settings `commit-owner serve` would load from ``backend.env()`` plus ``env`` (nothing else of os.environ)."""
    return Settings.load(environ={**backend.env(), "COMMIT_OWNER_LOG_FORMAT": "json", **(env or {})})


@dataclass
class InProcess:
    """A running app on ``backend`` and an aiohttp session to talk to it."""

    backend: Backend
    app: web.Application
    server: TestServer
    session: aiohttp.ClientSession

    @classmethod
    async def start(cls, backend: Backend, env: dict[str, str] | None = None) -> InProcess:
        env = dict(env or {})
        faults = faults_from({STORAGE_FAULTS: env.pop(STORAGE_FAULTS, "")})  # harness/storage_faults.py
        app = create_app(backend_settings(backend, env), storage_inner=faults)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return cls(backend, app, server, session)

    async def stop(self) -> None:
        await self.session.close()
        await self.server.close()

    # -- the app's parts, for tests that drive them directly --

    @property
    def settings(self) -> Settings:
        return self.app[SETTINGS]

    @property
    def service(self) -> CommitService:
        return self.app[SERVICE]

    @property
    def store(self) -> OwnershipStore:
        return self.app[STORE]

    @property
    def storage(self) -> StorageRouter:
        return self.app[STORAGE]

    @property
    def backfiller(self) -> Backfiller:
        return self.app[BACKFILLER]

    @property
    def port(self) -> int:
        assert self.server.port is not None
        return self.server.port

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, **kw: Any) -> CommitOwnerClient:
        """The blocking client: call it through ``asyncio.to_thread`` (the server runs on this loop)."""
        kw.setdefault("deadline", 30.0)
        return CommitOwnerClient(self.endpoint, **kw)

    # -- HTTP --

    async def call(self, method: str, path: str, body: bytes | None = None,
                   headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """One request; returns (status, JSON payload or raw bytes)."""
        async with self.session.request(method, self.endpoint + path, data=body, headers=headers) as r:
            raw = await r.read()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw

    async def post_json(self, path: str, payload: Any) -> tuple[int, Any]:
        return await self.call("POST", path, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    async def register(self, location: str, current_version: int = -1) -> tuple[int, Any]:
        return await self.post_json(f"{API}/tables", {"location": location, "currentVersion": current_version})

    async def commit(self, table_id: str, version: int, body: bytes, key: str | None = None,
                     slot: str | None = None) -> tuple[int, Any]:
        headers = {"Content-Type": "application/x-ndjson"}
        if key:
            headers["Idempotency-Key"] = key
        if slot:
            headers["Commit-Slot"] = slot
        return await self.call("POST", f"{API}/tables/{table_id}/commits?version={version}", body, headers)

    async def commit_ok(self, table_id: str, version: int, acts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        status, reply = await self.commit(table_id, version, ndjson(acts if acts is not None else actions()))
        assert status == 200, reply
        return reply

    async def get_commits(self, table_id: str) -> dict[str, Any]:
        status, reply = await self.call("GET", f"{API}/tables/{table_id}/commits")
        assert status == 200, reply
        return reply

    async def backfill_to(self, table_id: str, version: int) -> dict[str, Any]:
        status, reply = await self.post_json(f"{API}/tables/{table_id}/backfill", {"version": version})
        assert status == 200, reply
        return reply

    async def create_table(self, location: str | None = None) -> tuple[str, str]:
        """Register a new table and write its version 0 the way a client does. Returns (table_id, location)."""
        loc = location or self.backend.new_location()
        status, info = await self.register(loc)
        assert status == 201, info
        await asyncio.to_thread(self.backend.write, delta_file(loc, 0), ndjson(version0()))
        return info["tableId"], loc
