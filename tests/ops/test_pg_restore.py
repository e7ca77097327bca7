"""A PostgreSQL store backed up while a service serves it and restored (docs/runbook.md, "Backup and restore"):
with pg_dump / pg_restore into a new database (small installs), and with a base backup and archived WAL to a
point in time; a service on the restored store serves every commit ratified before the backup's moment, then the
next one."""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from client.contract.layout import delta_file
from coordinator.store.engine import sync_url
from harness.pgcluster import PgCluster, missing_tools
from tests.conftest import make_backend
from tests.ops.test_cli import cli
from tests.support import Backend, Service, actions, create_owned_table, migrate

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


@pytest.mark.slow
def test_a_base_backup_and_archived_wal_recover_the_store_to_a_point_in_time(tmp_path: Path) -> None:
    """pg_basebackup + WAL archiving (docs/runbook.md): a cluster of its own archives its WAL; a base backup is taken
    while the service commits; the cluster is lost after more commits; a new cluster from the base backup replays
    the archive up to a moment between two commits, and a service on it serves the store as of that moment."""
    why = missing_tools()
    if why:
        print(f"\n!!! cannot start a throwaway PostgreSQL cluster ({why}): the PITR test is SKIPPED !!!\n",
              file=sys.stderr)
        pytest.skip(why)
    tools = pg_tools()
    postgres = pwd.getpwnam("postgres")

    def for_postgres(path: Path) -> None:  # the server runs as that OS user (harness/pgcluster.py)
        if os.geteuid() == 0:
            os.chown(path, postgres.pw_uid, postgres.pw_gid)

    pg = PgCluster().init()
    archive = pg.root / "wal-archive"
    archive.mkdir()
    for_postgres(archive)
    with (pg.data / "postgresql.conf").open("a") as conf:  # as docs/runbook.md says
        conf.write(f"wal_level = replica\narchive_mode = on\n"
                   f"archive_command = 'test ! -f {archive}/%f && cp %p {archive}/%f'\n")
    pg.start()
    recovered = PgCluster()
    for_postgres(recovered.root)
    try:
        url = pg.create_database("commit_owner")
        migrate(url)
        backend = Backend(name="pitr", database_url=url, storage="local", tmp=tmp_path)
        svc = Service(backend, extra_env={"COMMIT_OWNER_BACKFILL": "false"}).start()
        try:
            client = svc.client()
            table, _ = create_owned_table(svc)
            for v in range(1, 6):
                client.commit(table, v, actions())
            base = recovered.root / "data"
            pg._run(tools / "pg_basebackup", "--pgdata", str(base), "--wal-method=stream", "--checkpoint=fast",
                    "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres")  # while the service serves
            for v in range(6, 11):
                client.commit(table, v, actions())
            with psycopg.connect(libpq(url), autocommit=True) as conn:
                [(target,)] = conn.execute("SELECT clock_timestamp()::text").fetchall()
            time.sleep(0.2)
            for v in range(11, 16):
                client.commit(table, v, actions())
            files = [c.file_name for c in client.get_commits(table).commits]
        finally:
            svc.stop()
        with psycopg.connect(libpq(url), autocommit=True) as conn:
            [(segment,)] = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchall()
        deadline = time.monotonic() + 60
        while not (archive / segment).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (archive / segment).exists(), "the last WAL segment was never archived"
        pg.stop("immediate")  # the cluster is lost

        with (base / "postgresql.auto.conf").open("a") as conf:
            conf.write(f"restore_command = 'cp {archive}/%f %p'\nrecovery_target_time = '{target}'\n"
                       "recovery_target_action = 'promote'\narchive_mode = off\n")
        (base / "recovery.signal").touch()
        for_postgres(base / "recovery.signal")
        recovered.start()
        recovered_url = f"postgresql+psycopg://postgres@127.0.0.1:{recovered.port}/commit_owner"
        svc = Service(Backend(name="pitr-recovered", database_url=recovered_url, storage="local", tmp=tmp_path),
                      extra_env={"COMMIT_OWNER_BACKFILL": "false"}).start()
        try:
            client = svc.client()
            page = client.get_commits(table)
            assert (page.latest_table_version, [c.version for c in page.commits]) == (10, list(range(1, 11)))
            assert [c.file_name for c in page.commits] == files[:10]
            assert client.commit(table, 11, actions()).version == 11
        finally:
            svc.stop()
    finally:
        recovered.destroy()
        pg.destroy()
