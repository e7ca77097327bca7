"""`commit-owner store check`: the ownership store compared with storage, table by table; nothing is changed.

For each live table (a dropped one is the catalog's no more: skipped), from one recursive listing of its
``_delta_log`` and its commit rows:

* **ratified**: every version from ``base + 1`` to the latest has its commit row (``row-missing``), and its staged
  file ``_delta_log/<commitDir>/<file_name>`` is there with the size and SHA-256 the row recorded
  (``staged-missing``, ``staged-differs``). A missing staged file is no mismatch while the row keeps the commit's
  bytes (an unpublished owner-written commit: it is written from the row before any reader is handed it,
  decision 43), nor below the log's cleanup boundary (below);
* **published**: every version from the table's base to its backfilled version has ``<v>.json``
  (``published-missing``), and every ``<v>.json`` of a ratified version holds the bytes the row recorded
  (``published-differs``: a foreign file; the backfiller fences the table when it meets one);
* **nothing beyond**: no ``<v>.json`` above the latest version (``log-ahead``: the store is behind the log, e.g.
  restored from an older backup; `commit-owner tables reconcile` adopts them). Not checked for a RELEASED table,
  whose log filesystem writers go on with.

**The cleanup boundary.** `commit-owner maintain`'s log cleanup (``coordinator/ops/logcleanup.py``) deletes
``<v>.json``, checkpoints and staged files of versions below a complete checkpoint of a published version, once
they are older than the retention. So a version below the newest complete checkpoint at or below the backfilled
version may have lost both files: counted as cleaned, not a mismatch (a reader starts from that checkpoint). A file
that is still there is checked all the same.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

from client.contract.layout import LOG_DIR, delta_file_name, log_dir, parse_delta_file
from client.snapshot import complete_checkpoints
from coordinator.ops.context import opened, resolve_table
from coordinator.runtime.settings import Settings
from coordinator.storage import FileInfo, StorageRouter
from coordinator.store import CommitRow, OwnershipStore, TableRow

#: Commit rows read per statement, and files read at once.
PAGE = 1000
READS_AT_ONCE = 16
#: Problems listed per table (all are counted).
LISTED = 1000


@dataclass(frozen=True)
class Problem:
    kind: str  # row-missing | staged-missing | staged-differs | published-missing | published-differs | log-ahead
    version: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "version": self.version, "message": self.message}


@dataclass
class TableCheck:
    table: TableRow
    problems: list[Problem] = field(default_factory=list)
    problem_count: int = 0
    ratified: int = 0  # commit rows checked
    published: int = 0  # <v>.json files checked
    cleaned_below: int | None = None  # versions below it may have been removed by log cleanup
    cleaned: int = 0  # files absent below that boundary
    in_row: int = 0  # staged files absent while their row keeps the bytes
    ahead: list[int] = field(default_factory=list)  # published versions beyond the latest one
    skipped: str | None = None

    def add(self, kind: str, version: int, message: str) -> None:
        self.problem_count += 1
        if len(self.problems) < LISTED:
            self.problems.append(Problem(kind, version, message))

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def to_json(self) -> dict[str, Any]:
        t = self.table
        return {"tableId": t.table_id, "name": t.label, "location": t.location, "status": t.status,
                "latestVersion": t.latest_version, "latestBackfilledVersion": t.latest_backfilled_version,
                "ok": self.ok, "skipped": self.skipped, "ratifiedChecked": self.ratified,
                "publishedChecked": self.published, "cleanedBelow": self.cleaned_below, "cleanedFiles": self.cleaned,
                "stagedInRow": self.in_row,
                "aheadVersions": [self.ahead[0], self.ahead[-1]] if self.ahead else None,
                "problemCount": self.problem_count, "problems": [p.to_json() for p in sorted(
                    self.problems, key=lambda p: (p.version, p.kind))]}


class _Log:
    """One listing of a table's ``_delta_log``: its published commits, its staged files, its cleanup boundary."""

    def __init__(self, t: TableRow, files: list[FileInfo]) -> None:
        root = f"{log_dir(t.location)}/"
        names = {f.path[len(root):]: f for f in files if f.path.startswith(root)}
        top = [n for n in names if "/" not in n]
        self.deltas = {v: names[n] for n in top if (v := parse_delta_file(n)) is not None}
        prefix = f"{t.commit_dir}/"
        self.staged = {n[len(prefix):]: f for n, f in names.items() if n.startswith(prefix) and n.count("/") == 1}
        self.boundary = max((v for v in complete_checkpoints(top) if v <= t.latest_backfilled_version), default=-1)


