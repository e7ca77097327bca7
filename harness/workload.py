"""A Jepsen-style workload: W writer threads commit to T owned tables through the real client.

Every operation gets a fresh idempotency key and a unique marker (``operationParameters.workloadOp``
in its commitInfo, and the path of its one ``add`` action), so the checker can find it in the log. With
``transactions`` > 0, that share of the operations are multi-table transactions (POST /api/v1/transactions)
over ``tx_tables`` distinct tables: one Op per table, each with its own marker, all sharing the transaction's
key (``Op.tx``) and its outcome; the checker then also counts partial transactions (some of its commits in
the log, not all). Each operation ends in exactly one of:

* **ack**: the owner answered with the version; the commit must be in the log at that version;
* **rejected**: a certain refusal (lost the race, backlog full, invalid): it must not be in the log;
* **unknown**: no answer (timeouts, 5xx, the service gone) even after retrying the same idempotency key
  on every endpoint: it may be in the log once, or not at all, never twice.

A reader thread loops ``get_commits`` + a listing of ``_delta_log`` and records any version that goes
backwards and any gap it cannot resolve by listing again (docs/lifecycle.md, the snapshot reader).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from client import CommitOwnerClient
from client.contract.errors import (
    CommitFailedError,
    CommitOwnerError,
    CommitStateUnknownError,
    CommitVersionConflictError,
    TooManyUnbackfilledCommitsError,
    TransactionConflictError,
    UnavailableError,
)
from client.contract.layout import log_dir, parse_delta_file


class IctClock:
    """In-commit timestamps that rise strictly across every thread of the process.

    A writer takes its timestamp after it read the latest version, so the commit it rebases on always
    carries a smaller one (the owner refuses non-increasing timestamps).
    """

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, int(time.time() * 1000))
            return self._last


CLOCK = IctClock()


def commit_body(marker: str, ict: int) -> bytes:
    """The NDJSON of one workload commit: commitInfo carrying the marker, one add named after it."""
    acts = [
        {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "WRITE",
                        "operationParameters": {"workloadOp": marker}, "isBlindAppend": True}},
        {"add": {"path": f"part-{marker}.parquet", "partitionValues": {}, "size": 100,
                 "modificationTime": ict, "dataChange": True}},
    ]
    return ("\n".join(json.dumps(a, separators=(",", ":")) for a in acts) + "\n").encode()


def marker_of(data: bytes) -> str | None:
    """The workload marker in a commit file (None for a commit the workload did not write)."""
    first = data.split(b"\n", 1)[0]
    try:
        ci = json.loads(first).get("commitInfo") or {}
    except ValueError:
        return None
    return (ci.get("operationParameters") or {}).get("workloadOp")


@dataclass(frozen=True)
class WorkloadTable:
    table_id: str
    location: str


@dataclass
class Op:
    table_id: str
    version: int
    key: str
    marker: str
    sha256: str
    started: float
    ended: float = 0.0
    outcome: str = ""  # ack | rejected | unknown
    error: str = ""
    attempts: int = 0
    tx: str = ""  # the multi-table transaction this commit belongs to (its key); "" for a single commit


@dataclass
class History:
    """Everything the writers and the reader saw (thread-safe appends)."""

    ops: list[Op] = field(default_factory=list)
    reader_violations: list[str] = field(default_factory=list)
    reader_rounds: int = 0
    reader_gaps_resolved: int = 0
    anomalies: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, op: Op) -> None:
        with self.lock:
            self.ops.append(op)

    def by_outcome(self, outcome: str) -> list[Op]:
        with self.lock:
            return [o for o in self.ops if o.outcome == outcome]

    @property
    def acks(self) -> list[Op]:
        return self.by_outcome("ack")

    @property
    def unknowns(self) -> list[Op]:
        return self.by_outcome("unknown")

    def ack_times(self) -> list[float]:
        with self.lock:
            return sorted(o.ended for o in self.ops if o.outcome == "ack")


class Writer(threading.Thread):
    def __init__(self, n: int, endpoints: Sequence[str], tables: Sequence[WorkloadTable], history: History,
                 stop: threading.Event, *, timeout: float, deadline: float, seed: int, pause: float = 0.0,
                 transactions: float = 0.0, tx_tables: int = 2) -> None:
        super().__init__(name=f"writer-{n}", daemon=True)
        self.transactions = transactions
        self.tx_tables = min(tx_tables, len(tables))
        self.endpoints = list(endpoints)
        self.tables = list(tables)
        self.history = history
        self.stop_event = stop
        self.rng = random.Random(seed)
        self.pause = pause
        self.home = n % len(self.endpoints)  # writers spread across the services
        self.clients = [CommitOwnerClient(e, timeout=timeout, deadline=deadline, backoff_max=0.5)
                        for e in self.endpoints]

    def _client(self, shift: int = 0) -> CommitOwnerClient:
        return self.clients[(self.home + shift) % len(self.clients)]

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self.one_op()
                if self.pause:
                    time.sleep(self.pause)
        finally:
            for c in self.clients:
                c.close()

    def _latest(self, table: WorkloadTable) -> int | None:
        for shift in range(len(self.clients)):
            try:
                latest = self._client(shift).get_commits(table.table_id).latest_table_version
                self.home = (self.home + shift) % len(self.clients)  # stay with the endpoint that answered
                return latest
            except (UnavailableError, CommitStateUnknownError):
                continue
            except CommitOwnerError as e:
                self.history.anomalies.append(f"get_commits refused: {e!r}")
                return None
        return None

    def one_op(self) -> None:
        if self.transactions and self.tx_tables > 1 and self.rng.random() < self.transactions:
            self.one_transaction()
            return
        table = self.rng.choice(self.tables)
        latest = self._latest(table)
        if latest is None:
            self.stop_event.wait(0.2)  # every endpoint down: wait for the fault to heal
            return
        version = max(latest, 0) + 1
        marker = uuid.uuid4().hex
        data = commit_body(marker, CLOCK.next())
        op = Op(table.table_id, version, str(uuid.uuid4()), marker, hashlib.sha256(data).hexdigest(), time.time())
        # An unknown outcome is retried with the same key on each endpoint in turn: the key makes the
        # retry safe (never a second version), and it turns most unknowns into a definite answer.
        for shift in range(len(self.clients)):
            op.attempts += 1
            try:
                c = self._client(shift).commit(table.table_id, version, data, idempotency_key=op.key)
            except CommitVersionConflictError as e:
                op.outcome, op.error = "rejected", e.code
                break
            except TooManyUnbackfilledCommitsError as e:
                op.outcome, op.error = "rejected", e.code
                break
            except (CommitStateUnknownError, UnavailableError) as e:
                op.outcome, op.error = "unknown", f"{e.code}: {e.message[:200]}"
                continue
            except CommitFailedError as e:
                op.outcome, op.error = "rejected", e.code
                self.history.anomalies.append(f"unexpected refusal of v{version} of {table.table_id}: {e!r}")
                break
            except CommitOwnerError as e:  # e.g. a 500: nobody can say whether it landed
                op.outcome, op.error = "unknown", f"{e.code}: {e.message[:200]}"
                continue
            else:
                if c.version != version:
                    self.history.anomalies.append(f"ack for v{c.version} when v{version} was asked")
                op.outcome, op.error = "ack", ""
                break
        op.ended = time.time()
        self.history.add(op)


    def one_transaction(self) -> None:
        """One multi-table transaction: one commit on each of ``tx_tables`` random tables, all or none."""
        tables = self.rng.sample(self.tables, self.tx_tables)
        latest = [self._latest(t) for t in tables]
        if any(x is None for x in latest):
            self.stop_event.wait(0.2)
            return
        key, started = str(uuid.uuid4()), time.time()
        ops, proposals = [], []
        for t, v in zip(tables, latest, strict=True):
            marker = uuid.uuid4().hex
            data = commit_body(marker, CLOCK.next())
            ops.append(Op(t.table_id, max(v or 0, 0) + 1, key, marker, hashlib.sha256(data).hexdigest(), started,
                          tx=key))
            proposals.append((t.table_id, max(v or 0, 0) + 1, data))
        outcome, error, attempts = "", "", 0
        for shift in range(len(self.clients)):
            attempts += 1
            try:
                got = self._client(shift).commit_transaction(proposals, idempotency_key=key)
            except (TransactionConflictError, TooManyUnbackfilledCommitsError) as e:
                outcome, error = "rejected", e.code
                break
            except (CommitStateUnknownError, UnavailableError) as e:
                outcome, error = "unknown", f"{e.code}: {e.message[:200]}"
                continue
            except CommitFailedError as e:
                outcome, error = "rejected", e.code
                self.history.anomalies.append(f"unexpected refusal of transaction {key}: {e!r}")
                break
            except CommitOwnerError as e:
                outcome, error = "unknown", f"{e.code}: {e.message[:200]}"
                continue
            else:
                for op in ops:
                    c = got.commits.get(op.table_id)
                    if c is None or c.version != op.version:
                        self.history.anomalies.append(f"transaction {key}: ack of {op.table_id} for "
                                                      f"{c and c.version} when v{op.version} was asked")
                outcome, error = "ack", ""
                break
        ended = time.time()
        for op in ops:
            op.outcome, op.error, op.attempts, op.ended = outcome, error, attempts, ended
            self.history.add(op)


Lister = Callable[[str], list[str]]


class Reader(threading.Thread):
    """Loops list + get_commits on every table; records versions going backwards and unresolved gaps."""

    def __init__(self, endpoints: Sequence[str], tables: Sequence[WorkloadTable], history: History,
                 stop: threading.Event, lister: Lister, *, timeout: float = 2.0) -> None:
        super().__init__(name="reader", daemon=True)
        self.endpoints = list(endpoints)
        self.tables = list(tables)
        self.history = history
        self.stop_event = stop
        self.lister = lister
        self.clients = [CommitOwnerClient(e, timeout=timeout, deadline=timeout, backoff_max=0.2) for e in endpoints]
        self.seen_latest: dict[str, int] = {}
        self.seen_listed: dict[str, int] = {}

    def _listed(self, t: WorkloadTable) -> int:
        versions = [v for n in self.lister(log_dir(t.location)) if (v := parse_delta_file(n)) is not None]
        return max(versions, default=-1)

    def run(self) -> None:
        i = 0
        while not self.stop_event.is_set():
            for t in self.tables:
                i += 1
                try:
                    self.check(t, self.clients[i % len(self.clients)])
                except (CommitOwnerError, OSError):
                    self.stop_event.wait(0.05)  # the fault of the moment; reads resume when it heals
            with self.history.lock:
                self.history.reader_rounds += 1

    def check(self, t: WorkloadTable, client: CommitOwnerClient) -> None:
        listed = self._listed(t)
        page = client.get_commits(t.table_id)
        latest = page.latest_table_version
        versions = [c.version for c in page.commits]
        v = self.history.reader_violations
        if versions and versions != list(range(versions[0], versions[0] + len(versions))):
            v.append(f"{t.table_id}: getCommits not contiguous: {versions}")
        if versions and versions[-1] != latest:
            v.append(f"{t.table_id}: last tracked {versions[-1]} != latest {latest}")

        def gap(listed_now: int) -> bool:
            if versions:
                return versions[0] > listed_now + 1
            return latest > listed_now

        if gap(listed):
            # A backfill landed between the listing and getCommits: list again (docs/lifecycle.md, the snapshot reader).
            listed = self._listed(t)
            if gap(listed):
                v.append(f"{t.table_id}: unresolved gap: listed through {listed}, tracked {versions}, latest {latest}")
            else:
                with self.history.lock:
                    self.history.reader_gaps_resolved += 1
        prev_latest = self.seen_latest.get(t.table_id, -1)
        if latest < prev_latest:
            v.append(f"{t.table_id}: latestTableVersion went back from {prev_latest} to {latest}")
        prev_listed = self.seen_listed.get(t.table_id, -1)
        if listed < prev_listed:
            v.append(f"{t.table_id}: published versions went back from {prev_listed} to {listed}")
        self.seen_latest[t.table_id] = max(prev_latest, latest)
        self.seen_listed[t.table_id] = max(prev_listed, listed)


class Workload:
    """W writers and one reader against ``endpoints`` until :meth:`stop`."""

    def __init__(self, endpoints: Sequence[str], tables: Sequence[WorkloadTable], lister: Lister, *,
                 writers: int = 4, timeout: float = 2.0, deadline: float = 6.0, seed: int = 0,
                 reader: bool = True, pause: float = 0.0, transactions: float = 0.0, tx_tables: int = 2) -> None:
        """``transactions``: the share of operations that are multi-table transactions of ``tx_tables``."""
        self.history = History()
        self._stop = threading.Event()
        self.writers = [Writer(i, endpoints, tables, self.history, self._stop, timeout=timeout,
                               deadline=deadline, seed=seed * 1000 + i, pause=pause, transactions=transactions,
                               tx_tables=tx_tables) for i in range(writers)]
        self.reader = Reader(endpoints, tables, self.history, self._stop, lister) if reader else None
        self.started = 0.0
        self.stopped = 0.0

    def start(self) -> Workload:
        self.started = time.time()
        for w in self.writers:
            w.start()
        if self.reader:
            self.reader.start()
        return self

    def stop(self, join_timeout: float = 60.0) -> History:
        self._stop.set()
        for th in [*self.writers, *([self.reader] if self.reader else [])]:
            th.join(join_timeout)
            if th.is_alive():
                self.history.anomalies.append(f"{th.name} did not stop within {join_timeout}s")
        self.stopped = time.time()
        return self.history

    def acks_since(self, t: float) -> int:
        return sum(1 for x in self.history.ack_times() if x > t)

    def wait_for_acks(self, n: int, since: float | None = None, timeout: float = 30.0) -> float:
        """Block until ``n`` more commits were acknowledged after ``since``; returns when the first one was."""
        since = time.time() if since is None else since
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            after = [x for x in self.history.ack_times() if x > since]
            if len(after) >= n:
                return after[0]
            time.sleep(0.02)
        raise AssertionError(f"fewer than {n} commits acknowledged within {timeout}s after the fault healed "
                             f"(unknown so far: {len(self.history.unknowns)}; anomalies: {self.history.anomalies[:3]})")
