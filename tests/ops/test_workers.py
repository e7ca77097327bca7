"""`serve --workers 2`: two real service processes on one port, one database, one log storage."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from backfill import nudges
from client import CommitFailedError
from tests.conftest import make_backend
from tests.support import ROOT, Backend, Service, actions, create_owned_table, delta_file, free_port, ndjson, wait_until


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def two_workers(request: pytest.FixtureRequest) -> Iterator[Service]:
    backend = make_backend(request, request.param, "local", f"workers-{request.param}")
    svc = Service(backend, workers=2).start()
    wait_until(lambda: len(svc.worker_pids()) == 2 and _both_answer(svc), what="both workers to answer")
    yield svc
    svc.stop()


def _answering_pids(svc: Service) -> set[int]:
    """The pids whose access-log lines are in the service's log."""
    return {r["pid"] for r in _records(svc) if r.get("logger") == "commit_owner.access"}


def _records(svc: Service) -> list[dict]:
    return [json.loads(line) for line in svc.log_text().splitlines() if line.startswith("{")]


def _both_answer(svc: Service) -> bool:
    for _ in range(20):  # a new connection each time: the kernel spreads them over the workers
        requests.get(svc.endpoint + "/readyz", timeout=5)
    return set(svc.worker_pids()) <= _answering_pids(svc)


def _metric(svc: Service, name: str, labels: str = "") -> float:
    text = requests.get(svc.endpoint + "/metrics", timeout=10).text
    m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def _written(svc: Service, name: str, labels: str, expected: float) -> None:
    """Until a scrape shows ``expected``: a worker writes its counts to the shared files a moment after it
    counted them (``TALLY_SECONDS``, decision 63), the one a scrape reaches writes its own first."""
    wait_until(lambda: _metric(svc, name, labels) == expected, timeout=10, what=f"{name}{labels} == {expected}")


def test_concurrent_commits_through_two_workers_land_once_with_contiguous_versions_published_in_order(
        two_workers: Service) -> None:
    svc, backend = two_workers, two_workers.backend
    table_id, loc = create_owned_table(svc)
    writers, per_writer = 6, 6
    acked: dict[int, list[bytes]] = {}
    lock = threading.Lock()
    stop = threading.Event()
    gaps: list[list[int]] = []

    def watch_log() -> None:
        # Published versions must always be 0..k: a later version never appears before an earlier one.
        log_dir = backend._p(f"{loc}/_delta_log")
        while not stop.is_set():
            names = os.listdir(log_dir)
            seen = sorted(int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit())
            if seen != list(range(len(seen))):
                gaps.append(seen)
            time.sleep(0.002)

    def writer(w: int) -> None:
        done = 0
        while done < per_writer:
            with svc.client() as c:  # a fresh connection per commit: both workers ratify
                v = max(c.get_commits(table_id).latest_table_version + 1, 1)
                acts = actions(1, tag=f"w{w}-")
                try:
                    c.commit(table_id, v, acts)
                except CommitFailedError as e:
                    assert e.conflict or "inCommitTimestamp" in e.message, e
                    continue
            with lock:
                acked.setdefault(v, []).append(ndjson(acts))
            done += 1

    watcher = threading.Thread(target=watch_log)
    watcher.start()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = writers * per_writer
    try:
        wait_until(lambda: svc.client().get_table(table_id).latest_backfilled_version == total, timeout=30,
                   what="the background backfill of every version")
    finally:
        stop.set()
        watcher.join()
    assert gaps == []
    assert sorted(acked) == list(range(1, total + 1)) and all(len(b) == 1 for b in acked.values())
    for v, [body] in acked.items():
        assert backend.read(delta_file(loc, v)) == body
    commit_pids = {r["pid"] for r in _records(svc) if r.get("logger") == "commit_owner.access"
                   and r.get("table_id") == table_id and r.get("method") == "POST" and r.get("outcome") == "ok"}
    assert commit_pids == set(svc.worker_pids())  # both workers ratified some of them


def test_metrics_through_any_worker_sum_every_workers_counters(two_workers: Service) -> None:
    svc = two_workers
    table_id, _loc = create_owned_table(svc)
    before = _metric(svc, "commit_owner_commits_total", '{outcome="ok"}')
    n = 10
    for v in range(1, n + 1):
        with svc.client() as c:
            c.commit(table_id, v, actions())
    _written(svc, "commit_owner_commits_total", '{outcome="ok"}', before + n)
    scrapes = [_metric(svc, "commit_owner_commits_total", '{outcome="ok"}') for _ in range(8)]
    assert scrapes == [before + n] * 8
    assert set(svc.worker_pids()) <= {r["pid"] for r in _records(svc) if r.get("path") == "/metrics"}
    # The figures read from the database are read by whichever worker answers: once, not per worker.
    text = requests.get(svc.endpoint + "/metrics", timeout=10).text
    assert len(re.findall(r'^commit_owner_tables{status="ACTIVE"} ', text, re.M)) == 1


