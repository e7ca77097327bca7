"""The world a reliability run (and the test suite) starts: real services as subprocesses, a moto S3 server,
backends, and helpers to look at real storage and write real tables.

Nothing here mocks the database, the object store or the service: PostgreSQL is a real server (a fresh
database per run), S3 is a moto server on 127.0.0.1, and the owner is `commit-owner serve`.
Imported by tests/ (through tests/support.py and tests/conftest.py) and by scripts/chaos.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from client import CommitOwnerClient
from client.contract.layout import delta_file, object_key
from harness.storage_faults import STORAGE_FAULTS

ROOT = Path(__file__).resolve().parent.parent
S3_KEY, S3_SECRET = "testing", "testing"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def wait_http(url: str, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status < 500:
                    return
        except Exception:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


@dataclass
class Backend:
    """One combination of ownership store and log storage."""

    name: str
    database_url: str
    storage: str  # "local" | "s3" | "azure" | "gcs"
    s3_endpoint: str = ""
    bucket: str = ""  # the S3 or GCS bucket, or the Azure container
    tmp: Path | None = None
    azure_endpoint: str = ""  # azurite's Blob endpoint (harness/emulators.py)
    azure_account: str = ""
    azure_key: str = ""
    gcs_endpoint: str = ""  # fake-gcs-server
    _s3fs: Any = field(default=None, repr=False, compare=False)

    @property
    def cloud_root(self) -> str:
        """The canonical URI of the bucket or container (empty on local disk)."""
        if self.storage == "s3":
            return f"s3://{self.bucket}"
        if self.storage == "azure":
            return f"abfss://{self.bucket}@{self.azure_account}.dfs.core.windows.net"
        if self.storage == "gcs":
            return f"gs://{self.bucket}"
        return ""

    def new_location(self, name: str | None = None) -> str:
        name = name or f"t-{uuid.uuid4().hex[:12]}"
        if self.cloud_root:
            return f"{self.cloud_root}/{self.name}/{name}"
        assert self.tmp is not None
        return "file://" + str(self.tmp / name)

    def allowed_roots(self) -> str:
        """--allow-location covering every place tests put tables: the pytest temp root and the bucket."""
        roots = ["file://" + str(self.tmp.parent)] if self.tmp is not None else []
        if self.cloud_root:
            roots.append(self.cloud_root + "/")
        return ",".join(roots)

    def managed_location(self) -> str:
        """Where the Unity Catalog facade puts managed tables: inside the bucket or the backend's temp folder."""
        if self.cloud_root:
            return f"{self.cloud_root}/{self.name}/managed"
        return "file://" + str(self.tmp / "managed") if self.tmp is not None else "./warehouse/managed"

    def env(self) -> dict[str, str]:
        e = {"COMMIT_OWNER_DATABASE_URL": self.database_url, "COMMIT_OWNER_ALLOW_LOCATION": self.allowed_roots(),
             "COMMIT_OWNER_MANAGED_LOCATION": self.managed_location()}
        if self.s3_endpoint:
            e.update({
                "COMMIT_OWNER_S3_ENDPOINT_URL": self.s3_endpoint,
                "COMMIT_OWNER_S3_ACCESS_KEY_ID": S3_KEY,
                "COMMIT_OWNER_S3_SECRET_ACCESS_KEY": S3_SECRET,
            })
        if self.azure_endpoint:
            e.update({"COMMIT_OWNER_AZURE_ACCOUNT_NAME": self.azure_account,
                      "COMMIT_OWNER_AZURE_ACCOUNT_KEY": self.azure_key,
                      "COMMIT_OWNER_AZURE_ENDPOINT": self.azure_endpoint})
        if self.gcs_endpoint:
            e.update({"COMMIT_OWNER_GCS_ENDPOINT": self.gcs_endpoint, "COMMIT_OWNER_GCS_PROJECT": "test"})
        return e

    def storage_options(self) -> dict[str, Any] | None:
        """What the client library (``client.storage``: fsspec) needs to reach this backend's tables."""
        if self.storage == "azure":
            return {"account_name": self.azure_account, "account_key": self.azure_key,
                    "connection_string": self.azure_connection_string}
        if self.storage == "gcs":
            return {"endpoint_url": self.gcs_endpoint, "token": "anon", "project": "test"}
        if self.storage != "s3":
            return None
        return {"key": S3_KEY, "secret": S3_SECRET,
                "client_kwargs": {"endpoint_url": self.s3_endpoint, "region_name": "us-east-1"}}

    @property
    def azure_connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={self.azure_account};AccountKey={self.azure_key};"
                f"BlobEndpoint={self.azure_endpoint};")

    # -- looking at storage from the test side (sync, through fsspec) --

    def fs(self) -> Any:
        if self.storage == "s3":
            if self._s3fs is None:  # one client per backend (making one costs a session); listings never cached
                import s3fs

                self._s3fs = s3fs.S3FileSystem(key=S3_KEY, secret=S3_SECRET, endpoint_url=self.s3_endpoint,
                                               skip_instance_cache=True, use_listings_cache=False)
            return self._s3fs
        if self.storage in ("azure", "gcs"):
            if self._s3fs is None:
                from client.storage import cloud_filesystem

                self._s3fs = cloud_filesystem(self.cloud_root, self.storage_options())
            return self._s3fs
        import fsspec

        return fsspec.filesystem("file")

    @staticmethod
    def _p(uri: str) -> str:
        return uri[len("file://"):] if uri.startswith("file://") else object_key(uri)

    def read(self, uri: str) -> bytes:
        return self.fs().cat_file(self._p(uri))

    def exists(self, uri: str) -> bool:
        return self.fs().exists(self._p(uri))

    def write(self, uri: str, data: bytes) -> None:
        fs = self.fs()
        if self.storage == "local":
            os.makedirs(os.path.dirname(self._p(uri)), exist_ok=True)
        fs.pipe_file(self._p(uri), data)

    def remove(self, uri: str) -> None:
        self.fs().rm_file(self._p(uri))

    def list(self, dir_uri: str) -> list[str]:
        fs = self.fs()
        fs.invalidate_cache(self._p(dir_uri))  # adlfs ignores ``refresh`` and answers from its listings cache
        try:
            return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(self._p(dir_uri), detail=False, refresh=True)
                          if not fs.isdir(p))
        except FileNotFoundError:
            return []

    def snapshot(self, location: str) -> dict[str, bytes]:
        """Every file under ``location`` with its bytes (to assert that refusals change nothing)."""
        fs = self.fs()
        base = self._p(location)
        try:  # regular files only: a service's backfill socket may live in a test's folder (decision 66)
            paths = [p for p, info in fs.find(base, detail=True).items() if info.get("type") == "file"]
        except FileNotFoundError:
            return {}
        out: dict[str, bytes] = {}
        for p in paths:
            if p.rsplit("/", 1)[-1].startswith(".tmp-"):
                # The local store's put-if-absent staging file of a backfill running right now: transient,
                # never listed to readers, and not part of what a refusal may or may not change.
                continue
            try:
                out[p[len(base):]] = fs.cat_file(p)
            except FileNotFoundError:
                continue  # removed between the listing and the read (a staging file by another name)
        return out


