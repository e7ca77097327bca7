"""A PostgreSQL store backed up with pg_dump while a service serves it, restored with pg_restore into a new
database, and served from there: every ratified commit, then the next one (docs/runbook.md, "Backup and
restore", the way for small installs)."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from client.contract.layout import delta_file
from coordinator.store.engine import sync_url
from tests.conftest import make_backend
from tests.ops.test_cli import cli
from tests.support import Backend, Service, actions, create_owned_table

pytestmark = pytest.mark.postgres


def pg_tools() -> Path:
    """The newest PostgreSQL client programs on this machine (Debian's layout); a loud skip without them."""
    found = sorted((p for p in Path("/usr/lib/postgresql").glob("*/bin")
                    if (p / "pg_dump").is_file() and (p / "pg_restore").is_file()),
                   key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))
    if not found:
        reason = "no pg_dump / pg_restore under /usr/lib/postgresql/*/bin (apt-get install postgresql-client)"
        print(f"\n!!! {reason}: the PostgreSQL restore test is SKIPPED !!!\n", file=sys.stderr)
        pytest.skip(reason)
    return found[-1]


def libpq(url: str) -> str:
    """The store's URL as libpq (pg_dump, pg_restore, psql) spells it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def commit_rows(url: str) -> list[tuple]:
    engine = create_engine(sync_url(url))
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(
                "SELECT table_id, version, file_name, content_sha256, file_size FROM commits ORDER BY 1, 2"))]
    finally:
        engine.dispose()


def test_a_pg_dump_of_a_served_store_restores_into_a_new_database_that_serves_every_commit(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    tools = pg_tools()
    backend = make_backend(request, "postgres", "local", "pg-dump")
    svc = Service(backend, extra_env={"COMMIT_OWNER_BACKFILL": "false"}).start()  # every commit stays listed
    try:
        client = svc.client()
        (a, loc_a), (b, _) = create_owned_table(svc), create_owned_table(svc)
        for t, n in ((a, 12), (b, 7)):
            for v in range(1, n + 1):
                client.commit(t, v, actions())
        files = {t: [c.file_name for c in client.get_commits(t).commits] for t in (a, b)}
        dump = tmp_path / "owner.dump"
        done = subprocess.run([str(tools / "pg_dump"), "--format=custom", "--file", str(dump),
                               libpq(backend.database_url)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stderr == "", done.stderr  # while the service serves
    finally:
        svc.stop()
    assert [len(files[a]), len(files[b])] == [12, 7]

    restored_url = request.getfixturevalue("pg_database_factory")()
    done = subprocess.run([str(tools / "pg_restore"), "--exit-on-error", "--no-owner", "--no-privileges",
                           "--single-transaction", "--dbname", libpq(restored_url), str(dump)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert commit_rows(restored_url) == commit_rows(backend.database_url) and len(commit_rows(restored_url)) == 19

    restored = Backend(name="pg-restored", database_url=restored_url, storage="local", tmp=backend.tmp)
    listed = cli("tables", "list", "--json", "--database-url", restored_url)
    assert listed.returncode == 0, listed.stderr
    assert '"latestTableVersion": 12' in listed.stdout and '"latestTableVersion": 7' in listed.stdout
    svc = Service(restored, extra_env={"COMMIT_OWNER_BACKFILL": "false"}).start()
    try:
        client = svc.client()
        for t, n in ((a, 12), (b, 7)):
            info = client.get_table(t)
            assert (info.latest_table_version, info.latest_backfilled_version, info.unbackfilled_commits) == (n, 0, n)
            page = client.get_commits(t)
            assert [c.version for c in page.commits] == list(range(1, n + 1))
            assert [c.file_name for c in page.commits] == files[t]
            assert client.commit(t, n + 1, actions()).version == n + 1  # the next commit
        assert client.get_table(a).latest_table_version == 13 and client.get_table(b).latest_table_version == 8
    finally:
        svc.stop()

    svc = Service(restored).start()  # with its backfiller: the restored rows publish the whole log
    try:
        assert svc.client().backfill_to_version(a, 13).latest_backfilled_version == 13
        log = Path(delta_file(loc_a, 0)[len("file://"):]).parent
        assert sorted(p.name for p in log.glob("*.json")) == [f"{v:020}.json" for v in range(14)]
        recorded = {v: sha for t, v, _, sha, _ in commit_rows(restored_url) if t == a}
        assert {v: hashlib.sha256((log / f"{v:020}.json").read_bytes()).hexdigest() for v in range(1, 14)} == recorded
    finally:
        svc.stop()
