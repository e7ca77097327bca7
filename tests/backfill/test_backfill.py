"""The backfiller through `commit-owner` processes: crash safety, fencing as the process reports it, several
processes on one database, the ops command, the standalone worker, lease takeover and retries in the
background. What needs no process of its own (bookkeeping, delta-rs reads, the backlog cap, the release
commit, repair, fencing, leases) runs on every backend in tests/backfill/test_inprocess.py."""

from __future__ import annotations

import json
import threading
import time

import pytest

from client import (
    CommitFailedError,
    ForeignCommitFileError,
    TableNotAcceptingCommitsError,
)
from harness.storage_faults import STORAGE_FAULTS
from tests.support import (
    Backend,
    Service,
    actions,
    create_owned_table,
    delta_file,
    delta_rs_table,
    ndjson,
    wait_until,
)


def published_versions(backend: Backend, loc: str) -> list[int]:
    return sorted(int(n.split(".")[0]) for n in backend.list(f"{loc}/_delta_log") if n.endswith(".json"))


@pytest.fixture
def own_backend(request: pytest.FixtureRequest) -> Backend:
    """A database of its own: no other service's backfiller may touch these tables."""
    from tests.conftest import make_backend

    return make_backend(request, "sqlite", "local", f"own-{request.node.name[:40]}")


@pytest.fixture
def no_backfill_service(own_backend: Backend):
    svc = Service(own_backend, extra_env={"COMMIT_OWNER_BACKFILL": "false",
                                            "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": "1000"}).start()
    yield svc
    svc.stop()


@pytest.mark.slow
def test_backfill_publishes_in_order_and_survives_sigkill(own_backend: Backend) -> None:
    """500 ratified commits; the backfilling process is SIGKILLed mid-way and restarted."""
    b = own_backend
    svc = Service(b, extra_env={"COMMIT_OWNER_BACKFILL": "false",
                                "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": "1000"}).start()
    try:
        table_id, loc = create_owned_table(svc)
        c = svc.client()
        bodies = {}
        for v in range(1, 501):
            acts = actions(1)
            c.commit(table_id, v, acts)
            bodies[v] = ndjson(acts)
    finally:
        svc.stop()
    worker = Service(b).start()  # backfill on: it starts on the backlog at once (the sweep)
    wait_until(lambda: len(published_versions(b, loc)) > 20, what="backfill under way")
    worker.kill()
    mid = published_versions(b, loc)
    assert mid == list(range(0, len(mid)))  # a prefix: never v+1 without v
    assert len(mid) < 501, "the kill came too late to interrupt the backfill"
    worker = Service(b).start()
    try:
        c = worker.client()
        wait_until(lambda: c.get_table(table_id).latest_backfilled_version == 500, timeout=120, what="full backfill")
        assert published_versions(b, loc) == list(range(0, 501))
        for v in range(1, 501):
            assert b.read(delta_file(loc, v)) == bodies[v]
        assert c.get_commits(table_id).commits == []
        assert c.get_commits(table_id).latest_table_version == 500
        assert delta_rs_table(b, loc).version() == 500
    finally:
        worker.stop()


def test_foreign_delta_file_fences_the_table_and_is_never_overwritten(request: pytest.FixtureRequest) -> None:
    """The service process's side of fencing: its log line and `tables show` (every backend: test_inprocess.py)."""
    from tests.conftest import make_backend

    b = make_backend(request, "sqlite", "local", "foreign-local")
    svc = Service(b, extra_env={"COMMIT_OWNER_BACKFILL_BATCH_SIZE": "100"}).start()
    try:
        c = svc.client()
        table_id, loc = create_owned_table(svc)
        c.commit(table_id, 1, actions())
        c.commit(table_id, 2, actions())
        c.backfill_to_version(table_id, 1)
        foreign = ndjson(actions()) + b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}\n'
        b.write(delta_file(loc, 2), foreign)  # someone bypassed the owner
        with pytest.raises(ForeignCommitFileError):
            c.backfill_to_version(table_id, 2)
        assert b.read(delta_file(loc, 2)) == foreign  # never overwritten
        t = c.get_table(table_id)
        assert t.status == "FENCED" and not t.accepting_commits
        assert "did not ratify" in (t.raw.get("statusReason") or "")
        with pytest.raises(TableNotAcceptingCommitsError) as refused:
            c.commit(table_id, 3, actions())
        assert (refused.value.retryable, refused.value.conflict) == (False, False)
        assert not b.exists(delta_file(loc, 3))
        assert svc.log_text().count("FOREIGN COMMIT FILE") >= 1
        import subprocess
        import sys

        out = subprocess.run([sys.executable, "-m", "coordinator", "tables", "show", table_id, "--database-url",
                              b.database_url], capture_output=True, text=True, check=True).stdout
        assert "FENCED" in out and "did not ratify" in out
    finally:
        svc.stop()


