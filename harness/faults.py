"""Glue for the fault tests and scripts/chaos: tables, services, a fault log with recovery times."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from harness.checker import CheckResult, recovery_times
from harness.workload import WorkloadTable
from harness.world import Backend, Service, create_owned_table


def make_tables(service: Service, n: int) -> list[WorkloadTable]:
    out = []
    for _ in range(n):
        tid, loc = create_owned_table(service)
        out.append(WorkloadTable(tid, loc))
    return out


def start_services(backend: Backend, n: int, env: dict[str, str] | None = None, *, workers: int = 1) -> list[Service]:
    """``n`` services on one database and storage (high availability), each of ``workers`` processes."""
    base = {"COMMIT_OWNER_LOG_LEVEL": "WARNING", "COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS": "3",
            # A killed process keeps its tables' backfill leases until they expire: keep that short here.
            "COMMIT_OWNER_BACKFILL_LEASE_SECONDS": "3"}
    base.update(env or {})
    svcs = [Service(backend, extra_env=dict(base), workers=workers) for _ in range(n)]
    with ThreadPoolExecutor(n) as pool:  # start them side by side: each takes ~2 s to import and bind
        futures = [pool.submit(s.start) for s in svcs]
        errors = [f.exception() for f in futures]
    if any(errors):
        for s in svcs:
            s.stop()
        raise next(e for e in errors if e)
    return svcs


@dataclass
class FaultEvent:
    name: str
    injected: float
    healed: float = 0.0
    recovery_seconds: float | None = None


@dataclass
class FaultLog:
    events: list[FaultEvent] = field(default_factory=list)

    def inject(self, name: str) -> FaultEvent:
        ev = FaultEvent(name, time.time())
        self.events.append(ev)
        return ev

    @staticmethod
    def heal(ev: FaultEvent) -> None:
        ev.healed = time.time()

    def fill_recovery(self, ack_times: Sequence[float]) -> None:
        rec = recovery_times(ack_times, [e.healed or e.injected for e in self.events])
        for e, r in zip(self.events, rec, strict=True):
            e.recovery_seconds = r

    def summary(self) -> list[dict[str, Any]]:
        return [{"fault": e.name, "down_seconds": round((e.healed or e.injected) - e.injected, 3),
                 "recovery_seconds": e.recovery_seconds} for e in self.events]


def report(title: str, result: CheckResult, faults: FaultLog | None = None,
           extra: dict[str, Any] | None = None) -> str:
    """One line of figures, printed by the tests (pytest -s) and by scripts/chaos; ``extra`` is added as is."""
    d = {"run": title, "acknowledged": result.acknowledged, "unknown": result.unknown,
         "unknown_present": result.unknown_present, "rejected": result.rejected, "lost": result.lost,
         "duplicates": result.duplicates, "ratified": result.ratified, "orphans": result.orphans,
         "reader_rounds": result.reader_rounds, "violations": len(result.violations)}
    if result.transactions:
        d.update(transactions=result.transactions, transactions_acknowledged=result.transactions_acknowledged,
                 partial_transactions=result.partial_transactions)
    if faults is not None:
        d["faults"] = faults.summary()
    d.update(extra or {})
    line = json.dumps(d)
    print("\nRELIABILITY " + line)
    return line