class MotoServer:
    """A moto S3 server subprocess on 127.0.0.1 (one per test session or chaos run)."""

    def __init__(self, tmp: Path, env: dict[str, str] | None = None) -> None:
        self.env = env
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "moto.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        exe = Path(sys.executable).with_name("moto_server")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "moto.server"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([*cmd, "-H", "127.0.0.1", "-p", str(self.port)],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         env=None if self.env is None else {**os.environ, **self.env})
        wait_http(self.endpoint + "/moto-api/", proc=self.proc)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def make_bucket(self) -> str:
        import boto3

        name = f"b-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=S3_KEY, aws_secret_access_key=S3_SECRET,
                     region_name="us-east-1").create_bucket(Bucket=name)
        return name


@dataclass
class Service:
    """A `commit-owner serve` subprocess (``workers`` service processes behind a supervisor when 2 or more;
    1 by default, where several add nothing but start-up time)."""

    backend: Backend
    extra_env: dict[str, str] = field(default_factory=dict)
    workers: int = 1
    port: int = 0
    proc: subprocess.Popen | None = None
    log_path: Path | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, **kw: Any) -> CommitOwnerClient:
        kw.setdefault("deadline", 30.0)
        return CommitOwnerClient(self.endpoint, **kw)

    def start(self) -> Service:
        if not self.port:
            self.port = free_port()
        env = dict(os.environ)
        env.update(self.backend.env())
        env.update({"COMMIT_OWNER_PORT": str(self.port), "COMMIT_OWNER_HOST": "127.0.0.1",
                    "COMMIT_OWNER_LOG_FORMAT": "json", "COMMIT_OWNER_WORKERS": str(self.workers)})
        tmp = self.backend.tmp or Path("/tmp")
        # The workers' metrics folder of a supervisor killed with SIGKILL stays behind: in the test's folder.
        env["TMPDIR"] = str(tmp)
        env.update(self.extra_env)
        self.log_path = tmp / f"service-{self.port}-{uuid.uuid4().hex[:6]}.log"
        log = open(self.log_path, "ab")
        # Faults injected into log storage (harness/storage_faults.py): the harness's own entry point serves
        cmd = ["harness.with_faults", "serve"] if env.get(STORAGE_FAULTS) else ["coordinator", "serve"]
        self.proc = subprocess.Popen([sys.executable, "-m", *cmd], env=env, cwd=str(ROOT),
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        try:
            wait_http(self.endpoint + "/healthz", proc=self.proc)
            # Ours, not a process of another test run that took the port between free_port() and our bind (it
            # would answer /healthz too): one of our processes holds the listening socket.
            wait_until(lambda: self.proc is not None and (self.proc.poll() is not None or self._listens()),
                       timeout=30, what="our process to listen on the port")
            if self.proc.poll() is not None:
                raise RuntimeError(f"exited with {self.proc.returncode}")
        except Exception as e:
            self.stop()
            raise RuntimeError(f"service did not start: {self.log_text()[-3000:]}") from e
        return self

    def _listens(self) -> bool:
        """Whether a process of this service has a socket listening on ``self.port`` (Linux /proc)."""
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == self.port:  # 0A: LISTEN
                    inodes.add(f"socket:[{cols[9]}]")
        for pid in self.worker_pids():
            try:
                fds = list(Path(f"/proc/{pid}/fd").iterdir())
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(fd) in inodes:
                        return True
                except OSError:
                    continue
        return False

    def worker_pids(self) -> list[int]:
        """The processes serving requests: the workers under the supervisor, or the one process."""
        assert self.proc is not None
        if self.workers == 1:
            return [self.proc.pid]
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return sorted(int(c) for c in children)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no cleanup at all."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def migrate(database_url: str) -> None:
    """The schema through the same Alembic migrations `commit-owner migrate` runs, without its process start
    (tests/ops covers the command itself)."""
    from coordinator.store import migrate as run_migrations

    run_migrations(database_url)


# -- commit bodies ------------------------------------------------------------------------------------

_ict_clock = [int(time.time() * 1000)]


def next_ict() -> int:
    _ict_clock[0] = max(_ict_clock[0] + 1, int(time.time() * 1000))
    return _ict_clock[0]


def ndjson(acts: list[dict[str, Any]]) -> bytes:
    return ("\n".join(json.dumps(a, separators=(",", ":")) for a in acts) + "\n").encode()


# -- real Delta tables (readable by delta-rs) --------------------------------------------------------

ID_SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def version0(ict: int | None = None, owner: str = "commit-owner") -> list[dict[str, Any]]:
    """Version 0 of an owned table: commitInfo with inCommitTimestamp, protocol with the owner feature, metaData."""
    ict = next_ict() if ict is None else ict
    return [
        {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "CREATE TABLE"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [],
                      "writerFeatures": ["inCommitTimestamp", "managedCommit"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(ID_SCHEMA), "partitionColumns": [],
                      "configuration": {"delta.enableInCommitTimestamps": "true",
                                        "delta.managedCommit.commitOwner": owner},
                      "createdTime": ict}},
    ]


def create_owned_table(service: Service, location: str | None = None) -> tuple[str, str]:
    """Register a new table and write its version 0 the way a client does. Returns (table_id, location)."""
    b = service.backend
    loc = location or b.new_location()
    info = service.client().register_table(loc, current_version=-1)
    b.write(delta_file(loc, 0), ndjson(version0()))
    return info.table_id, loc


def delta_rs_target(backend: Backend, location: str) -> tuple[str, dict[str, str] | None]:
    """The table URI and storage options delta-rs needs for ``location`` on ``backend``."""
    uri = location[len("file://"):] if location.startswith("file://") else location
    if backend.storage == "azure":
        return uri, {"account_name": backend.azure_account, "account_key": backend.azure_key,
                     "endpoint": backend.azure_endpoint, "allow_http": "true"}
    if backend.storage == "gcs":
        return uri, {"google_service_account": gcs_emulator_account(backend), "allow_http": "true"}
    if backend.storage != "s3":
        return uri, None
    return uri, {"AWS_ENDPOINT_URL": backend.s3_endpoint, "AWS_ACCESS_KEY_ID": S3_KEY,
                 "AWS_SECRET_ACCESS_KEY": S3_SECRET, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
                 "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def gcs_emulator_account(backend: Backend) -> str:
    """A service-account file that points delta-rs (object_store) at the emulator: ``gcs_base_url`` and
    ``disable_oauth`` are object_store's own fields for this. delta-rs reads through it; it cannot write to
    fake-gcs-server, which lacks the XML API's object PUT that object_store uploads with."""
    assert backend.tmp is not None
    path = backend.tmp / "gcs-emulator-account.json"
    if not path.exists():
        path.write_text(json.dumps({"gcs_base_url": backend.gcs_endpoint, "disable_oauth": True,
                                    "client_email": "", "private_key": "", "private_key_id": ""}))
    return str(path)


def delta_rs_table(backend: Backend, location: str, version: int | None = None) -> Any:
    import deltalake

    uri, opts = delta_rs_target(backend, location)
    return deltalake.DeltaTable(uri, version=version, storage_options=opts)


