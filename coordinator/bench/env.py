"""The benchmark's world: a fresh database, log storage and `commit-owner serve` as a subprocess.

Log storage is a local folder, S3 on a moto server, or Azure Blob / Google Cloud Storage on their emulators
(azurite, fake-gcs-server). The emulators are started, and their settings, client options and delta-rs options
given, by the reliability harness (``harness/emulators.py``, ``harness/world.py``: one home for each; decision
73), imported only for those two choices: the harness is not in the wheel, so they need the repository.
"""

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


#: The log storages served by an emulator the bench starts (beside moto's S3): figures of the emulator, not the cloud.
EMULATED = ("azure", "gcs")


def storage_label(storage: str) -> str:
    """How a report names its log storage: an emulator's figures are the emulator's, not the cloud's."""
    return {"s3": "S3 (moto)", "azure": "Azure Blob on azurite (emulator)",
            "gcs": "GCS on fake-gcs-server (emulator)"}.get(storage, storage)


def _cli() -> list[str]:
    return [sys.executable, "-m", "coordinator"]


@dataclass
class BenchEnv:
    """One database (sqlite | postgres) and one log storage (local | s3 | azure | gcs), with the owner serving on
    them."""

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
    cloud: Any = None  # azure | gcs: the harness's Backend (harness/world.py) for the emulator's container or bucket
    _emulator: Any = None

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> BenchEnv:
        try:
            return self._start()
        except BaseException:
            self.stop()  # the database, the emulator or moto started before the failure
            raise

    def _start(self) -> BenchEnv:
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
        elif self.storage in EMULATED:
            self._start_emulator()
        elif self.storage != "local":
            raise ValueError(f"storage must be local, s3, azure or gcs, not {self.storage!r}")
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
        if self._emulator is not None:
            self._emulator.stop()
            self._emulator = None
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
        if self.cloud is not None:
            return f"{self.cloud.cloud_root}/warehouse/{name}"
        return "file://" + str(self.workdir / "warehouse" / name)

    def storage_options(self) -> dict[str, str]:
        """delta-rs options for the same storage (S3 with conditional PUT, as the owner uses)."""
        if self.cloud is not None:
            from harness.world import delta_rs_target

            return delta_rs_target(self.cloud, self.location(""))[1] or {}
        if self.storage != "s3":
            return {}
        return {"AWS_ENDPOINT_URL": self.s3_endpoint, "AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET,
                "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "conditional_put": "etag"}

    def fs_options(self) -> dict[str, Any] | None:
        """The client's (fsspec) options for the same storage: what ``create_table`` and ``write_table`` take."""
        if self.cloud is not None:
            return dict(self.cloud.storage_options())
        if self.storage == "s3":
            return {"key": S3_KEY, "secret": S3_SECRET, "endpoint_url": self.s3_endpoint}
        return None

    def maintenance_env(self) -> dict[str, str]:
        """The environment of a maintenance command run as its own process (`commit-owner maintain`, scenario 7;
        the compaction pass, scenario 12) against this world's database and storage, with the service's allowed
        root (a compaction commits through the commit path, which checks it)."""
        e = {**os.environ, "COMMIT_OWNER_DATABASE_URL": self.database_url, "COMMIT_OWNER_LOG_LEVEL": "WARNING",
             "COMMIT_OWNER_ALLOW_LOCATION": self.location("")}
        if self.storage == "s3":
            e.update({"COMMIT_OWNER_S3_ENDPOINT_URL": self.s3_endpoint, "COMMIT_OWNER_S3_ACCESS_KEY_ID": S3_KEY,
                      "COMMIT_OWNER_S3_SECRET_ACCESS_KEY": S3_SECRET})
        return e

    def cloud_fs(self) -> Any:
        """A fresh fsspec filesystem on the emulator (azure | gcs); paths on it are ``object_key`` of a URI."""
        from client.storage import cloud_filesystem

        return cloud_filesystem(self.location(""), self.fs_options())

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

    def _start_emulator(self) -> None:
        """azurite or fake-gcs-server in the workdir, with a container or bucket of the bench's own."""
        try:
            from harness.emulators import AzuriteServer, FakeGcsServer, missing
            from harness.world import Backend
        except ImportError:
            raise RuntimeError(f"--storage {self.storage} needs the repository's harness/ (not in the wheel): run "
                               "the bench from a checkout (scripts/bench)") from None
        why = missing(self.storage)
        if why is not None:
            raise RuntimeError(f"--storage {self.storage}: {why}")
        emulator = (AzuriteServer if self.storage == "azure" else FakeGcsServer)(self.workdir)
        emulator.start()
        self._emulator = emulator
        cloud = Backend(name="bench", database_url=self.database_url, storage=self.storage, tmp=self.workdir)
        if isinstance(emulator, AzuriteServer):
            cloud.azure_endpoint, cloud.azure_account, cloud.azure_key = emulator.endpoint, emulator.account, emulator.key
            cloud.bucket = emulator.make_container()
        else:
            cloud.gcs_endpoint, cloud.bucket = emulator.endpoint, emulator.make_bucket()
        self.cloud, self.bucket = cloud, cloud.bucket

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
        env = {
            "COMMIT_OWNER_DATABASE_URL": self.database_url,
            "COMMIT_OWNER_HOST": "127.0.0.1",
            "COMMIT_OWNER_PORT": str(port),
            "COMMIT_OWNER_ALLOW_LOCATION": self.location(""),
            "COMMIT_OWNER_MANAGED_LOCATION": self.location("managed"),  # catalog-managed tables (scenario 8)
            "COMMIT_OWNER_WORKERS": str(self.service_workers),
        }
        if self.cloud is not None:  # the emulator's account or project and endpoint (harness/world.py)
            env = {**self.cloud.env(), **env}
        if self.settings == "tuned":
            env.update({**TUNED, "COMMIT_OWNER_BACKFILL_BATCH_SIZE": str(self.backfill_batch_size)})
        if self.storage == "s3":
            env.update({"COMMIT_OWNER_S3_ENDPOINT_URL": self.s3_endpoint,
                        "COMMIT_OWNER_S3_ACCESS_KEY_ID": S3_KEY, "COMMIT_OWNER_S3_SECRET_ACCESS_KEY": S3_SECRET})
        p = self._spawn([*_cli(), "serve"], env, "service.log")
        self._service, self.service_pid = p, p.pid
        wait_http(self.endpoint + "/readyz", p)
