"""Two owners on a real Patroni cluster (etcd + 3 PostgreSQL nodes, synchronous mode strict) through the
multi-host URL, 6 writers on 4 tables, and the leader failed three ways in turn: its postmaster killed, the
whole node killed, the node frozen (SIGSTOP) until another is promoted and then thawed.

After each fault: the owners are the same processes (nothing restarted them), writers were only ever answered
with retryable errors (503, never 500), and the outage writers saw is bounded by the time Patroni took to
promote plus the owner's own deadlines. At the end: 0 acknowledged commits lost, 0 duplicated, every
version published (harness/checker.py). Skips, loudly, only where `make install-ha` could not install etcd
or Patroni, or PostgreSQL's binaries are missing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.checker import check, lister
from harness.faults import FaultLog, make_tables, report, start_services
from harness.patroni import FAULTS, WRITER_DEADLINE, Failover, PatroniCluster, missing_tools
from harness.workload import Workload
from tests.support import Backend, migrate

pytestmark = pytest.mark.slow  # a cluster of its own, failed on purpose

# The owner answers 503 after 3 s of silence and gives up on a frozen host's connect after 2 s (libpq's least):
# both far below Patroni's ttl, so the owner keeps answering (retryable) all through a failover. The writers'
# clients keep retrying the same commit for longer than ttl + loop_wait + those deadlines: a commit under way
# at the fault ends acknowledged on the new leader, not "unknown" (docs/decisions.md, "A Patroni cluster").
REQUEST_DEADLINE, CONNECT_TIMEOUT = 3.0, 2.0
OWNER_ENV = {"COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS": str(REQUEST_DEADLINE),
             "COMMIT_OWNER_DB_CONNECT_TIMEOUT_SECONDS": str(CONNECT_TIMEOUT)}
WRITER_ATTEMPT = 10.0  # one attempt; WRITER_DEADLINE (harness/patroni.py) for all of them
# How long after the promotion writers may still wait: a statement on the old leader's pooled connection runs
# into the request deadline, a new connection may first try the frozen host, the client backs off; and a
# generous margin on a shared 2-core machine (this bounds behaviour, it is no speed figure).
AFTER_PROMOTION = REQUEST_DEADLINE + 2 * CONNECT_TIMEOUT + 8.0


def test_owners_on_a_patroni_cluster_lose_nothing_when_the_leader_dies_crashes_or_freezes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    why = missing_tools()
    if why:
        pytest.skip(f"!!! cannot start a Patroni cluster: {why} !!!")
    cluster = PatroniCluster().start()
    services = []
    wl = None
    try:
        url = cluster.url()
        migrate(url)
        backend = Backend(name="rel-patroni", database_url=url, storage="local", tmp=tmp_path)
        services = start_services(backend, 2, OWNER_ENV)
        pids = [s.proc.pid for s in services if s.proc]
        tables = make_tables(services[0], 4)
        caplog.set_level(logging.WARNING, logger="client.http")
        wl = Workload([s.endpoint for s in services], tables, lister(backend), writers=6, timeout=WRITER_ATTEMPT,
                      deadline=WRITER_DEADLINE, seed=27).start()
        wl.wait_for_acks(20, timeout=60)

        faults, failovers = FaultLog(), []
        for fault in FAULTS:
            ev = faults.inject(f"Patroni leader {fault}")
            fo = cluster.fail_leader(fault)
            ev.injected, ev.healed = fo.injected, fo.healed
            failovers.append(fo)
            wl.wait_for_acks(10, since=fo.promoted, timeout=AFTER_PROMOTION + 30)
            cluster.wait_healthy(timeout=120)  # every node back before the next fault
            assert [s.proc.pid for s in services if s.proc] == pids
            assert all(s.proc and s.proc.poll() is None for s in services), "an owner exited"
            wl.wait_for_acks(10, timeout=60)

        history = wl.stop()
        wl = None
        faults.fill_recovery(history.ack_times())
        outages = [fo.writers_saw(history.ack_times()) for fo in failovers]

        seen = [r.getMessage() for r in caplog.records if r.name == "client.http"]
        assert any("(503 UNAVAILABLE)" in m for m in seen), "no writer ever saw the failovers"
        assert not [m for m in seen if "(500" in m], [m for m in seen if "(500" in m][:5]
        assert not [o.error for o in history.ops if o.error.startswith("INTERNAL")]
        result = check(backend, tables, history, endpoints=[s.endpoint for s in services])
        report("patroni-failover", result, faults, {"failovers": outages})
        result.assert_ok()
        assert result.lost == 0 and result.duplicates == 0 and result.acknowledged > 0
        for o in outages:
            assert o["outage_seconds"] is not None, o
            assert o["outage_seconds"] <= o["promote_seconds"] + AFTER_PROMOTION, o
        assert [s.proc.pid for s in services if s.proc] == pids
    finally:
        if wl is not None:
            wl.stop()
        for s in services:
            s.stop()
        cluster.destroy()


def test_the_writers_outage_is_the_longest_stretch_without_an_ack_around_the_fault_and_promotion() -> None:
    fo = Failover("node-frozen", "node0", "node1", injected=100.0, promoted=120.0, healed=120.1)
    # an ack at 100.2 was in flight at the fault; the one at 121 is the first on the new leader
    seen = fo.writers_saw([90.0, 99.5, 100.2, 121.0, 121.5])
    assert seen == {"fault": "node-frozen", "leader": "node0 -> node1", "promote_seconds": 20.0,
                    "outage_seconds": 20.8, "writes_back_after_promotion_seconds": 1.0}
    # no acknowledgement after the promotion: no outage figure (the test then fails on it)
    assert fo.writers_saw([99.0, 100.5])["outage_seconds"] is None


def test_an_unknown_fault_is_refused_before_anything_is_touched() -> None:
    cluster = PatroniCluster()  # nothing started: a refused fault must not need a cluster
    try:
        with pytest.raises(ValueError, match="unknown fault 'reboot': one of postmaster-killed, node-killed"):
            cluster.fail_leader("reboot")
        assert all(n.proc is None for n in cluster.nodes) and cluster.etcd is None
    finally:
        cluster.destroy()
    assert not cluster.root.exists()
