"""The checker: what must hold after any workload, whatever faults ran during it.

Per table, from the ownership store (rows read straight from the database) and the log storage:

1. ratified versions are exactly base+1 .. latest, contiguous, one row (one file) each;
2. every ratified version has its bytes (the row's checksum) in its staged file (decision 67: the design
   card's shape; ``<v>.json`` never stands in for it);
3. every acknowledged commit is at the version it was acknowledged for, with its key and bytes (lost = 0);
4. every workload marker appears at most once in the log (duplicates = 0); an unknown outcome is present
   once or absent; a refused one is absent; nothing is in the log that no writer sent;
5. after a final backfill, every ``<v>.json`` is byte-identical to its ratified file;
6. delta-rs reads the table at the latest version with one file per ratified commit;
7. every multi-table transaction is in the log whole or not at all (partial_transactions = 0), an
   acknowledged one whole, each of its commits once; its row in ``transactions`` exists exactly when it is.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from client import CommitOwnerClient
from client.contract.errors import CommitOwnerError
from client.contract.layout import delta_file, delta_file_name, parse_staged_file
from harness.workload import History, Op, WorkloadTable, marker_of
from harness.world import Backend, delta_rs_table


@dataclass
class TableReport:
    table_id: str
    latest: int = -1
    ratified: int = 0
    orphans: int = 0


@dataclass
class CheckResult:
    acknowledged: int = 0
    unknown: int = 0
    unknown_present: int = 0
    unknown_absent: int = 0
    rejected: int = 0
    lost: int = 0
    duplicates: int = 0
    phantoms: int = 0
    ratified: int = 0
    orphans: int = 0
    transactions: int = 0  # multi-table transactions sent
    transactions_acknowledged: int = 0
    partial_transactions: int = 0
    reader_rounds: int = 0
    reader_gaps_resolved: int = 0
    violations: list[str] = field(default_factory=list)
    tables: list[TableReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("tables",)} | {
            "violations": self.violations[:50], "violation_count": len(self.violations)}

    def assert_ok(self) -> None:
        assert self.ok, "checker found violations:\n" + "\n".join(self.violations[:30])


def db_rows(database_url: str, table_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The table row and its commit rows, read straight from the ownership store."""
    from sqlalchemy import create_engine, text

    from coordinator.store.engine import sync_url

    engine = create_engine(sync_url(database_url))
    try:
        with engine.connect() as conn:
            t = conn.execute(text("SELECT base_version, latest_version, latest_backfilled_version, location, "
                                  "commit_dir FROM owned_tables WHERE table_id = :t"), {"t": table_id}).mappings().one()
            rows = conn.execute(text("SELECT version, file_name, idempotency_key, content_sha256 FROM commits "
                                     "WHERE table_id = :t ORDER BY version"), {"t": table_id}).mappings().all()
            return dict(t), [dict(r) for r in rows]
    finally:
        engine.dispose()


def final_backfill(endpoints: Sequence[str], tables: Sequence[WorkloadTable], timeout: float = 60.0) -> None:
    """backfill_to_version(latest) on every table through whichever endpoint answers."""
    end = time.monotonic() + timeout
    for t in tables:
        while True:
            last: Exception | None = None
            for e in endpoints:
                c = CommitOwnerClient(e, timeout=10, deadline=10)
                try:
                    latest = c.get_commits(t.table_id).latest_table_version
                    if latest > 0:
                        c.backfill_to_version(t.table_id, latest)
                    last = None
                    break
                except CommitOwnerError as err:
                    last = err
                finally:
                    c.close()
            if last is None:
                break
            if time.monotonic() > end:
                raise AssertionError(f"final backfill of {t.table_id} failed: {last!r}")
            time.sleep(0.5)