async def _sha(storage: StorageRouter, uri: str) -> str | None:
    try:
        return hashlib.sha256(await storage.for_uri(uri).read(uri)).hexdigest()
    except FileNotFoundError:
        return None


async def _row(storage: StorageRouter, t: TableRow, log: _Log, r: CommitRow, rep: TableCheck) -> None:
    """The staged file and ``<v>.json`` of one ratified version."""
    v = r.version
    rep.ratified += 1
    staged = log.staged.get(r.file_name)
    where = f"{LOG_DIR}/{t.commit_dir}/{r.file_name}"
    if staged is None:
        if v < log.boundary:
            rep.cleaned += 1
        elif r.body is not None:
            rep.in_row += 1
        else:
            rep.add("staged-missing", v, f"{where}, the staged file of ratified version {v}, is missing")
    elif staged.size != r.file_size or await _sha(storage, staged.path) not in (r.content_sha256, None):
        rep.add("staged-differs", v, f"{where} does not hold the bytes ratified as version {v} "
                                     f"({staged.size} bytes, recorded {r.file_size}, or another SHA-256)")
    published = log.deltas.get(v)
    name = f"{LOG_DIR}/{delta_file_name(v)}"
    if published is None:
        if v <= t.latest_backfilled_version:
            if v < log.boundary:
                rep.cleaned += 1
            else:
                rep.add("published-missing", v, f"{name} is missing, but the store records version {v} as published")
        return
    rep.published += 1
    if published.size != r.file_size or await _sha(storage, published.path) not in (r.content_sha256, None):
        rep.add("published-differs", v, f"{name} does not hold the bytes ratified as version {v}: a foreign file "
                                        "(docs/runbook.md, a fenced table)")


async def check_table(store: OwnershipStore, storage: StorageRouter, t: TableRow) -> TableCheck:
    """Compare ``t``'s record with its log (the module says what is checked). Raises UnavailableError."""
    rep = TableCheck(t)
    if t.dropped_at is not None:
        rep.skipped = "dropped: its log is no longer the owner's"
        return rep
    log = _Log(t, await storage.for_uri(t.location).walk(log_dir(t.location)))
    rep.cleaned_below = log.boundary if log.boundary >= 0 else None
    if t.owner_ratified and t.base_version not in log.deltas and t.base_version >= log.boundary:
        rep.add("published-missing", t.base_version, f"{LOG_DIR}/{delta_file_name(t.base_version)}, the table's "
                "first version, is missing")
    gate = asyncio.Semaphore(READS_AT_ONCE)

    async def one(r: CommitRow) -> None:
        async with gate:
            await _row(storage, t, log, r, rep)

    expected = t.base_version + 1
    while expected <= t.latest_version:
        _, rows = await store.get_commits(t.table_id, expected, t.latest_version, backfilled=True, limit=PAGE)
        for r in rows:
            for v in range(expected, r.version):
                rep.add("row-missing", v, f"the store has no commit row for version {v} (latest {t.latest_version})")
            expected = r.version + 1
        await asyncio.gather(*(one(r) for r in rows))
        if len(rows) < PAGE:
            for v in range(expected, t.latest_version + 1):
                rep.add("row-missing", v, f"the store has no commit row for version {v} (latest {t.latest_version})")
            break
    rep.ahead = sorted(v for v in log.deltas if v > t.latest_version)
    if rep.ahead and t.status != "RELEASED":
        first, last = rep.ahead[0], rep.ahead[-1]
        rep.add("log-ahead", first, f"{LOG_DIR}/{delta_file_name(first)} .. {delta_file_name(last)} "
                f"({len(rep.ahead)} file(s)) are published beyond the store's latest version {t.latest_version}: "
                f"the store is behind the log (restored from an older backup?); commits are refused until "
                f"`commit-owner tables reconcile {t.table_id}` adopts them")
    return rep


async def check_store(settings: Settings, ref: str | None = None) -> dict[str, Any]:
    """Check every table (or the one ``ref`` names). Returns the report: ``ok``, and each table's. Raises
    TableNotFoundError, UnavailableError."""
    async with opened(settings) as (store, storage):
        tables = [await resolve_table(store, ref)] if ref is not None else await store.list_tables()
        reports = [await check_table(store, storage, t) for t in tables]
    bad = [r for r in reports if not r.ok]
    return {"ok": not bad, "tables": [r.to_json() for r in reports], "checked": len(reports),
            "mismatched": len(bad)}


__all__ = ["Problem", "TableCheck", "check_store", "check_table"]
