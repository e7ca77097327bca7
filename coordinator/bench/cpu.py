"""CPU time of processes, read from ``/proc`` (Linux): the service's cost per commit, the load generator's share.

A scenario's CPU is the difference of two readings taken around it. The service is read as a process tree
(``serve`` and every live descendant, plus the children it already reaped), so worker processes count too.
Where ``/proc`` is missing (macOS) the readings are ``None`` and the figures are left out of the report.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    return text[text.rindex(")") + 2:].split()


def tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid``, its live descendants and the children it reaped; None without /proc."""
    root = _stat(pid)
    if root is None:
        return None
    # fields after the name: [0] state, [1] ppid, ..., [11] utime, [12] stime, [13] cutime, [14] cstime
    total = sum(int(x) for x in root[11:15])
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                children.setdefault(int(st[1]), []).append(int(entry))
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        st = _stat(child)
        if st is not None:
            total += int(st[11]) + int(st[12])
        todo.extend(children.get(child, []))
    return total / _TICK


def own_cpu_seconds() -> float:
    """User + system CPU seconds of this process (every thread)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


@dataclass
class CpuWindow:
    """CPU of the service tree and of this process (the load generator) over one scenario."""

    service_pid: int
    _service0: float | None = None
    _own0: float = 0.0
    _t0: float = 0.0

    def __enter__(self) -> CpuWindow:
        self._service0 = tree_cpu_seconds(self.service_pid)
        self._own0 = own_cpu_seconds()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.elapsed = time.perf_counter() - self._t0
        self.load_generator = own_cpu_seconds() - self._own0
        after = tree_cpu_seconds(self.service_pid)
        self.service = None if after is None or self._service0 is None else after - self._service0

    def figures(self, commits: int, requests: int) -> dict[str, float | None]:
        """Service CPU ms per ratified commit and cores used; the load generator's cores per 1,000 requests/s."""
        out: dict[str, float | None] = {"seconds": round(self.elapsed, 3), "requests": requests,
                                        "load_generator_cpu_s": round(self.load_generator, 3),
                                        "load_generator_cores": round(self.load_generator / self.elapsed, 3)}
        # cores per 1,000 req/s = (cpu / elapsed) / (requests / elapsed / 1000) = cpu seconds per request x 1000
        out["load_generator_cores_per_1k_rps"] = round(self.load_generator / requests * 1000, 3) if requests else None
        if self.service is not None:
            out["service_cpu_s"] = round(self.service, 3)
            out["service_cores"] = round(self.service / self.elapsed, 3)
            out["service_cpu_ms_per_commit"] = round(self.service / commits * 1000, 3) if commits else None
        return out
