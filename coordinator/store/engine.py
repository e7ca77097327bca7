"""Engines and migrations of the ownership store.

The service uses SQLAlchemy's asyncio engine (psycopg 3's async driver on PostgreSQL, aiosqlite on
SQLite) so the event loop never waits on the database; Alembic runs migrations with a plain sync engine
because `commit-owner migrate` is a one-shot command.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import event, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, NoSuchModuleError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

import coordinator
from client.contract.errors import SchemaOutOfDateError, UnavailableError

log = logging.getLogger("commit_owner.store")


def schema_dir() -> Path:
    pkg = Path(coordinator.__file__).resolve().parent
    for candidate in (pkg / "_schema", pkg.parent / "schema"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError("migration files not found (expected coordinator/_schema or ./schema)")


URL_EXAMPLES = ("sqlite+aiosqlite:///relative/owner.db, sqlite+aiosqlite:////absolute/owner.db or "
                "postgresql+psycopg://user:password@host:5432/dbname")


def check_database_url(url: str) -> None:
    """Raise ValueError, naming what is wrong, unless ``url`` is a SQLite or PostgreSQL URL this store opens.

    Checked when the settings load, so that a typo is refused before anything opens (or creates) a file.
    """
    try:
        u = make_url(url)
    except ArgumentError:
        raise ValueError(f"not a database URL: expected {URL_EXAMPLES}") from None
    backend = u.drivername.split("+", 1)[0]
    if backend not in ("sqlite", "postgresql", "postgres"):
        raise ValueError(f"the ownership store is SQLite or PostgreSQL, not {backend}: expected {URL_EXAMPLES}")
    try:
        u.get_dialect()  # loads the driver's plugin: a typo'd driver name is refused here, in one line
    except NoSuchModuleError:
        raise ValueError(f"no database driver named {u.drivername!r}: expected {URL_EXAMPLES}") from None
    if backend != "sqlite":
        _check_pg_parameters(u.query)
    if backend == "sqlite" and (u.host or u.port or u.username):
        # `sqlite://./x.db` reads "." as a host, which SQLite has none of
        raise ValueError("a SQLite URL has no host: three slashes before a relative path "
                         "(sqlite+aiosqlite:///./owner.db), four before an absolute one")


def _check_pg_parameters(query: Any) -> None:
    """libpq's own parser judges the URL's parameters (an unknown name is refused here, not at the first
    connection); the ones the store also sets must be whole numbers."""
    from psycopg import pq
    from psycopg.conninfo import make_conninfo

    params = {k: (",".join(v) if isinstance(v, tuple) else v) for k, v in query.items()}
    for name in ("connect_timeout", *TCP_DEFAULTS):
        if name in params and not str(params[name]).strip().isdigit():
            raise ValueError(f"the URL parameter {name} must be a whole number, not {params[name]!r}")
    try:
        pq.Conninfo.parse(make_conninfo("", **params).encode())
    except Exception as e:  # noqa: BLE001 - psycopg's error names the parameter
        raise ValueError(f"bad PostgreSQL URL parameters: {str(e).strip()}") from None


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL; None for PostgreSQL, an in-memory SQLite database and a SQLite
    ``file:`` URI (``?uri=true``), whose name is not a path."""
    u = make_url(url)
    if not u.drivername.startswith("sqlite") or u.database in (None, "", ":memory:") or "uri" in u.query:
        return None
    return Path(u.database)


def _refuse_missing_sqlite_file(url: str, *, creating: bool = True) -> None:
    """Opening a SQLite file that is not there would create an empty one (and, in a missing folder, fail
    with aiosqlite racing the closed event loop): refuse first, creating nothing. Only `commit-owner migrate
    --create` (or of the default path) makes a new store: a typo'd path must not become an empty store that
    makes the user's tables seem gone."""
    path = sqlite_file(url)
    if path is None or path.is_file():
        return
    where = path.resolve()
    if path.exists():
        raise UnavailableError(f"cannot use the database: {where} is not a SQLite file")
    create = "`commit-owner migrate --create --database-url ...`"
    if not where.parent.is_dir():
        raise UnavailableError(f"cannot use the database: the folder {where.parent} of the SQLite file does not "
                               f"exist (check the database URL; a new store there: {create})")
    raise SchemaOutOfDateError(f"no SQLite database at {where}, so no schema: check the database URL, or create a "
                               f"new store there with {create}")


