"""Test support: the world of harness/world.py (backends, services, moto, real tables) plus what only the
tests need (commit bodies, waiting, a reply-dropping proxy, a look at the commit rows).

Nothing here mocks the database, the object store or the service.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from client.contract.layout import delta_file
from harness.world import (
    ID_SCHEMA,
    ROOT,
    S3_KEY,
    S3_SECRET,
    Backend,
    MotoServer,
    Service,
    create_owned_table,
    delta_rs_table,
    delta_rs_target,
    free_port,
    migrate,
    ndjson,
    next_ict,
    version0,
    wait_http,
    wait_until,
)

__all__ = [
    "ID_SCHEMA", "ROOT", "S3_KEY", "S3_SECRET", "Backend", "MotoServer", "ReplyDroppingProxy", "Service", "actions",
    "create_owned_table", "data_commit", "db_commit_files", "delta_file", "delta_rs_table", "delta_rs_target",
    "free_port", "migrate", "ndjson", "next_ict", "side_python", "version0", "wait_http", "wait_until",
]


def actions(n_adds: int = 1, *, ict: int | None = None, tag: str = "") -> list[dict[str, Any]]:
    """A commit's actions: commitInfo with inCommitTimestamp first, then adds."""
    ict = next_ict() if ict is None else ict
    out: list[dict[str, Any]] = [{"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict,
                                                 "operation": "WRITE", "isBlindAppend": True}}]
    for i in range(n_adds):
        out.append({"add": {"path": f"part-{tag}{uuid.uuid4().hex}-{i}.parquet", "partitionValues": {},
                            "size": 100 + i, "modificationTime": ict, "dataChange": True}})
    return out


def data_commit(backend: Backend, location: str, ids: list[int]) -> list[dict[str, Any]]:
    """Write a real Parquet file with ``ids`` into the table and return the actions adding it."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), buf)
    name = f"part-{uuid.uuid4().hex}.parquet"
    backend.write(f"{location}/{name}", buf.getvalue())
    ict = next_ict()
    stats = {"numRecords": len(ids), "minValues": {"id": min(ids)}, "maxValues": {"id": max(ids)},
             "nullCount": {"id": 0}}
    return [
        {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "WRITE", "isBlindAppend": True}},
        {"add": {"path": name, "partitionValues": {}, "size": len(buf.getvalue()), "modificationTime": ict,
                 "dataChange": True, "stats": json.dumps(stats)}},
    ]


class ReplyDroppingProxy:
    """A TCP proxy on 127.0.0.1 that forwards requests to the service but, for the first
    ``drop`` responses, closes the client's connection instead of delivering the reply:
    the server has done the work, the client never hears about it.

    With ``match``, only replies to requests ``match(request bytes)`` accepts count (the bytes the client
    sent on its connection since the previous reply: one HTTP/1.1 request, the client does not pipeline).
    ``before_drop(request)`` runs once the server's reply has begun to arrive, before the client's
    connection is closed (e.g. to kill the server then). ``dropped_requests`` holds what was matched. A
    target that refuses connections (it is down) makes the proxy close the client's connection at once."""

    def __init__(self, target_port: int, drop: int = 1, *, match: Callable[[bytes], bool] | None = None,
                 before_drop: Callable[[bytes], None] | None = None) -> None:
        import threading

        self.target_port = target_port
        self.drop = drop
        self.dropped = 0
        self.match = match
        self.before_drop = before_drop
        self.dropped_requests: list[bytes] = []
        self.refused = 0  # client connections closed at once because the target refused the connection
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        import threading

        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        import threading

        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:
            with self._lock:
                self.refused += 1
            client.close()
            return
        request = bytearray()  # what the client sent since the last reply began
        armed: list[bytes] = []  # the request whose reply is to be dropped (matching mode)

        def pump_up() -> None:
            try:
                while data := client.recv(65536):
                    with self._lock:
                        request.extend(data)
                        if (self.match is not None and not armed and self.dropped < self.drop
                                and self.match(bytes(request))):
                            self.dropped += 1
                            armed.append(bytes(request))
                    upstream.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    upstream.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

        threading.Thread(target=pump_up, daemon=True).start()
        try:
            while data := upstream.recv(65536):
                with self._lock:
                    if self.match is None:
                        drop = self.dropped < self.drop
                        if drop:
                            self.dropped += 1
                    else:
                        drop = bool(armed)
                        if not data.startswith(b"HTTP/1.1 100 "):  # an interim reply: the request goes on
                            request.clear()
                if drop:
                    if armed:
                        self.dropped_requests.append(armed[0])
                    if self.before_drop is not None:
                        self.before_drop(armed[0] if armed else b"")
                    client.shutdown(socket.SHUT_RDWR)
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            client.close()
            upstream.close()

    def close(self) -> None:
        self._closed = True
        self._sock.close()


def db_commit_files(database_url: str, table_id: str) -> dict[int, str]:
    """version -> ratified file name, read straight from the ownership store."""
    from sqlalchemy import create_engine, text

    from coordinator.store.engine import sync_url

    engine = create_engine(sync_url(database_url))
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version, file_name FROM commits WHERE table_id = :t"), {"t": table_id})
            return {int(v): str(f) for v, f in rows}
    finally:
        engine.dispose()


def side_python(venv: str, probe: str, make_target: str, what: str) -> Path:
    """The python of an outside client's own virtualenv (``venv`` under the checkout, made by ``make
    make_target``, which `make test` runs) once ``import probe`` works there; otherwise the test skips, loudly,
    with the reason."""
    python = ROOT / venv / "bin" / "python"
    if not python.exists():
        reason = f"{python} is missing: run `make {make_target}` (make test does)"
    else:
        res = subprocess.run([str(python), "-c", f"import {probe}"], capture_output=True, text=True)
        if res.returncode == 0:
            return python
        reason = f"{what} does not import in {venv}: {res.stderr.strip()[-300:]}"
    print(f"\n!!! {reason}; the {what} tests are SKIPPED !!!\n", file=sys.stderr)
    pytest.skip(reason)