class _Files:
    """Reads and listings through one filesystem object (a fresh s3fs per call costs ~0.2 s on moto)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.fs = backend.fs()

    def read(self, uri: str) -> bytes:
        return self.fs.cat_file(self.backend._p(uri))

    def list(self, dir_uri: str) -> list[str]:
        path = self.backend._p(dir_uri)
        self.fs.invalidate_cache(path)  # adlfs ignores ``refresh`` and answers from its listings cache
        try:
            entries = self.fs.ls(path, detail=True, refresh=True)
        except FileNotFoundError:
            return []
        return sorted(e["name"].rsplit("/", 1)[-1] for e in entries if e.get("type") == "file")


def lister(backend: Backend):  # type: ignore[no-untyped-def]
    """A listing function for the workload's reader that keeps one filesystem object per thread."""
    import threading

    local = threading.local()

    def ls(dir_uri: str) -> list[str]:
        files = getattr(local, "files", None)
        if files is None:
            files = local.files = _Files(backend)
        return files.list(dir_uri)

    return ls


def check(backend: Backend, tables: Sequence[WorkloadTable], history: History, *,
          endpoints: Sequence[str] = (), backfill: bool = True, delta_rs: bool = True) -> CheckResult:
    """Run every check; ``endpoints`` (a live service) are used for the final backfill."""
    if backfill and endpoints:
        final_backfill(endpoints, tables)
    r = CheckResult()
    v = r.violations
    files = _Files(backend)
    r.violations.extend(history.reader_violations)
    r.violations.extend(f"workload anomaly: {a}" for a in history.anomalies)
    r.reader_rounds, r.reader_gaps_resolved = history.reader_rounds, history.reader_gaps_resolved
    ops = list(history.ops)
    r.acknowledged = sum(1 for o in ops if o.outcome == "ack")
    r.unknown = sum(1 for o in ops if o.outcome == "unknown")
    r.rejected = sum(1 for o in ops if o.outcome == "rejected")
    by_marker = {o.marker: o for o in ops}
    where: dict[str, list[tuple[str, int]]] = {}  # marker -> [(table, version)]

    for t in tables:
        trow, rows = db_rows(backend.database_url, t.table_id)
        rep = TableReport(t.table_id, latest=trow["latest_version"], ratified=len(rows))
        r.tables.append(rep)
        r.ratified += len(rows)
        base, latest = trow["base_version"], trow["latest_version"]
        versions = [x["version"] for x in rows]
        if versions != list(range(base + 1, latest + 1)):
            v.append(f"{t.table_id}: ratified versions are not {base + 1}..{latest}: {versions[:5]}..{versions[-5:]}")
        cdir = f"{t.location}/_delta_log/{trow['commit_dir']}"
        staged_names = set(files.list(cdir))
        ratified_names = {x["file_name"] for x in rows}
        rep.orphans = len(staged_names - ratified_names)
        r.orphans += rep.orphans
        row_at = {x["version"]: x for x in rows}
        marker_at: dict[int, str | None] = {}
        for x in rows:
            ver = x["version"]
            if x["file_name"] not in staged_names:
                v.append(f"{t.table_id} v{ver}: its staged file {x['file_name']} is missing")
                continue
            staged = files.read(f"{cdir}/{x['file_name']}")
            if hashlib.sha256(staged).hexdigest() != x["content_sha256"]:
                v.append(f"{t.table_id} v{ver}: ratified file bytes do not match the ratified checksum")
            staged_name = parse_staged_file(x["file_name"])
            if staged_name is None or staged_name.version != ver:
                # (the key is the row's: the name is fresh for every attempt, decision 43)
                v.append(f"{t.table_id} v{ver}: file name {x['file_name']} does not carry its version")
            if backfill:
                try:
                    published = files.read(delta_file(t.location, ver))
                except FileNotFoundError:
                    v.append(f"{t.table_id} v{ver}: {delta_file_name(ver)} missing after the final backfill")
                    published = staged
                if published != staged:
                    v.append(f"{t.table_id} v{ver}: <v>.json differs from the ratified file")
            m = marker_at[ver] = marker_of(staged)
            if m is None:
                v.append(f"{t.table_id} v{ver}: a commit without a workload marker")
                continue
            where.setdefault(m, []).append((t.table_id, ver))
            if m not in by_marker:
                r.phantoms += 1
                v.append(f"{t.table_id} v{ver}: marker {m} was never sent by a writer")
        for o in ops:
            if o.table_id != t.table_id or o.outcome != "ack":
                continue
            x = row_at.get(o.version)
            if x is None or x["idempotency_key"] != o.key or x["content_sha256"] != o.sha256:
                r.lost += 1
                v.append(f"LOST: ack of {o.marker} at {t.table_id} v{o.version} is not what the log holds there")
        if delta_rs and backfill and latest > base:
            try:
                dt = delta_rs_table(backend, t.location)
                if dt.version() != latest:
                    v.append(f"{t.table_id}: delta-rs reads version {dt.version()}, owner says {latest}")
                paths = set(dt.get_add_actions(flatten=True).column("path").to_pylist())
                want = {f"part-{marker_at.get(x)}.parquet" for x in range(base + 1, latest + 1)}
                if not want <= paths or len(paths) != len(want):
                    v.append(f"{t.table_id}: delta-rs sees {len(paths)} files, the log ratified {len(want)}")
            except Exception as e:  # noqa: BLE001 - any failure to read is a finding
                v.append(f"{t.table_id}: delta-rs cannot read the table: {type(e).__name__}: {e}")

    check_transactions(backend, ops, where, r)
    for m, places in where.items():
        if len(places) > 1:
            r.duplicates += len(places) - 1
            v.append(f"DUPLICATE: marker {m} is in the log {len(places)} times: {places}")
    for o in ops:
        present = o.marker in where
        if o.outcome == "unknown":
            if present:
                r.unknown_present += 1
            else:
                r.unknown_absent += 1
        elif o.outcome == "rejected" and present:
            v.append(f"refused op {o.marker} ({o.error}) is in the log at {where[o.marker]}")
        elif o.outcome == "ack" and present and where[o.marker][0] != (o.table_id, o.version):
            v.append(f"ack of {o.marker} for v{o.version} found at {where[o.marker]}")
    return r