def test_a_killed_worker_is_restarted_and_the_totals_survive_it(two_workers: Service) -> None:
    svc = two_workers
    table_id, _loc = create_owned_table(svc)
    before = _metric(svc, "commit_owner_commits_total", '{outcome="ok"}')
    for v in (1, 2, 3):
        with svc.client() as c:
            c.commit(table_id, v, actions())
    total = before + 3
    _written(svc, "commit_owner_commits_total", '{outcome="ok"}', total)  # both workers' counts are in the files
    victim, survivor = svc.worker_pids()
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(svc.worker_pids()) == 2 and victim not in svc.worker_pids(), timeout=30,
               what="the supervisor to start a new worker")
    assert survivor in svc.worker_pids()
    wait_until(lambda: _both_answer(svc), timeout=30, what="the new worker to answer")
    with svc.client() as c:
        assert c.commit(table_id, 4, actions()).version == 4
    _written(svc, "commit_owner_commits_total", '{outcome="ok"}', total + 1)  # the dead one's count stays
    assert any(r.get("msg", "").startswith(f"worker 0 (pid {victim}) died (signal SIGKILL)")
               or r.get("msg", "").startswith(f"worker 1 (pid {victim}) died (signal SIGKILL)") for r in _records(svc))


def test_sigterm_stops_every_worker_and_removes_the_metrics_folder(request: pytest.FixtureRequest,
                                                                    tmp_path: Path) -> None:
    svc = Service(make_backend(request, "sqlite", "local", "workers-term"), workers=2,
                  extra_env={"TMPDIR": str(tmp_path)}).start()
    try:
        wait_until(lambda: len(svc.worker_pids()) == 2, what="two workers")
        pids = svc.worker_pids()
        [metrics_dir] = tmp_path.glob("commit-owner-metrics-*")
        assert metrics_dir.is_dir() and any(metrics_dir.iterdir())
        # each worker's backfiller listens for nudges from the other (decision 66), on a socket named after it
        sockets = Path(nudges.folder(str(tmp_path)))

        def socket_pids() -> set[int]:
            return {int(p.name.split("-")[0]) for p in sockets.glob("*")}

        wait_until(lambda: set(pids) <= socket_pids(), timeout=10, what="a nudge socket per worker")
        assert svc.proc is not None
        svc.proc.send_signal(signal.SIGTERM)
        assert svc.proc.wait(30) == 0
        for pid in pids:
            assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
        assert not metrics_dir.exists() and not set(pids) & socket_pids()
        serve = [(r["pid"], r["msg"]) for r in _records(svc) if r["logger"] == "commit_owner.serve"]
        assert {pid for pid, msg in serve if msg == "commit-owner stopped"} == {*pids, svc.proc.pid}
        assert serve[-1] == (svc.proc.pid, "commit-owner stopped")
    finally:
        svc.stop()


@pytest.mark.parametrize("problem", ["database", "port"])
def test_workers_that_cannot_start_give_one_clear_error_and_exit_2(request: pytest.FixtureRequest,
                                                                  problem: str, tmp_path: Path) -> None:
    backend: Backend = make_backend(request, "sqlite", "local", "workers-bad")
    env = {**os.environ, **backend.env(), "COMMIT_OWNER_WORKERS": "2", "COMMIT_OWNER_HOST": "127.0.0.1",
           "TMPDIR": str(tmp_path)}
    holder = None
    if problem == "database":
        env["COMMIT_OWNER_DATABASE_URL"] = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"
        env["COMMIT_OWNER_PORT"] = str(free_port())
    else:
        holder = Service(backend, workers=2).start()
        env["COMMIT_OWNER_PORT"] = str(holder.port)
    try:
        res = subprocess.run([sys.executable, "-m", "coordinator", "serve"], env=env, cwd=str(ROOT),
                             capture_output=True, text=True, timeout=60)
    finally:
        if holder is not None:
            holder.stop()
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert res.returncode == 2, res.stderr
    assert len(errors) == 1, res.stderr
    assert ("cannot use the database" in errors[0]) if problem == "database" else ("address already in use" in errors[0])
    assert "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # the metrics folder of the workers that never ran is gone too
