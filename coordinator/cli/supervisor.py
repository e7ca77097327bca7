"""`serve --workers N`: a supervising parent and N forked service processes on one port.

The parent checks the database and the port once (so a bad URL or a taken port is one clear line, not N),
then forks the workers. Each worker builds its own app (its own database pool, storage clients, backfiller)
and binds its own socket to the same address with SO_REUSEPORT; it only starts listening once its app has
started, so the kernel never hands a connection to a worker that cannot answer yet (docs/decisions.md).
The parent keeps a bound, non-listening SO_REUSEPORT socket on the port for its whole life: another
`serve` on the same port is refused, as with one process.

The parent:

* exits 2 when a worker dies before it started (the workers already started are stopped first);
* restarts a worker that dies later, after a backoff that grows while restarts keep failing;
* forwards SIGTERM / SIGINT to every worker, which stops as single-process `serve` does (requests in
  flight are answered), and exits 0 once all have stopped;
* takes its workers down with it if it is killed itself (PR_SET_PDEATHSIG).

Metrics: every worker writes its counters to files of a fresh ``PROMETHEUS_MULTIPROC_DIR`` (removed at exit),
and a scrape through any worker sums them (coordinator/runtime/metrics.py).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import wait
from types import FrameType
from typing import Any

from coordinator.cli.serve import Address, open_sockets
from coordinator.runtime.settings import Settings

log = logging.getLogger("commit_owner.serve")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
STABLE_SECONDS = 10.0  # a worker that ran this long before dying is restarted at once
MAX_BACKOFF_SECONDS = 30.0
_PR_SET_PDEATHSIG = 1


@contextmanager
def metrics_dir(workers: int) -> Iterator[str | None]:
    """A fresh folder for the workers' metric files when ``workers`` > 1 (else None), named in the environment
    before prometheus_client is imported (it picks its multiprocess value class at import). On the way out the
    folder is removed and the environment is as it was: a `serve` run inside another process (a test's
    CliRunner) must not leave later subprocesses pointing at a folder that is gone."""
    if workers < 2:
        yield None
        return
    previous = os.environ.get(MULTIPROC_ENV)
    path = tempfile.mkdtemp(prefix="commit-owner-metrics-")
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if previous is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous


@dataclass
class _Slot:
    index: int
    proc: Any = None  # multiprocessing.Process
    ready: Any = None  # the read end of the worker's "started" pipe, until it said so or closed
    started: bool = False
    started_at: float = 0.0
    failures: int = 0
    restart_at: float | None = None
    signalled: int = 0  # the pid already sent SIGTERM: a second one would cut its graceful stop short


class Supervisor:
    """Runs ``n`` workers of ``settings`` on ``addresses`` until a signal; :meth:`run` returns the exit code."""

    def __init__(self, settings: Settings, n: int, addresses: list[Address], *, metrics_dir: str | None,
                 app_factory: Callable[[Settings], Any] | None = None) -> None:
        self.settings = settings
        self.app_factory = app_factory  # what each worker serves; create_app by default
        self.addresses = addresses
        self.metrics_dir = metrics_dir
        self.slots = [_Slot(i) for i in range(n)]
        self.stopping = False
        self._ctx = multiprocessing.get_context("fork")
        self._holders: list[socket.socket] = []

    # -- the parent -------------------------------------------------------------------------------

    def run(self) -> int:
        try:
            # Keep the port for the service's whole life (bound, never listening: it gets no connections).
            self._holders = open_sockets(self.addresses, reuse_port=True, listen=False)
            previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
            try:
                code = self._start_all()
                if code == 0:
                    self._watch()
                return code
            finally:
                self._stop_all()
                for s, h in previous.items():
                    signal.signal(s, h)
                log.info("commit-owner stopped")
        finally:
            for sock in self._holders:
                sock.close()
            if self.metrics_dir:
                shutil.rmtree(self.metrics_dir, ignore_errors=True)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if not self.stopping:
            log.info("%s: stopping %d workers gracefully", signal.Signals(signum).name, len(self.slots))
        self.stopping = True
        self._forward(signal.SIGTERM)

    def _forward(self, signum: int) -> None:
        for slot in self.slots:
            if slot.proc is not None and slot.proc.exitcode is None and slot.signalled != slot.proc.pid:
                slot.signalled = slot.proc.pid
                try:
                    os.kill(slot.proc.pid, signum)
                except ProcessLookupError:
                    pass

    def _spawn(self, slot: _Slot) -> None:
        read_end, write_end = os.pipe()
        proc = self._ctx.Process(target=_worker_main, name=f"commit-owner-worker-{slot.index}",
                                 args=(self, slot.index, write_end, read_end, os.getpid()))
        proc.start()
        os.close(write_end)
        slot.proc, slot.ready, slot.started, slot.restart_at = proc, os.fdopen(read_end, "rb", 0), False, None
        slot.started_at = time.monotonic()

    def _start_all(self) -> int:
        """Start every worker and wait until each has started; 0, or the exit code when one could not start."""
        for slot in self.slots:
            self._spawn(slot)
        while not self.stopping and not all(s.started for s in self.slots):
            waiting = {s.ready: s for s in self.slots if s.ready is not None}
            dead = {s.proc.sentinel: s for s in self.slots}
            for obj in wait([*waiting, *dead], timeout=0.5):
                if obj in waiting:
                    self._read_started(waiting[obj])
                elif not dead[obj].started:
                    slot = dead[obj]
                    slot.proc.join()
                    code = slot.proc.exitcode
                    print(f"error: worker {slot.index} could not start ({_how(code)}); stopping the others "
                          "(its error is above)", file=sys.stderr, flush=True)
                    return code if code in (2, 3) else 2
        if not self.stopping:
            where = ", ".join(_url(a) for a in self.addresses)
            log.info("commit-owner listening on %s with %d workers (pids %s)", where, len(self.slots),
                     " ".join(str(s.proc.pid) for s in self.slots))
        return 0

    def _read_started(self, slot: _Slot) -> None:
        """The worker's one byte once its app started; end of file when it died first (its sentinel tells)."""
        assert slot.ready is not None
        slot.started = slot.ready.read(1) == b"1"
        slot.ready.close()
        slot.ready = None

    def _watch(self) -> None:
        """Restart workers that die, until a signal."""
        while not self.stopping:
            now = time.monotonic()
            objs: list[Any] = []
            for slot in self.slots:
                if slot.restart_at is not None:
                    if now >= slot.restart_at:
                        self._spawn(slot)
                    continue
                objs.append(slot.proc.sentinel)
                if slot.ready is not None:
                    objs.append(slot.ready)
            due = [s.restart_at for s in self.slots if s.restart_at is not None]
            timeout = max(0.0, min([*due, now + 0.5]) - now)
            ready = wait(objs, timeout=timeout)
            for slot in self.slots:
                if slot.ready is not None and slot.ready in ready:
                    self._read_started(slot)
                if slot.restart_at is None and slot.proc.sentinel in ready and not self.stopping:
                    self._reap(slot)

    def _reap(self, slot: _Slot) -> None:
        slot.proc.join()
        ran = time.monotonic() - slot.started_at
        self._forget_metrics(slot.proc.pid)
        if slot.ready is not None:
            slot.ready.close()
            slot.ready = None
        slot.failures = 0 if ran >= STABLE_SECONDS else slot.failures + 1
        delay = 0.0 if slot.failures == 0 else min(MAX_BACKOFF_SECONDS, 0.5 * 2 ** (slot.failures - 1))
        log.warning("worker %d (pid %d) died (%s) after %.1f s; restarting it in %.1f s", slot.index, slot.proc.pid,
                    _how(slot.proc.exitcode), ran, delay)
        slot.restart_at = time.monotonic() + delay

    def _forget_metrics(self, pid: int) -> None:
        if self.metrics_dir:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(pid, self.metrics_dir)  # its live gauges (requests in flight) go

    def _stop_all(self) -> None:
        """SIGTERM every worker, wait for the graceful stops, SIGKILL what is left after the grace."""
        self._forward(signal.SIGTERM)
        deadline = time.monotonic() + self.settings.shutdown_grace_seconds + 15.0
        for slot in self.slots:
            if slot.proc is None:
                continue
            slot.proc.join(max(0.0, deadline - time.monotonic()))
            if slot.proc.exitcode is None:
                log.error("worker %d (pid %d) did not stop in time; killing it", slot.index, slot.proc.pid)
                slot.proc.kill()
                slot.proc.join(5)
            if slot.ready is not None:
                slot.ready.close()
                slot.ready = None


