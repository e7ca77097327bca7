"""Latency samples, percentiles and the per-commit work counters read from /metrics."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of ``samples``; NaN when empty."""
    if not samples:
        return math.nan
    s = sorted(samples)
    k = max(0, min(len(s) - 1, math.ceil(q / 100.0 * len(s)) - 1))
    return s[k]


@dataclass
class Sample:
    """What one scenario (or one side of it) measured."""

    latencies: list[float] = field(default_factory=list)  # seconds, per successful operation
    conflicts: int = 0  # answers that the version was taken (409, conflict=true)
    retries: int = 0  # other retryable refusals (backlog full, unavailable) that were retried
    failures: int = 0  # operations that gave up
    elapsed: float = 0.0
    per_writer: list[int] = field(default_factory=list)  # successful operations of each closed-loop writer

    @property
    def count(self) -> int:
        return len(self.latencies)

    def extend(self, other: Sample) -> None:
        """Add ``other``, a later slice of the same side (scenario 6 probes in turns)."""
        self.latencies += other.latencies
        self.conflicts += other.conflicts
        self.retries += other.retries
        self.failures += other.failures
        self.elapsed += other.elapsed
        self.per_writer = ([a + b for a, b in zip(self.per_writer, other.per_writer, strict=True)] if self.per_writer
                           else list(other.per_writer))

    def summary(self) -> dict[str, Any]:
        ms = [x * 1000.0 for x in self.latencies]
        return {
            "ops": self.count,
            "seconds": round(self.elapsed, 3),
            "per_second": round(self.count / self.elapsed, 1) if self.elapsed else 0.0,
            "p50_ms": _r(percentile(ms, 50)),
            "p95_ms": _r(percentile(ms, 95)),
            "p99_ms": _r(percentile(ms, 99)),
            "conflicts": self.conflicts,
            "retries": self.retries,
            "failures": self.failures,
            **({"fairness": fairness(self.per_writer)} if len(self.per_writer) > 1 else {}),
        }


def timed(fn: Callable[[], Any], repeats: int) -> Sample:
    """``fn`` once unmeasured (imports, connection pools and caches are not what is compared), then ``repeats``
    times, each call timed (scenarios 7 and 12: opens and scans)."""
    fn()
    s = Sample()
    t0 = time.perf_counter()
    for _ in range(repeats):
        a = time.perf_counter()
        fn()
        s.latencies.append(time.perf_counter() - a)
    s.elapsed = time.perf_counter() - t0
    return s


def fairness(counts: list[int]) -> dict[str, Any]:
    """How evenly writers shared the commits: each writer's share of them (smallest, largest; a fair share is
    1/writers) and Jain's index, (sum x)^2 / (n * sum x^2): 1 when all got the same, 1/n when one got all."""
    total, n = sum(counts), len(counts)
    if total == 0:
        return {"writers": n, "min_share": None, "max_share": None, "jain": None}
    return {"writers": n, "min_share": round(min(counts) / total, 4), "max_share": round(max(counts) / total, 4),
            "jain": round(total * total / (n * sum(c * c for c in counts)), 3)}


def _r(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 3)


COUNTERS = {
    "commit_owner_commits_total": "outcome",
    "commit_owner_storage_requests_total": "operation",
    "commit_owner_database_statements_total": None,
    "commit_owner_database_transactions_total": "end",
}


def parse_counters(text: str) -> dict[str, float]:
    """The counters the bench divides by commits, from a Prometheus exposition: ``name[label]`` -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name not in COUNTERS:
                continue
            label = COUNTERS[s.name]
            key = s.name if label is None else f"{s.name}[{s.labels.get(label, '')}]"
            out[key] = out.get(key, 0.0) + s.value
    return out


def per_commit(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Storage requests, statements and transactions per ratified commit between two scrapes."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(before) | set(after)}
    ok = d.get("commit_owner_commits_total[ok]", 0.0)
    if ok <= 0:
        return {}
    out = {"commits": ok}
    refused = sum(v for k, v in d.items() if k.startswith("commit_owner_commits_total[") and not k.endswith("[ok]"))
    out["refusals_per_commit"] = round(refused / ok, 3)
    for k, v in sorted(d.items()):
        if k.startswith("commit_owner_storage_requests_total["):
            out["storage_" + k.split("[", 1)[1].rstrip("]")] = round(v / ok, 3)
    out["storage_requests"] = round(sum(v for k, v in d.items() if k.startswith("commit_owner_storage_requests")) / ok, 3)
    out["db_statements"] = round(d.get("commit_owner_database_statements_total", 0.0) / ok, 3)
    out["db_transactions"] = round(sum(v for k, v in d.items()
                                       if k.startswith("commit_owner_database_transactions")) / ok, 3)
    # Each statement is a round trip; an explicit transaction adds two more (BEGIN, then COMMIT or ROLLBACK).
    out["db_round_trips"] = round(out["db_statements"] + 2 * out["db_transactions"], 3)
    return out