@pytest.mark.slow
def test_two_processes_on_one_postgres_database_publish_once_and_in_order(request: pytest.FixtureRequest) -> None:
    from tests.conftest import make_backend

    b = make_backend(request, "postgres", "local", "two-procs")
    s1, s2 = Service(b).start(), Service(b).start()
    stop = threading.Event()
    violations: list[list[int]] = []
    tables = []
    try:
        for _ in range(3):
            tables.append(create_owned_table(s1))

        def watch() -> None:
            while not stop.is_set():
                for _, loc in tables:
                    seen = published_versions(b, loc)
                    if seen != list(range(0, len(seen))):
                        violations.append(seen)

        watcher = threading.Thread(target=watch)
        watcher.start()
        bodies: dict[tuple[str, int], bytes] = {}
        lock = threading.Lock()

        def writer(svc: Service, table_id: str) -> None:
            c = svc.client()
            for _ in range(15):
                while True:
                    v = max(c.get_commits(table_id).latest_table_version + 1, 1)
                    acts = actions()
                    try:
                        c.commit(table_id, v, acts)
                    except CommitFailedError as e:
                        if e.retryable and e.conflict or "inCommitTimestamp" in e.message:
                            continue
                        raise
                    with lock:
                        bodies[(table_id, v)] = ndjson(acts)
                    break

        threads = [threading.Thread(target=writer, args=(svc, tid)) for tid, _ in tables for svc in (s1, s2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for tid, _loc in tables:
            wait_until(lambda tid=tid: s2.client().get_table(tid).latest_backfilled_version == 30, what="backfill")
        stop.set()
        watcher.join()
        assert violations == []
        for tid, loc in tables:
            assert published_versions(b, loc) == list(range(0, 31))
            for v in range(1, 31):
                assert b.read(delta_file(loc, v)) == bodies[(tid, v)]
    finally:
        stop.set()
        s1.stop()
        s2.stop()


def test_ops_backfill_command_reports_and_exits_nonzero_on_failure(no_backfill_service: Service) -> None:
    import subprocess
    import sys

    svc = no_backfill_service
    c = svc.client()
    table_id, loc = create_owned_table(svc)
    for v in range(1, 6):
        c.commit(table_id, v, actions())
    url = svc.backend.database_url
    res = subprocess.run([sys.executable, "-m", "coordinator", "backfill", "--table", loc, "--to-version", "3",
                          "--database-url", url, "--progress"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "versions published: 3" in res.stdout and "failures: 0" in res.stdout
    assert "backfill" in res.stderr and "3/3" in res.stderr  # the progress bar
    assert svc.backend.exists(delta_file(loc, 3)) and not svc.backend.exists(delta_file(loc, 4))
    res = subprocess.run([sys.executable, "-m", "coordinator", "backfill", "--all", "--endpoint", svc.endpoint,
                          "--json"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["failures"] == [] and summary["versions_published"] >= 2
    assert svc.backend.exists(delta_file(loc, 5))
    res = subprocess.run([sys.executable, "-m", "coordinator", "backfill", "--table", "/nowhere/at/all",
                          "--database-url", url], capture_output=True, text=True)
    assert res.returncode == 1 and "FAILED" in res.stdout


def test_standalone_backfill_worker_publishes_and_stops_cleanly(no_backfill_service: Service) -> None:
    """`commit-owner backfill-worker` alone publishes what a `serve --no-backfill` process ratified."""
    import os
    import signal
    import subprocess
    import sys

    from tests.support import ROOT

    svc = no_backfill_service
    b, c = svc.backend, svc.client()
    table_id, loc = create_owned_table(svc)
    bodies = {}
    for v in range(1, 6):
        acts = actions()
        c.commit(table_id, v, acts)
        bodies[v] = ndjson(acts)
    time.sleep(0.5)
    assert not b.exists(delta_file(loc, 1))  # the service itself does not backfill
    env = dict(os.environ, **b.env(), COMMIT_OWNER_LOG_FORMAT="json")
    log_path = b.tmp / "backfill-worker.log"
    with open(log_path, "ab") as log:
        worker = subprocess.Popen([sys.executable, "-m", "coordinator", "backfill-worker"], env=env, cwd=str(ROOT),
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: c.get_table(table_id).latest_backfilled_version == 5, what="the worker's backfill")
        assert published_versions(b, loc) == list(range(0, 6))
        for v in range(1, 6):
            assert b.read(delta_file(loc, v)) == bodies[v]
        assert c.get_commits(table_id).commits == []
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(15) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(5)
    assert "backfill worker" in log_path.read_text()


@pytest.mark.slow
def test_a_dead_holders_lease_is_taken_over_once_it_expires(own_backend: Backend) -> None:
    """A process that died holding a table's backfill lease blocks that table only until the lease expires."""
    import sqlite3

    b = own_backend
    svc = Service(b).start()  # backfill after every commit, default lease
    try:
        c = svc.client()
        table_id, loc = create_owned_table(svc)
        c.commit(table_id, 1, actions())
        wait_until(lambda: c.get_table(table_id).latest_backfilled_version == 1, what="backfill of v1")
        hold = 6.0
        db = sqlite3.connect(b.database_url.split(":///", 1)[1])

        def lease_owner() -> str | None:
            return db.execute("SELECT lease_owner FROM owned_tables WHERE table_id = ?", (table_id,)).fetchone()[0]

        # The service keeps a busy table's lease and hands it back once the table is idle (about a second).
        wait_until(lambda: lease_owner() is None, timeout=10, what="the idle lease to be handed back")
        with db:  # a holder that died mid-backfill: its lease row stays until it expires
            db.execute("UPDATE owned_tables SET lease_owner = 'dead-process', lease_expires_at = ? WHERE table_id = ?",
                       (int((time.time() + hold) * 1000), table_id))
        db.close()
        held_since = time.monotonic()
        c.commit(table_id, 2, actions())
        time.sleep(2.0)
        assert not b.exists(delta_file(loc, 2)), "published while another holder's lease was live"
        wait_until(lambda: b.exists(delta_file(loc, 2)), timeout=30, what="takeover after the lease expired")
        assert time.monotonic() - held_since >= hold - 0.5
        # the rows are marked after the copy: wait for the bookkeeping too
        wait_until(lambda: c.get_table(table_id).latest_backfilled_version == 2, what="v2 marked backfilled")
        assert published_versions(b, loc) == [0, 1, 2]
    finally:
        svc.stop()


@pytest.mark.slow
def test_background_backfill_retries_failed_publications_by_itself(own_backend: Backend) -> None:
    """Publishing `_delta_log/<2>.json` fails most of the time (test-only fault injection on that name): the
    background backfiller stops at the failure, retries with backoff and publishes everything, in order,
    with nobody asking for a backfill."""
    import urllib.request

    b = own_backend
    faults = f"put_error=0.6;match=/_delta_log/{2:020d}.json;seed=7"
    svc = Service(b, extra_env={STORAGE_FAULTS: faults}).start()
    try:
        c = svc.client()
        table_id, loc = create_owned_table(svc)
        bodies = {}
        for v in range(1, 7):
            acts = actions()
            c.commit(table_id, v, acts)  # staged under _commits/: not affected by the faults
            bodies[v] = ndjson(acts)
        wait_until(lambda: c.get_table(table_id).latest_backfilled_version == 6, timeout=90,
                   what="background backfill through the faults")
        assert published_versions(b, loc) == list(range(0, 7))
        for v in range(1, 7):
            assert b.read(delta_file(loc, v)) == bodies[v]
        metrics = urllib.request.urlopen(svc.endpoint + "/metrics", timeout=10).read().decode()
        [failures] = [float(line.split()[-1]) for line in metrics.splitlines()
                      if line.startswith("commit_owner_backfill_failures_total ")]
        assert failures >= 1, "no publication failed: the faults did not reach the backfiller"
    finally:
        svc.stop()