def async_url(url: str) -> str:
    u = make_url(url)
    if u.drivername in ("postgresql", "postgres", "postgresql+psycopg2", "postgresql+psycopg"):
        u = u.set(drivername="postgresql+psycopg")
    elif u.drivername in ("sqlite", "sqlite+pysqlite", "sqlite+aiosqlite"):
        u = u.set(drivername="sqlite+aiosqlite")
    return u.render_as_string(hide_password=False)


def sync_url(url: str) -> str:
    u = make_url(url)
    if u.drivername.startswith("postgres"):
        u = u.set(drivername="postgresql+psycopg")
    elif u.drivername.startswith("sqlite"):
        u = u.set(drivername="sqlite")
    return u.render_as_string(hide_password=False)


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")  # an acknowledged commit survives power loss
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


CONNECT_TIMEOUT_SECONDS = 5.0
# TCP settings of every PostgreSQL connection unless the URL names them (docs/decisions.md, a store that never
# hangs the owner): a peer that stops answering is noticed within about tcp_user_timeout (data unacknowledged)
# or keepalives_idle + keepalives_interval x keepalives_count (an idle connection), not the kernel's 15 minutes.
TCP_DEFAULTS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,  # milliseconds
}


def pg_connect_args(url: str, *, timeout: float, connect_timeout: float) -> dict[str, Any]:
    """The connection parameters the store adds to a PostgreSQL URL: the connect timeout, the TCP settings
    and a server-side statement_timeout, each only when the URL does not already set it (SQLAlchemy lets
    ``connect_args`` replace the URL's own, so the operator's are left out here, never overridden)."""
    given = make_url(url).query
    args: dict[str, Any] = {k: v for k, v in TCP_DEFAULTS.items() if k not in given}
    if "connect_timeout" not in given:
        args["connect_timeout"] = max(2, int(connect_timeout))  # libpq's least is 2 s
    options = given.get("options")
    if isinstance(options, tuple):
        options = " ".join(options)
    if not options or "statement_timeout" not in options:
        ours = f"-c statement_timeout={int(timeout * 1000)}"
        args["options"] = f"{options} {ours}" if options else ours
    return args


def create_engine(url: str, *, pool_size: int = 10, timeout: float = 30.0,
                  connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> AsyncEngine:
    """The engine of the store. ``timeout`` is the deadline of each unit of work (``Db.tx`` reads it back as
    the pool's timeout); ``connect_timeout`` bounds opening one connection (per host of a multi-host URL)."""
    aurl = async_url(url)
    if aurl.startswith("sqlite"):
        engine = create_async_engine(aurl, connect_args={"timeout": timeout}, pool_timeout=timeout)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_async_engine(
        aurl,
        pool_size=pool_size,
        # No overflow: a connection opened for a burst and closed after it costs PostgreSQL a backend
        # process each time; waiting a moment for a pooled one is cheaper (docs/decisions.md).
        max_overflow=0,
        pool_timeout=timeout,
        pool_recycle=1800,
        connect_args=pg_connect_args(url, timeout=timeout, connect_timeout=connect_timeout),
    )
    ping_when_idle(engine, IDLE_PING_SECONDS, connect_timeout)
    return engine


IDLE_PING_SECONDS = 5.0


def shut_socket(pgconn: Any) -> bool:
    """Shut down the socket of a libpq connection (psycopg's ``pgconn``), under whatever waits on it: the
    driver then fails at once with a lost connection, needing nothing from the server. False when libpq no
    longer calls the connection OK (its descriptor may belong to someone else by now): nothing done."""
    from psycopg import pq

    if pgconn.status != pq.ConnStatus.OK:
        return False
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(pgconn.socket)) as s:
        s.shutdown(socket.SHUT_RDWR)
    return True


