"""`commit-owner store backup|restore` on SQLite, the embedded default (coordinator/store/backup.py): a backup
taken while a service commits is a consistent prefix of the store; a restore is refused while the store is served
and, after a stop, the service serves the backup; bad input is refused with nothing changed."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.store.engine import head_revision, sqlite_file
from tests.conftest import make_backend
from tests.ops.test_cli import cli
from tests.support import Backend, Service, actions, create_owned_table

# A commit row as it stays for good; its body (the bytes, kept until they are published) is checked on its own
COMMIT_COLUMNS = "table_id, version, file_name, content_sha256, file_size"


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """A SQLite store of its own (migrated, empty) on local disk."""
    yield make_backend(request, "sqlite", "local", "store-backup")


def db_path(backend: Backend) -> Path:
    path = sqlite_file(backend.database_url)
    assert path is not None
    return path


def fingerprint(path: Path) -> dict[str, str]:
    """The bytes of every file in a store's folder: the store, its -wal, any file set aside. Not the -shm (SQLite's
    index of the WAL in shared memory, which a reader's visit changes) nor a service's log."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.parent.iterdir())
            if p.is_file() and not p.name.endswith(("-shm", ".log"))}


def rows(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_a_backup_taken_while_a_writer_commits_is_a_consistent_prefix_of_the_store(store: Backend) -> None:
    svc = Service(store).start()
    try:
        tables = [create_owned_table(svc)[0] for _ in range(2)]
        acked = {t: 0 for t in tables}
        stop = threading.Event()
        errors: list[BaseException] = []

        def write() -> None:
            client = svc.client()
            try:
                while not stop.is_set():
                    for t in tables:
                        client.commit(t, acked[t] + 1, actions())
                        acked[t] += 1
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        writer = threading.Thread(target=write)
        writer.start()
        copies, acked_before = [], []
        try:
            for i in range(3):
                deadline = time.monotonic() + 30
                while sum(acked.values()) < 10 * (i + 1) and time.monotonic() < deadline:
                    time.sleep(0.05)
                acked_before.append(sum(acked.values()))
                copy = store.tmp / f"backup-{i}.db"  # type: ignore[operator]
                res = cli("store", "backup", str(copy), "--database-url", store.database_url)
                assert res.returncode == 0, res.stderr
                assert res.stdout.startswith(f"backed up to {copy}: 2 table(s), ") and "integrity ok" in res.stdout
                copies.append(copy)
            time.sleep(0.5)  # commits after the last backup too
        finally:
            stop.set()
            writer.join(60)
        assert errors == [] and not writer.is_alive()
        live = db_path(store)
        final = {t: acked[t] for t in tables}
        assert min(final.values()) >= 15
    finally:
        svc.stop()

    live_commits = {(r[0], r[1]): r for r in rows(live, f"SELECT {COMMIT_COLUMNS} FROM commits")}
    assert {t: max(v for (tt, v) in live_commits if tt == t) for t in tables} == final  # every ack is in the store
    seen = []
    for copy in copies:
        assert copy.stat().st_mode & 0o777 == live.stat().st_mode & 0o777
        assert not Path(f"{copy}-wal").exists() and not Path(f"{copy}-journal").exists()  # one self-contained file
        assert rows(copy, "PRAGMA integrity_check") == [("ok",)]
        assert rows(copy, "PRAGMA journal_mode") == [("delete",)]
        assert rows(copy, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
        commits = rows(copy, f"SELECT {COMMIT_COLUMNS} FROM commits")
        assert commits and all(live_commits[(r[0], r[1])] == r for r in commits)  # same files, checksums, sizes
        bodies = rows(copy, "SELECT content_sha256, body FROM commits WHERE body IS NOT NULL")
        assert all(hashlib.sha256(body).hexdigest() == sha for sha, body in bodies)
        latest = dict(rows(copy, "SELECT table_id, latest_version FROM owned_tables"))
        for t in tables:
            versions = sorted(r[1] for r in commits if r[0] == t)
            assert versions == list(range(1, latest[t] + 1))  # contiguous, and the table row agrees with them
        seen.append(sum(latest.values()))
    # each holds every commit acknowledged before it began; later ones hold more; the last one not all of them
    assert all(n >= before for n, before in zip(seen, acked_before, strict=True)) and acked_before[0] >= 10
    assert seen == sorted(seen) and seen[-1] < sum(final.values())
    assert not [p for p in live.parent.iterdir() if ".partial-" in p.name]


def test_a_restore_is_refused_while_the_service_serves_the_store(store: Backend) -> None:
    # A service that writes nothing by itself between requests (no backfiller, no janitor), so that every byte of
    # the store stays as it was unless the restore changed it
    svc = Service(store, extra_env={"COMMIT_OWNER_BACKFILL": "false", "COMMIT_OWNER_JANITOR_INTERVAL_SECONDS": "0"})
    svc.start()
    try:
        table_id, _ = create_owned_table(svc)
        client = svc.client()
        for v in (1, 2, 3):
            client.commit(table_id, v, actions())
        backup = store.tmp / "before.db"  # type: ignore[operator]
        assert cli("store", "backup", str(backup), "--database-url", store.database_url).returncode == 0
        client.commit(table_id, 4, actions())
        before = fingerprint(db_path(store))
        assert f"{db_path(store).name}-wal" in before

        res = cli("store", "restore", str(backup), "--database-url", store.database_url)
        assert res.returncode == 1 and res.stdout == ""
        assert res.stderr == (f"error: the store {db_path(store)} is open in another process (a `commit-owner serve`, "
                              f"a backfill-worker or another command; `fuser {db_path(store)}` names them): stop "
                              "them, then restore; nothing changed\n")
        assert fingerprint(db_path(store)) == before  # the store's bytes, its -wal, and no file set aside
        assert client.get_table(table_id).latest_table_version == 4
        assert client.commit(table_id, 5, actions()).version == 5  # the service never noticed
    finally:
        svc.stop()


def test_after_a_stop_the_restored_store_is_served_at_the_backups_latest_version(store: Backend) -> None:
    """The harder stop: SIGKILL, so the last commits are still in the store's -wal when the restore opens it; the
    store set aside has them all."""
    svc = Service(store, extra_env={"COMMIT_OWNER_BACKFILL": "false"}).start()
    try:
        table_id, _ = create_owned_table(svc)
        client = svc.client()
        for v in range(1, 6):
            client.commit(table_id, v, actions())
        backup = store.tmp / "at-5.db"  # type: ignore[operator]
        assert cli("store", "backup", str(backup), "--database-url", store.database_url).returncode == 0
        files_at_5 = [c.file_name for c in client.get_commits(table_id).commits]
        for v in range(6, 10):
            client.commit(table_id, v, actions())
    finally:
        svc.kill()
    live = db_path(store)
    assert Path(f"{live}-wal").stat().st_size > 0  # commits not yet checkpointed into the store's file
    stopped = fingerprint(live)

    res = cli("store", "restore", str(backup), "--database-url", store.database_url)
    assert res.returncode == 0, res.stderr
    [aside] = [p for p in live.parent.iterdir() if p.name.startswith(f"{live.name}.before-restore-")]
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"restored {live} from {backup}: 1 table(s), 5 commit row(s), schema revision ")
    assert lines[1].startswith(f"the store it replaced is kept at {aside}: 1 table(s), 9 commit row(s), ")
    assert lines[2].startswith("next: the restored store may be behind the tables' logs") and "store check" in lines[2]
    assert "tables reconcile" in lines[2]
    assert rows(aside, "PRAGMA integrity_check") == [("ok",)]
    assert rows(aside, "SELECT max(version), count(*) FROM commits") == [(9, 9)]  # what the store held, WAL and all
    assert stopped[live.name] != fingerprint(live)[live.name]
    assert not Path(f"{live}-wal").exists()  # the replaced store's WAL went into the copy set aside, not onto the backup

    svc = Service(store, extra_env={"COMMIT_OWNER_BACKFILL": "false"}).start()
    try:
        client = svc.client()
        assert client.get_table(table_id).latest_table_version == 5
        page = client.get_commits(table_id)
        assert (page.latest_table_version, [c.version for c in page.commits]) == (5, [1, 2, 3, 4, 5])
        assert [c.file_name for c in page.commits] == files_at_5
    finally:
        svc.stop()


def test_bad_input_is_refused_and_changes_nothing(store: Backend, tmp_path: Path) -> None:
    live = db_path(store)
    url = store.database_url
    good = tmp_path / "good.db"
    assert cli("store", "backup", str(good), "--database-url", url).returncode == 0
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"someone's file")
    plain = tmp_path / "plain.db"
    conn = sqlite3.connect(plain)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    newer = tmp_path / "newer.db"
    newer.write_bytes(good.read_bytes())
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.commit()
    conn.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all\n" * 10)
    pages = tmp_path / "pages.db"
    pages.write_bytes(good.read_bytes())
    conn = sqlite3.connect(pages, isolation_level=None)
    conn.execute("PRAGMA page_size=8192")
    conn.execute("VACUUM")
    conn.close()
    pg = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    before, around = fingerprint(live), fingerprint(taken)

    cases = [
        (("backup", str(taken), "--database-url", url), f"error: {taken} exists: give a new file name (nothing is "
                                                        "ever overwritten)"),
        (("backup", str(tmp_path / "nowhere" / "x.db"), "--database-url", url),
         f"error: the folder {tmp_path / 'nowhere'} does not exist: nothing written"),
        (("backup", str(tmp_path / "pg.db"), "--database-url", pg), "error: this store is PostgreSQL: back it up with "
                                                                    "PostgreSQL's own tools (pg_dump, or pg_basebackup"),
        (("restore", str(good), "--database-url", pg), "error: this store is PostgreSQL"),
        (("restore", str(text), "--database-url", url), f"error: {text} is not a SQLite file: nothing changed"),
        (("restore", str(plain), "--database-url", url), f"error: {plain} is not a store of commit-owner (no schema "
                                                         "revision in it): nothing changed"),
        (("restore", str(newer), "--database-url", url), f"error: {newer} is at schema revision 9999, which this "
                                                         "build does not know"),
        (("restore", str(tmp_path / "missing.db"), "--database-url", url),
         f"error: no backup file at {tmp_path / 'missing.db'}: nothing changed"),
        (("restore", str(live), "--database-url", url), f"error: {live} is the store itself: nothing to restore"),
        (("restore", str(pages), "--database-url", url), f"error: {pages} has pages of 8192 bytes, the store {live} of "
                                                         "4096: SQLite cannot copy one into the other; nothing changed"),
    ]
    for args, message in cases:
        res = cli("store", *args)
        assert (res.returncode, res.stdout) == (1, ""), (args, res.stderr)
        assert res.stderr.startswith(message) and res.stderr.count("\n") == 1, (args, res.stderr)
    assert fingerprint(live) == before  # the store, nothing set aside beside it
    assert fingerprint(taken) == around
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.db", "newer.db", "notes.txt", "pages.db", "plain.db",
                                                          "taken.db"]


