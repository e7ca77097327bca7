"""Sail as an outside judge: the owner services it talks to, a ``sail spark server``, and the PySpark job runner.

Sail (``pysail``) and ``pyspark-client`` live in ``.venv-sail`` (``make install-sail``): the tests here run in the
service's ``.venv`` and hand each PySpark plan to ``tests/unity/sail_client.py`` run by ``.venv-sail/bin/python``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from client.contract.layout import local_path as layout_local_path
from tests.security.conftest import call
from tests.support import ROOT, Backend, Service, free_port

UC = "/api/2.1/unity-catalog"
SAIL_VENV = ROOT / os.environ.get("SAIL_VENV", ".venv-sail")
SAIL_CLIENT = Path(__file__).with_name("sail_client.py")


def require_sail() -> Path:
    """``.venv-sail/bin/sail``, or a loud skip with the reason the install gave."""
    failed = SAIL_VENV / "INSTALL_FAILED"
    reason = None
    if failed.exists():
        reason = f"`make install-sail` could not install Sail: {failed.read_text(errors='replace')[-1500:]}"
    elif not (SAIL_VENV / "bin" / "sail").exists():
        reason = f"{SAIL_VENV}/bin/sail is missing: run `make install-sail` (make test does)"
    if reason is not None:
        print(f"\n!!! SAIL TESTS SKIPPED: {reason} !!!\n", file=sys.stderr)
        pytest.skip(f"SAIL TESTS SKIPPED: {reason}")
    return SAIL_VENV / "bin" / "sail"


@dataclass
class Owner:
    """A `commit-owner serve` with bearer tokens on, one Unity catalog, and an admin token for the tests and Sail."""

    service: Service
    token: str
    catalog: str

    @property
    def backend(self) -> Backend:
        return self.service.backend

    @property
    def uc_uri(self) -> str:
        return self.service.endpoint + UC

    def uc(self, method: str, path: str, body: Any = None) -> Any:
        raw = None if body is None else json.dumps(body).encode()
        status, payload, _ = call(self.service.endpoint, method, UC + path, raw, token=self.token)
        assert status == 200, (method, path, status, payload)
        return payload

    def table(self, schema: str, name: str) -> dict[str, Any]:
        return self.uc("GET", f"/tables/{self.catalog}.{schema}.{name}")

    def db(self, sql: str, **params: Any) -> list[tuple]:
        from sqlalchemy import create_engine, text

        from coordinator.store.engine import sync_url

        engine = create_engine(sync_url(self.backend.database_url))
        try:
            with engine.connect() as conn:
                return [tuple(r) for r in conn.execute(text(sql), params)]
        finally:
            engine.dispose()

    def ratified(self, table_id: str) -> dict[int, tuple[str, int, str]]:
        """version -> (file_name, file_size, content_sha256), straight from the commits table."""
        rows = self.db("SELECT version, file_name, file_size, content_sha256 FROM commits WHERE table_id = :t",
                       t=table_id)
        out: dict[int, tuple[str, int, str]] = {}
        for v, name, size, digest in rows:
            assert int(v) not in out, f"version {v} of {table_id} has two commit rows"
            out[int(v)] = (str(name), int(size), str(digest))
        return out


def start_owner(backend: Backend, catalog: str, **env: str) -> Owner:
    from tests.security.conftest import store_token

    token = store_token(backend, "*:admin")
    svc = Service(backend, extra_env={"COMMIT_OWNER_AUTH": "tokens", **env}).start()
    owner = Owner(svc, token, catalog)
    owner.uc("POST", "/catalogs", {"name": catalog})
    return owner


def demo_owner(request: Any, db: str, label: str) -> Iterator[Owner]:
    """An owner (tokens on, ``db`` + local disk) with catalog ``main`` and schema ``main.demo``, stopped
    afterwards: the outside engines' tests' fixture body (``yield from demo_owner(...)``)."""
    from tests.conftest import make_backend

    o = start_owner(make_backend(request, db, "local", label), "main")
    o.uc("POST", "/schemas", {"catalog_name": "main", "name": "demo"})
    yield o
    o.service.stop()


class SailServer:
    """``sail spark server`` on a free loopback port, its catalogs pointing at the owners' Unity Catalog API."""

    def __init__(self, sail: Path, workdir: Path, catalogs: dict[str, Owner]) -> None:
        self.sail, self.workdir, self.catalogs = sail, workdir, catalogs
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = workdir / "sail.log"

    @property
    def remote(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def catalog_list(self) -> str:
        entries = [
            f'{{type="unity", name="{name}", uri="{o.uc_uri}", default_catalog="{o.catalog}", token="{o.token}"}}'
            for name, o in self.catalogs.items()
        ]
        return "[" + ", ".join(entries) + "]"

    def start(self) -> SailServer:
        # With more than one catalog Sail needs to be told which is the default, else every session fails.
        env = {**os.environ, "SAIL_CATALOG__LIST": self.catalog_list(), "UNITY_ALLOW_HTTP_URL": "true",
               "SAIL_CATALOG__DEFAULT_CATALOG": next(iter(self.catalogs)), "SPARK_LOCAL_IP": "127.0.0.1"}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([str(self.sail), "spark", "server", "--ip", "127.0.0.1",
                                          "--port", str(self.port)],
                                         cwd=str(self.workdir), env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sail exited with {self.proc.returncode}: {self.log_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"sail did not listen within 120 s: {self.log_text()[-2000:]}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def run(self, plan: list[dict[str, Any]], timeout: float = 600) -> list[dict[str, Any]]:
        """Run a plan (see sail_client.py) from PySpark over Spark Connect; the steps' results in order."""
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
        proc = subprocess.run([str(SAIL_VENV / "bin" / "python"), str(SAIL_CLIENT), self.remote],
                              input=json.dumps(plan), capture_output=True, text=True, timeout=timeout, env=env)
        assert proc.returncode == 0, f"the PySpark job failed: {proc.stderr[-3000:]}\nsail: {self.log_text()[-2000:]}"
        return json.loads(proc.stdout)

    def sql(self, *statements: str) -> list[list[list[Any]]]:
        """Run statements in order; their rows. Fails the test on the first error."""
        out = []
        for step in self.run([{"sql": s} for s in statements]):
            assert "error" not in step, f"{step['error']}\nsail: {self.log_text()[-2000:]}"
            out.append(step["rows"])
        return out


def local_path(uri: str) -> Path:
    """The folder of a local (``file://``) location."""
    return Path(layout_local_path(uri))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
