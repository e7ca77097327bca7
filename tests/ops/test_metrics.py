"""/metrics: the counters move when commits, conflicts, backfills and failures happen on a real service."""

from __future__ import annotations

import asyncio
import threading

from prometheus_client import CollectorRegistry

from coordinator.runtime import metrics as metrics_module
from coordinator.runtime.metrics import Metrics
from tests.ops.helpers import call, pg_connect, post_commit, sample, scrape
from tests.support import Service, actions, create_owned_table, delta_file, wait_until


def test_commits_and_conflicts_are_counted_by_outcome(manual_service: Service) -> None:
    svc = manual_service
    table_id, _ = create_owned_table(svc)
    before = scrape(svc)
    assert post_commit(svc, table_id, 1, actions())[0] == 200
    assert post_commit(svc, table_id, 2, actions())[0] == 200
    status, _, body = post_commit(svc, table_id, 2, actions())  # version 2 is taken: a lost race
    assert status == 409 and body["error"]["code"] == "COMMIT_VERSION_CONFLICT"
    status, _, body = post_commit(svc, table_id, 7, actions())  # a gap: refused, not a conflict
    assert status == 400 and body["error"]["code"] == "INVALID_COMMIT"
    after = scrape(svc)

    def delta(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert delta("commit_owner_commits_total", outcome="ok") == 2
    assert delta("commit_owner_commits_total", outcome="COMMIT_VERSION_CONFLICT") == 1
    assert delta("commit_owner_commits_total", outcome="INVALID_COMMIT") == 1
    assert delta("commit_owner_commit_conflicts_total") == 1
    assert delta("commit_owner_commit_duration_seconds_count", outcome="ok") == 2
    assert delta("commit_owner_commit_duration_seconds_sum", outcome="ok") > 0
    route = "/api/v1/tables/{table_id}/commits"
    assert delta("commit_owner_http_requests_total", method="POST", route=route, status="200") == 2
    assert delta("commit_owner_http_requests_total", method="POST", route=route, status="409") == 1


def test_backlog_gauge_and_lag_histogram_follow_a_backfill(manual_service: Service) -> None:
    svc = manual_service
    table_id, loc = create_owned_table(svc)
    for v in (1, 2, 3):
        assert post_commit(svc, table_id, v, actions())[0] == 200
    behind = scrape(svc)
    assert sample(behind, "commit_owner_table_unbackfilled_commits", table_id=table_id) == 3
    assert sample(behind, "commit_owner_table_oldest_unbackfilled_age_seconds", table_id=table_id) > 0
    assert not svc.backend.exists(delta_file(loc, 1))  # nothing backfills by itself on this service

    status, _, body = call(svc, "POST", f"/api/v1/tables/{table_id}/backfill", b'{"version": 3}')
    assert status == 200 and body["latestBackfilledVersion"] == 3
    done = scrape(svc)
    assert svc.backend.exists(delta_file(loc, 3))
    # Nothing left to publish: the table has no per-table series at all (they follow the backlog, so a
    # million caught-up tables cost a scrape nothing).
    for name in ("commit_owner_table_unbackfilled_commits", "commit_owner_table_oldest_unbackfilled_age_seconds"):
        assert (name, frozenset({"table_id": table_id}.items())) in behind
        assert (name, frozenset({"table_id": table_id}.items())) not in done
    assert sample(done, "commit_owner_backfill_lag_seconds_count") - sample(behind, "commit_owner_backfill_lag_seconds_count") == 3
    assert sample(done, "commit_owner_backfill_lag_seconds_sum") > sample(behind, "commit_owner_backfill_lag_seconds_sum")
    published = "commit_owner_backfill_published_versions_total"
    assert sample(done, published) - sample(behind, published) == 3
    assert sample(done, "commit_owner_tables", status="ACTIVE") >= 1


def test_database_errors_are_counted_and_answered_as_unavailable(manual_service: Service) -> None:
    svc = manual_service
    table_id, _ = create_owned_table(svc)
    assert post_commit(svc, table_id, 1, actions())[0] == 200
    before = scrape(svc)
    with pg_connect(svc.backend.database_url) as conn:
        conn.execute("ALTER TABLE commits RENAME TO commits_away")  # the database now fails every commit
        try:
            status, _, body = post_commit(svc, table_id, 2, actions())
        finally:
            conn.execute("ALTER TABLE commits_away RENAME TO commits")
    assert status == 503 and body["error"]["code"] == "UNAVAILABLE"
    after = scrape(svc)
    assert sample(after, "commit_owner_database_errors_total") > sample(before, "commit_owner_database_errors_total")
    assert sample(after, "commit_owner_commits_total", outcome="UNAVAILABLE") - \
        sample(before, "commit_owner_commits_total", outcome="UNAVAILABLE") == 1
    # the failed attempt ratified nothing; the same version goes through once the database is back
    assert svc.client().get_table(table_id).latest_table_version == 1
    assert post_commit(svc, table_id, 2, actions())[0] == 200


def test_storage_errors_are_counted(manual_service: Service) -> None:
    svc = manual_service
    before = scrape(svc)
    # the service's S3 endpoint is a port where nothing listens
    status, _, body = call(svc, "POST", "/api/v1/tables", b'{"location": "s3://nowhere/t", "currentVersion": -1}')
    assert status == 503 and body["error"]["code"] == "UNAVAILABLE"
    after = scrape(svc)
    total = sum(v for (n, _), v in after.items() if n == "commit_owner_storage_errors_total")
    total_before = sum(v for (n, _), v in before.items() if n == "commit_owner_storage_errors_total")
    assert total > total_before
    assert all(t.location != "s3://nowhere/t" for t in svc.client().list_tables())


def test_in_flight_requests_gauge_counts_a_waiting_commit(manual_service: Service) -> None:
    svc = manual_service
    table_id, _ = create_owned_table(svc)
    assert sample(scrape(svc), "commit_owner_http_requests_in_flight") == 1  # the scrape itself
    result: list[int] = []
    with pg_connect(svc.backend.database_url) as conn:
        with conn.transaction():
            # hold the table's row: the commit's ratification waits on this lock
            conn.execute("SELECT 1 FROM owned_tables WHERE table_id = %s FOR UPDATE", (table_id,))
            t = threading.Thread(target=lambda: result.append(post_commit(svc, table_id, 1, actions())[0]))
            t.start()
            wait_until(lambda: sample(scrape(svc), "commit_owner_http_requests_in_flight") == 2,
                       what="the commit to be in flight")
    t.join(30)
    assert result == [200]
    assert sample(scrape(svc), "commit_owner_http_requests_in_flight") == 1


def test_each_app_has_its_own_registry() -> None:
    a, b = Metrics(), Metrics()  # a second registration in the global registry would raise here
    a.observe_commit("ok", 0.01)
    assert a.registry is not b.registry
    assert a.registry.get_sample_value("commit_owner_commits_total", {"outcome": "ok"}) == 1
    assert b.registry.get_sample_value("commit_owner_commits_total", {"outcome": "ok"}) == 0


def test_counts_added_up_in_the_loop_are_written_by_its_timer_or_a_scrape_as_prometheus_would_write_them() -> None:
    """Decision 63: in the app's event loop, counters, gauges and histograms are added up and written once per
    ``TALLY_SECONDS`` or before a scrape. What is written is what prometheus_client's own ``inc``/``observe``
    write for the same events (a registry fed directly, compared sample by sample), buckets edges included."""
    from prometheus_client import Histogram

    seconds = [0.0, 0.001, 0.0011, 0.0025, 0.004, 0.05, 0.7, 29.0, 31.0, 1e6]
    direct = Metrics()  # fed outside any loop: every event written at once
    for s in seconds:
        direct.observe_request("POST", "/r", 200, s)
        direct.observe_commit("ok", s)
    direct.bump(direct.in_flight, 2.0)
    direct.bump(direct.in_flight, -1.0)
    plain = Histogram("plain_seconds", "", buckets=metrics_module._LATENCY_BUCKETS,
                      registry=CollectorRegistry())
    for s in seconds:
        plain.observe(s)

    def samples(m: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {(x.name, tuple(sorted(x.labels.items()))): x.value for f in m.registry.collect()
                for x in f.samples if not x.name.endswith("_created")}

    async def in_a_loop() -> tuple[Metrics, dict, dict]:
        m = Metrics()
        for s in seconds:
            m.observe_request("POST", "/r", 200, s)
            m.observe_commit("ok", s)
        m.bump(m.in_flight, 2.0)
        m.bump(m.in_flight, -1.0)
        before = samples(m)
        await asyncio.sleep(metrics_module.TALLY_SECONDS * 4)
        return m, before, samples(m)

    m, before, after = asyncio.run(in_a_loop())
    assert before[("commit_owner_commits_total", (("outcome", "ok"),))] == 0, "nothing written before the timer"
    assert after == samples(direct), "the timer wrote what each event would have"
    assert after[("commit_owner_http_requests_in_flight", ())] == 1
    for le, n in [("0.001", 2), ("0.0025", 4), ("0.005", 5), ("30.0", 8), ("+Inf", 10)]:
        assert after[("commit_owner_commit_duration_seconds_bucket", (("le", le), ("outcome", "ok")))] == n
    want = {x.labels["le"]: x.value for x in plain.collect()[0].samples if x.name.endswith("_bucket")}
    got = {dict(k[1])["le"]: v for k, v in after.items() if k[0] == "commit_owner_commit_duration_seconds_bucket"}
    assert got == want

    fresh = Metrics()

    async def scraped() -> bytes:
        fresh.observe_commit("ok", 0.01)
        return fresh.exposition()  # at once, before the timer

    assert b'commit_owner_commits_total{outcome="ok"} 1.0' in asyncio.run(scraped())