def test_a_restore_onto_a_path_without_a_store_makes_it(store: Backend, tmp_path: Path) -> None:
    backup = tmp_path / "b.db"
    assert cli("store", "backup", str(backup), "--database-url", store.database_url).returncode == 0
    fresh = tmp_path / "new-host" / "owner.db"
    fresh.parent.mkdir()
    res = cli("store", "restore", str(backup), "--database-url", f"sqlite+aiosqlite:///{fresh}")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[1] == "there was no store at that path: nothing kept aside"
    assert sorted(p.name for p in fresh.parent.iterdir()) == ["owner.db"]
    assert rows(fresh, "SELECT version_num FROM alembic_version") == [(head_revision(),)]

    # A store file copied by hand (in WAL mode, as a served store is) restores too, leaving nothing beside the store
    conn = sqlite3.connect(db_path(store), isolation_level=None)
    assert conn.execute("PRAGMA journal_mode=WAL").fetchall() == [("wal",)]
    conn.close()
    copied = tmp_path / "copied.db"
    copied.write_bytes(db_path(store).read_bytes())
    res = cli("store", "restore", str(copied), "--database-url", f"sqlite+aiosqlite:///{fresh}")
    assert res.returncode == 0, res.stderr
    # (an -shm is left by this test's own read-only look above, not by the restore)
    [aside] = [p.name for p in fresh.parent.iterdir() if p.name not in ("owner.db", "owner.db-shm")]
    assert aside.startswith("owner.db.before-restore-")  # no -journal, no -wal
    assert rows(fresh, "PRAGMA integrity_check") == [("ok",)]


def test_a_backup_while_a_restore_holds_the_store_exits_2_and_leaves_nothing(store: Backend, tmp_path: Path) -> None:
    """SQLite's own errors come out as the family's: one line, the database's exit code, no traceback."""
    holder = sqlite3.connect(db_path(store), isolation_level=None, timeout=0)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")  # as `store restore` holds it
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("COMMIT")
        res = cli("store", "backup", str(tmp_path / "b.db"), "--database-url", store.database_url)
    finally:
        holder.close()
    assert (res.returncode, res.stdout, res.stderr) == (2, "", "error: cannot use the database: database is locked\n")
    assert list(tmp_path.iterdir()) == []