def ping_when_idle(engine: AsyncEngine, seconds: float, ping_timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
    """Check a pooled connection at checkout only when it sat idle for ``seconds`` (docs/decisions.md).

    ``pool_pre_ping`` would spend a round trip on every checkout, several per commit. A connection in
    steady use needs no ping: if the server went away, its first statement fails, SQLAlchemy invalidates
    the pool and the request is answered UNAVAILABLE (retryable), which clients retry.
    """
    sync = engine.sync_engine

    def on_checkin(_dbapi_conn, record) -> None:  # type: ignore[no-untyped-def]
        record.info["idle_since"] = time.monotonic()

    def on_checkout(dbapi_conn, record, _proxy) -> None:  # type: ignore[no-untyped-def]
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since < seconds:
            return
        # A ping to a frozen server would wait for ever, and cancelling it waits for the server too: its
        # socket is shut down past the deadline instead (the same as Db.tx does to a statement).
        pgconn = getattr(getattr(dbapi_conn, "driver_connection", None), "pgconn", None)
        timer = None
        if pgconn is not None and ping_timeout > 0:
            with contextlib.suppress(RuntimeError):  # (no event loop: a synchronous caller, nothing to arm)
                timer = asyncio.get_running_loop().call_later(ping_timeout, shut_socket, pgconn)
        try:
            ok = sync.dialect.do_ping(dbapi_conn)
        except Exception as e:  # noqa: BLE001 - any failure means: use another connection
            raise DisconnectionError(f"idle connection failed its ping: {type(e).__name__}") from e
        finally:
            if timer is not None:
                timer.cancel()
        if ok is False:
            raise DisconnectionError("idle connection failed its ping")

    event.listen(sync, "checkin", on_checkin)
    event.listen(sync, "checkout", on_checkout)


def _alembic_config(url: str):  # type: ignore[no-untyped-def]
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(schema_dir()))
    cfg.attributes["sync_url"] = sync_url(url)
    return cfg


