"""One `commit-owner serve` on a fresh PostgreSQL database with N new tables, for the measuring scripts
(`scripts/measure-*`): the build under test is the executable given, the world is this checkout's."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from coordinator.bench.env import free_port, wait_http

PG = "postgresql+psycopg://postgres@127.0.0.1:5432"
SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as c:
        c.execute(sql)


@dataclass
class Served:
    proc: subprocess.Popen  # type: ignore[type-arg]
    endpoint: str
    table_ids: list[str]


@contextmanager
def served_owner(cli: str, tables: int, settings: dict[str, str] | None = None) -> Iterator[Served]:
    """Serve with ``cli`` (its own defaults plus ``settings``) until the block ends, then drop everything."""
    from client import CommitOwnerClient
    from client.lifecycle import create_table

    db = f"commit_owner_measure_{uuid.uuid4().hex[:10]}"
    work = Path(tempfile.mkdtemp(prefix="commit-owner-measure-"))
    admin(f'CREATE DATABASE "{db}"')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("COMMIT_OWNER_")},
           "COMMIT_OWNER_DATABASE_URL": f"{PG}/{db}", "COMMIT_OWNER_HOST": "127.0.0.1",
           "COMMIT_OWNER_PORT": str(free_port()), "COMMIT_OWNER_ALLOW_LOCATION": work.as_uri() + "/",
           **(settings or {})}
    proc = None
    try:
        subprocess.run([cli, "migrate", "--create"], env=env, check=True, capture_output=True)
        with open(work / "service.log", "wb") as log:
            proc = subprocess.Popen([cli, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
        endpoint = f"http://127.0.0.1:{env['COMMIT_OWNER_PORT']}"
        wait_http(endpoint + "/readyz", proc)
        with CommitOwnerClient(endpoint) as c:
            ids = [create_table((work / f"t{i}").as_uri(), SCHEMA, client=c).table_id for i in range(tables)]
        yield Served(proc, endpoint, ids)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        shutil.rmtree(work, ignore_errors=True)
