"""A throwaway PostgreSQL cluster on a free port, so tests can restart it (never the machine's own).

initdb refuses to run as root, so every command runs as the ``postgres`` OS user (``runuser``), on a
data folder under a private temporary folder owned by that user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from harness.world import free_port

PG_BIN = Path(os.environ.get("COMMIT_OWNER_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


def missing_tools() -> str | None:
    """Why a throwaway cluster cannot be started here, or None when it can."""
    for tool in ("initdb", "pg_ctl"):
        if not (PG_BIN / tool).exists():
            return f"{PG_BIN / tool} not found (set COMMIT_OWNER_TEST_PG_BIN)"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "no 'postgres' OS user to run initdb as"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser"
    return None


class PgCluster:
    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="commit-owner-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "pg.log"
        self._as_postgres = os.geteuid() == 0

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(a) for a in args]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)

    def init(self) -> PgCluster:
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._run(PG_BIN / "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync",
                  "-E", "UTF8")
        return self

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=100"
        self._run(PG_BIN / "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast``: clean shutdown; ``immediate``: like a crash (recovery on the next start)."""
        self._run(PG_BIN / "pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def restart(self) -> None:
        self.stop("fast")
        self.start()

    def pids(self) -> list[int]:
        """The postmaster and every process it started (backends, checkpointer, walwriter...)."""
        main = int((self.data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(main)], capture_output=True, text=True,
                                  check=False).stdout.split()
        return [main, *(int(c) for c in children)]

    def freeze(self) -> None:
        """Hang the whole server, as a frozen host looks: every process stopped, sockets open, nothing answers."""
        for pid in self.pids():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self.pids():
            os.kill(pid, signal.SIGCONT)

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def destroy(self) -> None:
        try:
            self.thaw()  # a frozen server cannot stop
        except (OSError, ValueError):
            pass
        self.stop("immediate")
        time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)
