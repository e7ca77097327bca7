"""A throwaway high-availability PostgreSQL: etcd and 3 nodes under Patroni, on free ports, with the faults a
failover test needs (the leader's postmaster killed, the leader node killed, the leader node frozen).

Installed by `make install-ha` (Debian's etcd, Patroni in `.venv-patroni` built from /usr/bin/python3).
Patroni and PostgreSQL run as the ``postgres`` OS user when we are root (initdb refuses root), everything
under one private temporary folder owned by that user; etcd runs as us. Patroni's REST API says who leads.

The settings (docs/decisions.md, "A Patroni cluster in CI"): synchronous mode, strict (a commit waits for a
synchronous standby; with none left, writes wait rather than run unreplicated), ``primary_start_timeout: 0``
(a crashed primary is replaced at once instead of restarted in place), ``ttl`` 20 (Patroni's least),
``loop_wait`` 1 and ``retry_timeout`` 5 (Patroni's rule: loop_wait + 2 * retry_timeout <= ttl), pg_rewind
so a demoted primary rejoins as a replica.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness.pgcluster import PG_BIN
from harness.pgcluster import missing_tools as missing_pg_tools
from harness.world import ROOT, free_port

PATRONI_VENV = Path(os.environ.get("COMMIT_OWNER_TEST_PATRONI_VENV", str(ROOT / ".venv-patroni")))
ETCD = Path(os.environ.get("COMMIT_OWNER_TEST_ETCD", "/usr/bin/etcd"))

TTL, LOOP_WAIT, RETRY_TIMEOUT = 20, 1, 5
# How long a writer's client keeps retrying one commit (its deadline) on this cluster: longer than a failover
# takes (the leader key expires after ttl, a replica takes it within loop_wait) plus the owner's own deadlines
# and a margin, so a commit under way at the fault ends acknowledged on the new leader, not "unknown".
WRITER_DEADLINE = TTL + LOOP_WAIT + 40.0
SCOPE = "commit-owner-test"


def missing_tools() -> str | None:
    """Why a Patroni cluster cannot be started here (naming what to install), or None when it can."""
    why = missing_pg_tools()
    if why:
        return why
    failed = PATRONI_VENV / "INSTALL_FAILED"
    if failed.exists():
        return f"`make install-ha` could not install etcd or Patroni: {failed.read_text()[-500:]}"
    if not (PATRONI_VENV / "bin" / "patroni").exists():
        return f"{PATRONI_VENV}/bin/patroni not found (run `make install-ha`)"
    if not ETCD.exists():
        return f"{ETCD} not found (run `make install-ha`: apt-get install etcd-server)"
    if os.geteuid() == 0 and subprocess.run(["runuser", "-u", "postgres", "--", str(PATRONI_VENV / "bin" / "python"),
                                             "-c", "import patroni"], capture_output=True, timeout=60).returncode:
        return (f"the postgres OS user cannot run {PATRONI_VENV}/bin/python (a folder on the way it may not "
                "enter? set COMMIT_OWNER_TEST_PATRONI_VENV to a virtualenv it can)")
    return None


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (Linux /proc), deepest last."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                kids = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def _signal(pids: list[int], sig: int) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def _get(url: str, timeout: float = 1.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"null")
        except ValueError:
            return e.code, None


@dataclass
class Node:
    name: str
    pg_port: int
    rest_port: int
    root: Path
    proc: subprocess.Popen | None = None
    frozen: list[int] = field(default_factory=list)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def rest(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def postgres_pids(self) -> list[int]:
        """The postmaster and every process it started, or [] when it is not running."""
        try:
            main = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(main, 0)
        except (OSError, ValueError, IndexError):
            return []
        if not Path(f"/proc/{main}/cmdline").read_bytes().startswith(str(PG_BIN / "postgres").encode()):
            return []  # a stale postmaster.pid naming some other process
        return [main, *_descendants(main)]

    def patroni_pids(self) -> list[int]:
        if self.proc is None or self.proc.poll() is not None:
            return []
        return [self.proc.pid, *_descendants(self.proc.pid)]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class PatroniCluster:
    """etcd + ``nodes`` PostgreSQL servers under Patroni. Use as a context manager, or call destroy()."""

    def __init__(self, nodes: int = 3, *, database: str = "owner") -> None:
        self.root = Path(tempfile.mkdtemp(prefix="commit-owner-patroni-"))
        self.database = database
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()
        self.etcd: subprocess.Popen | None = None
        self.nodes = [Node(f"node{i}", free_port(), free_port(), self.root / f"node{i}") for i in range(nodes)]

    # -- start and stop ---------------------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> PatroniCluster:
        """etcd, then the first node (it bootstraps), then the others; returns once every replica streams
        and the database exists."""
        try:
            self._start_etcd()
            for n in self.nodes:
                self._write_config(n)
            self.start_node(self.nodes[0])
            self.wait_leader(timeout=timeout)
            for n in self.nodes[1:]:
                self.start_node(n)
            self.wait_healthy(timeout=timeout)
            self._create_database()
        except BaseException:
            self.destroy()
            raise
        return self

    def _start_etcd(self) -> None:
        data = self.root / "etcd"
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        with open(self.root / "etcd.log", "ab") as log:
            self.etcd = subprocess.Popen(
                [str(ETCD), "--name", "etcd0", "--data-dir", str(data), "--listen-client-urls", client,
                 "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls",
                 peer, "--initial-cluster", f"etcd0={peer}", "--initial-cluster-state", "new",
                 "--unsafe-no-fsync"],  # a test's cluster: its durability is not what is under test
                stdout=log, stderr=subprocess.STDOUT)
        self._wait(lambda: _get(f"{client}/health")[0] == 200, 30, "etcd to answer /health", self.etcd)

    def _write_config(self, n: Node) -> None:
        n.root.mkdir()
        conf = {
            "scope": SCOPE, "name": n.name,
            "restapi": {"listen": f"127.0.0.1:{n.rest_port}", "connect_address": f"127.0.0.1:{n.rest_port}"},
            "etcd3": {"hosts": f"127.0.0.1:{self.etcd_port}"},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL, "loop_wait": LOOP_WAIT, "retry_timeout": RETRY_TIMEOUT,
                    "maximum_lag_on_failover": 1048576,
                    "synchronous_mode": True, "synchronous_mode_strict": True,
                    "primary_start_timeout": 0,
                    "postgresql": {
                        "use_pg_rewind": True, "use_slots": True,
                        "parameters": {"wal_log_hints": "on", "max_connections": 100, "fsync": "off",
                                       "max_wal_senders": 10, "max_replication_slots": 10},
                    },
                },
                "initdb": [{"encoding": "UTF8"}, "no-sync"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{n.pg_port}", "connect_address": f"127.0.0.1:{n.pg_port}",
                "data_dir": str(n.data), "bin_dir": str(PG_BIN), "pgpass": str(n.root / "pgpass"),
                "authentication": {"superuser": {"username": "postgres"},
                                   "replication": {"username": "replicator"},
                                   "rewind": {"username": "postgres"}},
                "pg_hba": ["local all all trust", "host all all 127.0.0.1/32 trust",
                           "host replication replicator 127.0.0.1/32 trust"],
                "parameters": {"unix_socket_directories": str(n.root)},
                "remove_data_directory_on_rewind_failure": True,
                "remove_data_directory_on_diverged_timelines": True,
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }
        # JSON is YAML: Patroni reads it as its configuration file
        (n.root / "patroni.yml").write_text(json.dumps(conf, indent=2))
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            for p in (n.root, n.root / "patroni.yml"):
                os.chown(p, pw.pw_uid, pw.pw_gid)

    def start_node(self, n: Node) -> None:
        """Start (or start again) the node's Patroni, which starts its PostgreSQL."""
        kw: dict[str, Any] = {}
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            kw = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
        env = {"PATH": f"{PATRONI_VENV / 'bin'}:/usr/bin:/bin", "HOME": str(n.root), "LANG": "C.UTF-8",
               "LC_ALL": "C.UTF-8"}
        with open(n.root / "patroni.log", "ab") as log:
            n.proc = subprocess.Popen([str(PATRONI_VENV / "bin" / "patroni"), str(n.root / "patroni.yml")],
                                      stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(n.root),
                                      start_new_session=True, **kw)

    def destroy(self) -> None:
        """Stop everything, thawing first (a stopped process cannot act on SIGTERM), and remove the files."""
        for n in self.nodes:
            _signal([*n.patroni_pids(), *n.postgres_pids(), *n.frozen], signal.SIGCONT)
            n.frozen = []
        for n in self.nodes:
            if n.alive():
                assert n.proc is not None
                n.proc.terminate()  # Patroni stops its PostgreSQL on the way out
        for n in self.nodes:
            if n.proc is not None:
                try:
                    n.proc.wait(30)
                except subprocess.TimeoutExpired:
                    _signal(n.patroni_pids(), signal.SIGKILL)
                    n.proc.wait(10)
            _signal(n.postgres_pids(), signal.SIGKILL)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.terminate()
            try:
                self.etcd.wait(10)
            except subprocess.TimeoutExpired:
                self.etcd.kill()
                self.etcd.wait(5)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PatroniCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    # -- what Patroni says -------------------------------------------------------------------------------------

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def members(self) -> list[dict[str, Any]]:
        """Patroni's view of the cluster (GET /cluster), asked of the first live node that answers."""
        for n in self.nodes:
            if not n.alive() or n.frozen:
                continue
            try:
                status, body = _get(f"{n.rest}/cluster")
            except OSError:
                continue
            if status == 200 and body:
                return list(body.get("members", []))
        return []

    def leader(self) -> Node | None:
        """The node that holds the leader key and runs a primary, or None during a failover."""
        for m in self.members():
            if m.get("role") == "leader" and m.get("state") == "running":
                return self.node(m["name"])
        return None

    def wait_leader(self, *, other_than: Node | None = None, timeout: float = 60.0) -> Node:
        """The leader, once there is one (not ``other_than``) that takes writes (GET /primary is 200)."""
        found: list[Node] = []

        def ready() -> bool:
            ld = self.leader()
            if ld is None or ld is other_than:
                return False
            try:
                if _get(f"{ld.rest}/primary")[0] != 200:
                    return False
            except OSError:
                return False
            found[:] = [ld]
            return True

        self._wait(ready, timeout, "a leader" + (f" other than {other_than.name}" if other_than else ""))
        return found[0]

    def wait_healthy(self, timeout: float = 90.0) -> None:
        """Every node back: one leader, a synchronous standby, every replica streaming."""

        def healthy() -> bool:
            ms = self.members()
            roles = sorted(m.get("role", "") for m in ms)
            states = {m.get("state") for m in ms if m.get("role") != "leader"}
            return (len(ms) == len(self.nodes) and roles.count("leader") == 1 and "sync_standby" in roles
                    and states == {"streaming"})

        self._wait(healthy, timeout, f"{len(self.nodes)} healthy members (got {self.members()})")

    @staticmethod
    def _wait(pred: Callable[[], bool], timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"exited with {proc.returncode} while waiting for {what}")
            try:
                if pred():
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}")

    # -- the owner's view ----------------------------------------------------------------------------------------

    def url(self, database: str | None = None) -> str:
        """The multi-host URL the owner uses: libpq tries each node, keeps the one that takes writes."""
        hosts = ",".join("127.0.0.1" for _ in self.nodes)
        ports = ",".join(str(n.pg_port) for n in self.nodes)
        return (f"postgresql+psycopg://postgres@/{database or self.database}?host={hosts}&port={ports}"
                "&target_session_attrs=read-write")

    def _create_database(self) -> None:
        import psycopg

        ld = self.wait_leader()
        with psycopg.connect(host="127.0.0.1", port=ld.pg_port, user="postgres", dbname="postgres",
                             autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')

    # -- faults ---------------------------------------------------------------------------------------------

    def kill_postmaster(self, n: Node) -> None:
        """SIGKILL the node's postmaster only (its backends then exit; Patroni stays and acts)."""
        pids = n.postgres_pids()
        assert pids, f"{n.name} runs no PostgreSQL"
        os.kill(pids[0], signal.SIGKILL)

    def kill_node(self, n: Node) -> None:
        """SIGKILL the node's Patroni and every process of its PostgreSQL, as a machine that dies."""
        pids = [*n.patroni_pids(), *n.postgres_pids()]
        _signal(pids, signal.SIGKILL)
        if n.proc is not None:
            n.proc.wait(10)

    def freeze(self, n: Node) -> None:
        """SIGSTOP the node's Patroni and every PostgreSQL process: a frozen host (sockets open, no answer)."""
        n.frozen = [*n.patroni_pids(), *n.postgres_pids()]
        _signal(n.frozen, signal.SIGSTOP)

    def thaw(self, n: Node) -> None:
        _signal(n.frozen, signal.SIGCONT)
        n.frozen = []

    def log_tail(self, n: Node, chars: int = 3000) -> str:
        p = n.root / "patroni.log"
        return p.read_text(errors="replace")[-chars:] if p.exists() else ""

    # -- a failover, end to end ------------------------------------------------------------------------------

    def fail_leader(self, fault: str, *, timeout: float = 90.0) -> Failover:
        """Inject ``fault`` (one of FAULTS) on the leader, wait until Patroni promotes another node, then end the
        fault (the killed node's Patroni started again, the frozen one thawed). Returns the timings."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}: one of {', '.join(FAULTS)}")
        old = self.wait_leader(timeout=timeout)
        injected = time.time()
        if fault == "postmaster-killed":
            self.kill_postmaster(old)
        elif fault == "node-killed":
            self.kill_node(old)
        else:
            self.freeze(old)
        try:
            new = self.wait_leader(other_than=old, timeout=timeout)
            promoted = time.time()
        finally:
            if fault == "node-killed":
                self.start_node(old)
            elif fault == "node-frozen":
                self.thaw(old)
        return Failover(fault, old.name, new.name, injected, promoted, time.time())


FAULTS = ("postmaster-killed", "node-killed", "node-frozen")


@dataclass
class Failover:
    """One fault of the leader, in wall-clock seconds (``time.time()``, as the workload's ack times)."""

    fault: str
    old_leader: str
    new_leader: str
    injected: float
    promoted: float  # when the new leader first answered Patroni's GET /primary with 200
    healed: float  # when the fault ended (node restarted or thawed)

    @property
    def promote_seconds(self) -> float:
        return self.promoted - self.injected

    def writers_saw(self, ack_times: Sequence[float]) -> dict[str, Any]:
        """The outage as writers see it: the longest stretch without an acknowledged commit, from the last
        acknowledgement before the fault to the first one after the promotion (None when none came)."""
        acks = sorted(ack_times)
        before = [a for a in acks if a < self.injected]
        after = [a for a in acks if a >= self.promoted]
        out: dict[str, Any] = {"fault": self.fault, "leader": f"{self.old_leader} -> {self.new_leader}",
                               "promote_seconds": round(self.promote_seconds, 3),
                               "outage_seconds": None, "writes_back_after_promotion_seconds": None}
        if not after:
            return out
        start = before[-1] if before else self.injected
        window = [start, *(a for a in acks if start < a < after[0]), after[0]]
        out["outage_seconds"] = round(max(b - a for a, b in pairwise(window)), 3)
        out["writes_back_after_promotion_seconds"] = round(after[0] - self.promoted, 3)
        return out