def check_transactions(backend: Backend, ops: Sequence[Op], where: dict[str, list[tuple[str, int]]],
                       r: CheckResult) -> None:
    """Each multi-table transaction is in the log whole or not at all, and recorded exactly when it is."""
    groups: dict[str, list[Op]] = {}
    for o in ops:
        if o.tx:
            groups.setdefault(o.tx, []).append(o)
    if not groups:
        return
    recorded = ratified_transactions(backend.database_url)
    r.transactions = len(groups)
    for key, parts in groups.items():
        present = [o.marker in where for o in parts]
        if parts[0].outcome == "ack":
            r.transactions_acknowledged += 1
        if any(present) and not all(present):
            r.partial_transactions += 1
            r.violations.append(f"PARTIAL: transaction {key} ({parts[0].outcome}) has {sum(present)} of its "
                                f"{len(parts)} commits in the log")
        if all(present) != (key in recorded):
            r.violations.append(f"transaction {key}: in the log {all(present)}, recorded {key in recorded}")


def ratified_transactions(database_url: str) -> set[str]:
    """The ids of every ratified multi-table transaction, read straight from the ownership store."""
    from sqlalchemy import create_engine, text

    from coordinator.store.engine import sync_url

    engine = create_engine(sync_url(database_url))
    try:
        with engine.connect() as conn:
            return {str(x) for x, in conn.execute(text("SELECT id FROM transactions"))}
    finally:
        engine.dispose()


def recovery_times(ack_times: Sequence[float], heals: Sequence[float]) -> list[float | None]:
    """Seconds from each heal (service restarted, endpoint back) to the next acknowledged commit."""
    out = []
    for h in heals:
        after = [a for a in ack_times if a >= h]
        out.append(round(after[0] - h, 3) if after else None)
    return out
