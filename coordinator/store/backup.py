"""Backup and restore of a SQLite store (the embedded default), through SQLite's online backup API.

What each promises:

* ``backup_store(url, path)`` writes a consistent copy of the store as of one moment (one read transaction of
  the store: in WAL mode the service's writers go on meanwhile, and the copy holds every commit ratified before
  that moment and none after) to a new file ``path``, a single self-contained file (rollback-journal mode, no
  ``-wal`` beside it). The copy is written under a hidden name in ``path``'s folder, checked
  (``PRAGMA integrity_check``) and only then linked as ``path``, which is never overwritten: nothing is written
  there unless the whole copy is good.
* ``restore_store(url, path)`` puts the backup ``path`` in place of the store, in one SQLite transaction on the
  store's own file (a crash midway leaves the store as it was). It first takes the store's exclusive lock, which
  no process gets while another has the store open (every process keeps it open for its life:
  ``engine.kept_open``), and holds it to the end, so no service starts on the store halfway. The store it
  replaces is first copied to ``<store>.before-restore-<UTC time>``.

Both refuse a PostgreSQL URL (pg_dump / pg_basebackup are the way there: docs/runbook.md) and anything that is
not a store of this project (no ``alembic_version`` of one of its migrations), raising ``InvalidArgumentError``
and changing nothing.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sqlite3
import stat
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from client.contract.errors import InvalidArgumentError, UnavailableError
from coordinator.store.engine import head_revision, known_revision, sqlite_file
from coordinator.store.schema import commits, owned_tables

POSTGRESQL_WAY = ("this store is PostgreSQL: back it up with PostgreSQL's own tools (pg_dump, or pg_basebackup with "
                  "WAL archiving for point-in-time recovery; docs/runbook.md, \"Backup and restore\")")
BUSY_SECONDS = 10.0  # as long as the service waits for a lock (engine._sqlite_pragmas)


@dataclass(frozen=True)
class Contents:
    """What a store file holds, in the figures an operator checks."""

    path: str
    revision: str
    tables: int
    commits: int
    bytes: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def backup_store(database_url: str, path: str | Path) -> Contents:
    """Copy the SQLite store of ``database_url`` to the new file ``path``; the copy's contents.

    Raises InvalidArgumentError (a PostgreSQL URL, no store file, ``path`` exists or its folder does not, the
    database is not a store) and UnavailableError (SQLite could not read or write: a lock held past the busy
    timeout, a full disk); nothing is left at ``path`` then.
    """
    with _translated():
        return _backup(database_url, path)


def _backup(database_url: str, path: str | Path) -> Contents:
    store = _sqlite_store(database_url)
    if not store.is_file():
        raise InvalidArgumentError(f"no SQLite store at {store}: check the database URL; nothing written")
    target = Path(path)
    _refuse_taken(target)
    partial = target.with_name(f".{target.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        with _connection(store) as source, _connection(partial) as copy:
            _revision_of(source, store)
            source.backup(copy)  # one step: one read transaction, so one moment of the store
            contents = _self_contained(copy, partial)
        _same_mode(store, partial)
        _sync(partial)
        try:
            os.link(partial, target)  # never over a file: a target created meanwhile is refused too
        except FileExistsError:
            raise InvalidArgumentError(f"{target} exists (created while the backup ran): nothing written") from None
        _sync(target.parent)
    finally:
        _remove(partial)
    return Contents(str(target.resolve()), contents.revision, contents.tables, contents.commits, contents.bytes)


@dataclass(frozen=True)
class Restored:
    restored: Contents
    replaced: Contents | None  # None: there was no store at the URL's path
    kept_at: str | None
    migrate_needed: bool  # the backup's schema is older than this build's


def restore_store(database_url: str, path: str | Path) -> Restored:
    """Put the backup ``path`` in place of the SQLite store of ``database_url``.

    Raises InvalidArgumentError, changing nothing: a PostgreSQL URL; ``path`` missing, the store itself, not a
    SQLite file, damaged, or not a store of this project (of a migration this build does not know); the store's
    folder missing; the store open in another process (a `serve`, a `backfill-worker`, any command using it).
    UnavailableError when SQLite cannot read or write a file (permissions, a full disk).
    """
    with _translated():
        return _restore(database_url, path)


def _restore(database_url: str, path: str | Path) -> Restored:
    store = _sqlite_store(database_url)
    backup = Path(path).resolve()
    if not backup.is_file():
        raise InvalidArgumentError(f"no backup file at {backup}: nothing changed")
    if store.exists() and store == backup:
        raise InvalidArgumentError(f"{backup} is the store itself: nothing to restore")
    if not store.parent.is_dir():
        raise InvalidArgumentError(f"the folder {store.parent} of the store does not exist (check the "
                                   "database URL): nothing changed")
    existed = store.exists()
    if existed and not store.is_file():
        raise InvalidArgumentError(f"{store} is not a file: check the database URL; nothing changed")
    with _connection(backup, read_only=True) as source:
        restored = _check_backup(source, backup)
        aside = store.with_name(f"{store.name}.before-restore-{_stamp()}") if existed else None
        replaced = None
        made_aside = swapped = False
        try:
            with _exclusive(store) as live:
                _same_page_size(source, live, backup, store)
                if aside is not None:
                    _refuse_taken(aside)
                    made_aside = True
                    with _connection(aside) as copy:
                        live.backup(copy)
                        replaced = _self_contained(copy, aside)
                    _same_mode(store, aside)
                    _sync(aside)
                # One write transaction on the store's file, in WAL mode as the service keeps it (a new file too);
                # with this connection's exclusive lock the WAL's index is in its memory, and the WAL is folded into
                # the file and removed when it closes: nothing is left beside the store.
                live.execute("PRAGMA journal_mode=WAL").fetchall()
                source.backup(live)
                swapped = True
                _check(live, store)
                live.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # into the file, for its size below
                after = _counted(live, store, restored.revision)
        except BaseException:
            if not swapped:  # nothing changed: take back what this attempt made
                if aside is not None and made_aside:
                    _remove(aside)
                if not existed:  # the empty file the lock created
                    _remove(store)
            raise
    _sync(store)
    _sync(store.parent)
    return Restored(after, replaced, str(aside) if aside else None, migrate_needed=restored.revision != head_revision())


# -- the pieces --------------------------------------------------------------------------------------------------

def _sqlite_store(database_url: str) -> Path:
    path = sqlite_file(database_url)
    if path is None:
        if database_url.startswith("sqlite"):
            raise InvalidArgumentError("an in-memory SQLite database has nothing to back up or restore")
        raise InvalidArgumentError(POSTGRESQL_WAY)
    return path.resolve()  # relative to the working folder, as SQLite reads it; named in full in every message


def _refuse_taken(target: Path) -> None:
    if os.path.lexists(target):
        raise InvalidArgumentError(f"{target} exists: give a new file name (nothing is ever overwritten)")
    if not target.resolve().parent.is_dir():
        raise InvalidArgumentError(f"the folder {target.resolve().parent} does not exist: nothing written")


@contextlib.contextmanager
def _connection(path: Path, *, read_only: bool = False) -> Iterator[sqlite3.Connection]:
    if read_only:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_SECONDS,
                               isolation_level=None)
    else:
        conn = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


@contextlib.contextmanager
def _exclusive(store: Path) -> Iterator[sqlite3.Connection]:
    """The store's file, locked for this connection alone until it closes (no other process has it open)."""
    with _connection(store) as conn:
        conn.execute("PRAGMA busy_timeout=0")  # another process's lock is an answer, not something to wait out
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")  # before the first read: kept until the connection closes
        try:
            conn.execute("BEGIN EXCLUSIVE")
            conn.execute("COMMIT")
        except sqlite3.OperationalError as e:
            if "locked" not in str(e):
                raise InvalidArgumentError(f"{store} cannot be used as a store ({e}): nothing changed") from None
            raise InvalidArgumentError(
                f"the store {store} is open in another process (a `commit-owner serve`, a backfill-worker "
                f"or another command; `fuser {store}` names them): stop them, then restore; nothing changed"
            ) from None
        except sqlite3.DatabaseError as e:
            raise InvalidArgumentError(f"{store} is not a SQLite store ({e}): nothing changed") from None
        yield conn