def migrate(url: str, revision: str = "head", *, create: bool = True) -> str:
    """Apply migrations up to ``revision``; returns the head revision. A SQLite file (and its folder) that is
    not there is created only with ``create``; else SchemaOutOfDateError / UnavailableError, nothing created."""
    from alembic import command

    if not create:
        _refuse_missing_sqlite_file(url, creating=False)
    path = sqlite_file(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    _refuse_newer_schema(url)
    cfg = _alembic_config(url)
    command.upgrade(cfg, revision)
    return head_revision()


def _refuse_newer_schema(url: str) -> None:
    """Raise SchemaOutOfDateError, changing nothing, when the database is at a schema revision this build does
    not know: an older build must not try to migrate what a newer one migrated."""
    from sqlalchemy import create_engine as create_sync_engine

    from coordinator.store.schema import schema_compatibility as sc

    engine = create_sync_engine(sync_url(url))
    try:
        with engine.connect() as conn:
            try:
                have = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            except Exception:  # an empty database
                return
            if have is None or have in known_revisions():
                return
            try:
                row = conn.execute(select(sc.c.written_by).where(sc.c.revision == have)).first()
            except Exception:
                row = None
    finally:
        engine.dispose()
    by = f"delta-commit-owner {row[0]}" if row is not None else "a newer delta-commit-owner"
    raise SchemaOutOfDateError(f"the database schema is at revision {have}, written by {by}, newer than this build "
                               f"(delta-commit-owner {coordinator.__version__}, schema revision {head_revision()}) "
                               f"knows: nothing migrated; run `commit-owner migrate` of {by} or later")


def head_revision() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(schema_dir()))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def known_revision(revision: str) -> bool:
    """Whether ``revision`` names one of this build's migrations, exactly (Alembic would also take a prefix)."""
    return revision in known_revisions()


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        try:
            return (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
        except Exception:
            return None


def known_revisions() -> list[str]:
    """The schema revisions this build knows, oldest first (its head last)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(schema_dir()))
    return [r.revision for r in reversed(list(ScriptDirectory.from_config(cfg).walk_revisions()))]


def _newer_schema(have: str, compat: tuple[str, str] | None) -> SchemaOutOfDateError | None:
    """None when this build runs on ``have``, a schema revision newer than it knows (its migration says the
    oldest code revision that runs on it, ``compat``); else the one-line refusal."""
    if compat is not None and compat[0] in known_revisions():
        log.warning("the database schema is at revision %s (written by delta-commit-owner %s), newer than this "
                    "build's %s; this build runs on it (the newer migrations keep its statements valid): upgrade "
                    "this build", have, compat[1], head_revision())
        return None
    by = f"delta-commit-owner {compat[1]}" if compat is not None else "a newer delta-commit-owner"
    return SchemaOutOfDateError(f"the database schema is at revision {have}, written by {by}, which this build "
                                f"(delta-commit-owner {coordinator.__version__}, schema revision {head_revision()}) "
                                f"cannot run on: run {by} or later")


async def _compatibility(engine: AsyncEngine, revision: str) -> tuple[str, str] | None:
    """What the migration of ``revision`` said of older code (``schema_compatibility``), if it said anything."""
    from coordinator.store.schema import schema_compatibility as sc

    async with engine.connect() as conn:
        try:
            row = (await conn.execute(select(sc.c.oldest_code_revision, sc.c.written_by)
                                      .where(sc.c.revision == revision))).first()
        except Exception:  # no such table: a schema from before migration 0009's rule, or not ours
            return None
    return None if row is None else (row[0], row[1])


async def check_schema(engine: AsyncEngine) -> None:
    """Raise SchemaOutOfDateError unless this build runs on the database's schema: its head revision, or a
    newer one whose migrations keep this build's statements valid (decision 81)."""
    have, want = await current_revision(engine), head_revision()
    if have == want:
        return
    if have is None or have in known_revisions():
        raise SchemaOutOfDateError(
            f"the database schema is at revision {have or 'none (empty database)'} but this service needs {want}: "
            "run `commit-owner migrate --database-url ...` first"
        )
    refusal = _newer_schema(have, await _compatibility(engine, have))
    if refusal is not None:
        raise refusal


@contextlib.asynccontextmanager
async def open_engine(database_url: str, *, pool_size: int = 2, timeout: float = 30.0,
                      connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
                      on_create: Callable[[AsyncEngine], None] | None = None) -> AsyncIterator[AsyncEngine]:
    """The one way to open the database: an engine whose schema is checked, disposed of on exit.

    ``on_create`` sees the engine before the check (the service's metrics watch its pool).
    Raises SchemaOutOfDateError (a SQLite file that does not exist included: none is created),
    UnavailableError (a SQLite path that cannot be one), and the driver's errors when the database cannot
    be reached.
    """
    _refuse_missing_sqlite_file(database_url)
    engine = create_engine(database_url, pool_size=pool_size, timeout=timeout, connect_timeout=connect_timeout)
    try:
        if on_create is not None:
            on_create(engine)
        await check_schema(engine)
        with kept_open(database_url, timeout=timeout):
            yield engine
    finally:
        await engine.dispose()


@contextlib.contextmanager
def kept_open(database_url: str, *, timeout: float = 30.0) -> Iterator[None]:
    """Keep a SQLite store open for as long as this process uses it (nothing for PostgreSQL).

    A connection to a database in WAL mode holds a shared lock on its file from its first read until it closes,
    whether or not a transaction is open: this one makes that lock last as long as the engine, whatever its pool
    does meanwhile. It is how `store restore` knows that a process is using the store (store/backup.py): it needs
    the file's exclusive lock, which no process gets while another holds this one. No transaction stays open, so
    checkpoints are not held back.
    """
    path = sqlite_file(database_url)
    if path is None:
        yield
        return
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()  # the first read: the shared lock
        yield
    finally:
        conn.close()


async def check_database(settings: Any) -> None:
    """Refuse (raise) unless the settings' database is reachable and migrated."""
    async with open_engine(settings.database_url, pool_size=1, timeout=settings.request_timeout_seconds,
                           connect_timeout=settings.db_connect_timeout_seconds):
        pass
