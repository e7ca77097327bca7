"""The benchmark's world: a fresh database, log storage and `commit-owner serve` as a subprocess."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

S3_KEY = S3_SECRET = "bench"

#: The service settings of the bench's "tuned" runs (besides the batch size, which is the bench's option).
TUNED = {
    "COMMIT_OWNER_LOG_LEVEL": "WARNING",
    "COMMIT_OWNER_LOG_FORMAT": "text",
    "COMMIT_OWNER_JANITOR_INTERVAL_SECONDS": "0",
    "COMMIT_OWNER_DB_POOL_SIZE": "20",
    "COMMIT_OWNER_GROUP_COMMIT_MAX_ROWS": "64",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            cmd = proc.args[0] if isinstance(proc.args, list) else proc.args
            raise RuntimeError(f"{cmd!s} exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s")


def _cli() -> list[str]:
    return [sys.executable, "-m", "coordinator"]


@dataclass
class BenchEnv:
    """One database (sqlite | postgres) and one log storage (local | s3), with the owner serving on them."""

    database: str = "postgres"
    storage: str = "local"
    pg_url: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    backfill_batch_size: int = 1
    keep_workdir: bool = False
    workers: int = 0  # serve --workers; 0 = its default (the number of CPUs)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="commit-owner-bench-")))
    database_url: str = ""
    endpoint: str = ""
    s3_endpoint: str = ""
    bucket: str = ""
    service_pid: int = 0
    settings: str = "tuned"  # the service's settings: "tuned" (see _start_service) or "default"
    _procs: list[subprocess.Popen] = field(default_factory=list)
    _service: subprocess.Popen | None = None
    _pg_db: str = ""

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> BenchEnv:
        from coordinator.store import migrate

        if self.database == "sqlite":
            self.database_url = f"sqlite+aiosqlite:///{self.workdir}/owner.db"
        elif self.database == "postgres":
            self._pg_db = f"commit_owner_bench_{uuid.uuid4().hex[:10]}"
            self._pg_admin(f'CREATE DATABASE "{self._pg_db}"')
            self.database_url = self._pg_url(self._pg_db)
        else:
            raise ValueError(f"database must be sqlite or postgres, not {self.database!r}")
        migrate(self.database_url)
        if self.storage == "s3":
            self._start_moto()
        elif self.storage != "local":
            raise ValueError(f"storage must be local or s3, not {self.storage!r}")
        (self.workdir / "warehouse").mkdir(exist_ok=True)
        self._start_service()
        return self

    def stop(self) -> None:
        for p in reversed(self._procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self._procs.clear()
        if self._pg_db:
            self._pg_admin(f'DROP DATABASE IF EXISTS "{self._pg_db}" WITH (FORCE)')
            self._pg_db = ""
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> BenchEnv:
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.stop()

    # -- places -------------------------------------------------------------------------------------

    def location(self, name: str) -> str:
        if self.storage == "s3":
            return f"s3://{self.bucket}/warehouse/{name}"
        return "file://" + str(self.workdir / "warehouse" / name)

    def storage_options(self) -> dict[str, str]:
        """delta-rs options for the same storage (S3 with conditional PUT, as the owner uses)."""
        if self.storage != "s3":
            return {}
        return {"AWS_ENDPOINT_URL": self.s3_endpoint, "AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET,
                "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "conditional_put": "etag"}

    def s3fs(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(key=S3_KEY, secret=S3_SECRET, endpoint_url=self.s3_endpoint,
                                 skip_instance_cache=True, use_listings_cache=False)

    def sync_db(self) -> Any:
        """A plain DB-API connection to the owner's database (floor, growth, checks)."""
        if self.database == "sqlite":
            import sqlite3

            # check_same_thread off: scenario 0b opens a connection per table here and uses it in that table's thread
            conn = sqlite3.connect(str(self.workdir / "owner.db"), timeout=30, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA synchronous=FULL")
            return conn
        import psycopg

        return psycopg.connect(self._pg_dsn(self._pg_db), autocommit=True)

    # -- internals ----------------------------------------------------------------------------------

    def _pg_dsn(self, db: str) -> str:
        from sqlalchemy.engine import make_url

        u = make_url(self.pg_url)
        auth = u.username or "postgres"
        if u.password:
            auth += f":{u.password}"
        return f"postgresql://{auth}@{u.host or '127.0.0.1'}:{u.port or 5432}/{db}"

    def _pg_url(self, db: str) -> str:
        return self._pg_dsn(db).replace("postgresql://", "postgresql+psycopg://", 1)

    def _pg_admin(self, sql: str) -> None:
        import psycopg
        from sqlalchemy.engine import make_url

        with psycopg.connect(self._pg_dsn(make_url(self.pg_url).database or "postgres"), autocommit=True) as c:
            c.execute(sql)

    def _spawn(self, cmd: list[str], env: dict[str, str], log_name: str) -> subprocess.Popen:
        log = open(self.workdir / log_name, "ab")  # noqa: SIM115 (kept open for the child's lifetime)
        p = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
        self._procs.append(p)
        return p

    def _start_moto(self) -> None:
        port = free_port()
        self.s3_endpoint = f"http://127.0.0.1:{port}"
        exe = Path(sys.executable).with_name("moto_server")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "moto.server"]
        p = self._spawn([*cmd, "-H", "127.0.0.1", "-p", str(port)], {}, "moto.log")
        wait_http(self.s3_endpoint + "/moto-api/", p)
        self.bucket = "bench"
        self.s3fs().mkdir(self.bucket)

    def restart_service(self, settings: str) -> None:
        """Stop the service and start it again, on the same database and storage, with ``settings``
        ("tuned" or "default"): the default-settings figures of the same world."""
        if settings not in ("tuned", "default"):
            raise ValueError(f"settings must be tuned or default, not {settings!r}")
        p = self._service
        if p is not None and p.poll() is None:
            p.terminate()
            p.wait(30)
        self.settings = settings
        self._start_service()

    @property
    def service_workers(self) -> int:
        """The service's worker processes, as `serve` resolves ``--workers``."""
        from coordinator.runtime.settings import worker_count

        return worker_count(self.workers)

    def _start_service(self) -> None:
        port = free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        roots = [self.location("")]
        env = {
            "COMMIT_OWNER_DATABASE_URL": self.database_url,
            "COMMIT_OWNER_HOST": "127.0.0.1",
            "COMMIT_OWNER_PORT": str(port),
            "COMMIT_OWNER_ALLOW_LOCATION": ",".join(roots),
            "COMMIT_OWNER_MANAGED_LOCATION": self.location("managed"),  # catalog-managed tables (scenario 8)
            "COMMIT_OWNER_WORKERS": str(self.service_workers),
        }
        if self.settings == "tuned":
            env.update({**TUNED, "COMMIT_OWNER_BACKFILL_BATCH_SIZE": str(self.backfill_batch_size)})
        if self.storage == "s3":
            env.update({"COMMIT_OWNER_S3_ENDPOINT_URL": self.s3_endpoint,
                        "COMMIT_OWNER_S3_ACCESS_KEY_ID": S3_KEY, "COMMIT_OWNER_S3_SECRET_ACCESS_KEY": S3_SECRET})
        p = self._spawn([*_cli(), "serve"], env, "service.log")
        self._service, self.service_pid = p, p.pid
        wait_http(self.endpoint + "/readyz", p)