def _revision_of(conn: sqlite3.Connection, path: Path) -> str:
    """The schema revision of a store file; InvalidArgumentError unless it is a store of this project that this
    build knows (one of its migrations: not a newer build's)."""
    revision = _revision_or_none(conn)
    if revision is None:
        raise InvalidArgumentError(f"{path} is not a store of commit-owner (no schema revision in it): nothing changed")
    if not known_revision(revision):
        raise InvalidArgumentError(f"{path} is at schema revision {revision}, which this build does not know (its "
                                   f"migrations go up to {head_revision()}): a newer build's store, or not a "
                                   "commit-owner store; nothing changed")
    return revision


def _revision_or_none(conn: sqlite3.Connection) -> str | None:
    try:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.OperationalError as e:  # a missing table is an answer; a lock or an I/O error is not
        if "no such table" in str(e):
            return None
        raise
    except sqlite3.DatabaseError:  # not a database at all
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def _check_backup(conn: sqlite3.Connection, path: Path) -> Contents:
    with path.open("rb") as f:
        if f.read(16) != b"SQLite format 3\x00":
            raise InvalidArgumentError(f"{path} is not a SQLite file: nothing changed")
    revision = _revision_of(conn, path)
    _check(conn, path)
    return _counted(conn, path, revision)


def _same_page_size(source: sqlite3.Connection, live: sqlite3.Connection, backup: Path, store: Path) -> None:
    """SQLite copies into a database in WAL mode only pages of its own size (every store here has SQLite's default:
    only a file made otherwise differs)."""
    want = int(source.execute("PRAGMA page_size").fetchone()[0])
    have = int(live.execute("PRAGMA page_size").fetchone()[0])
    if have != want:
        raise InvalidArgumentError(f"{backup} has pages of {want} bytes, the store {store} of {have}: SQLite cannot "
                                   "copy one into the other; nothing changed")