# -- a worker --------------------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """SIGKILL this worker when the supervisor dies (killed outright, it forwards nothing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the worker outlives a killed parent until it is stopped
    if os.getppid() != parent:
        os._exit(1)  # the parent died before prctl took hold


def _worker_main(sup: Supervisor, index: int, ready_fd: int, parent_read_fd: int, parent: int) -> None:
    _die_with_parent(parent)
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_DFL)  # the parent's handlers came along with fork; aiohttp sets its own
    os.setpgid(0, 0)  # a terminal's Ctrl-C reaches the parent only, which forwards one SIGTERM
    os.close(parent_read_fd)
    for sock in sup._holders:
        sock.close()
    for slot in sup.slots:  # the other workers' pipes came along with fork
        if slot.ready is not None:
            slot.ready.close()
    from coordinator.api import create_app
    from coordinator.cli.exit_codes import classify
    from coordinator.cli.serve import run_service

    try:
        socks = open_sockets(sup.addresses, reuse_port=True, listen=False)  # asyncio listens once the app started
        app = (sup.app_factory or create_app)(sup.settings)

        async def _started(_app: Any) -> None:
            os.write(ready_fd, b"1")
            os.close(ready_fd)

        app.on_startup.append(_started)  # after the cleanup contexts: database, storage, backfiller are up
        run_service(app, sup.settings, socks)
    except Exception as e:  # noqa: BLE001 - one line and an exit code, as the CLI does
        known = classify(e)
        if known is None:
            log.exception("worker %d failed", index)
            sys.exit(1)
        print(f"error: {known[1]}", file=sys.stderr, flush=True)
        sys.exit(known[0])


def _how(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"


def _url(a: Address) -> str:
    host, port = a[3]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