def _check(conn: sqlite3.Connection, path: Path) -> None:
    found = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
    if found != ["ok"]:
        raise InvalidArgumentError(f"{path} is damaged (integrity check: {'; '.join(found[:3])}): nothing changed")


def _self_contained(conn: sqlite3.Connection, path: Path) -> Contents:
    """Make a fresh copy one file (rollback-journal mode: the backup API copied the store's WAL mode), check it."""
    conn.execute("PRAGMA journal_mode=DELETE").fetchall()
    _check(conn, path)
    revision = _revision_or_none(conn) or "none"
    return _counted(conn, path, revision)


def _counted(conn: sqlite3.Connection, path: Path, revision: str) -> Contents:
    def count(table: str) -> int:
        try:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608 - our own names
        except sqlite3.DatabaseError:
            return 0

    return Contents(str(path), revision, count(owned_tables.name), count(commits.name), path.stat().st_size)


def _same_mode(store: Path, copy: Path) -> None:
    """A copy is as private as the store it copies (tokens' hashes, names, locations)."""
    os.chmod(copy, stat.S_IMODE(store.stat().st_mode))


def _remove(path: Path) -> None:
    """A file this module made, with whatever SQLite kept beside it."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """SQLite's own errors left over (the judged ones are InvalidArgumentError already) into the family's."""
    try:
        yield
    except sqlite3.Error as e:
        raise UnavailableError(f"cannot use the database: {e}") from e
