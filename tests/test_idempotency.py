"""A commit whose reply is lost is retried by the client with the same idempotency key: one version, not two."""

from __future__ import annotations

from client import CommitOwnerClient
from tests.support import ReplyDroppingProxy, Service, actions, create_owned_table, delta_file, ndjson


def test_commit_retried_after_a_dropped_reply_yields_one_version(service: Service) -> None:
    table_id, loc = create_owned_table(service)
    proxy = ReplyDroppingProxy(service.port, drop=1)
    try:
        c = CommitOwnerClient(proxy.endpoint, deadline=30)
        acts = actions()
        r = c.commit(table_id, 1, acts)  # the first reply is cut off; the client retries with the same key
        assert proxy.dropped == 1
        assert r.version == 1
        page = service.client().get_commits(table_id)
        assert page.latest_table_version == 1
        nxt = service.client().commit(table_id, 2, actions())
        assert nxt.version == 2  # version 1 was ratified exactly once
        service.client().backfill_to_version(table_id, 2)
        assert service.backend.read(delta_file(loc, 1)) == ndjson(acts)
        staged = service.backend.list(f"{loc}/_delta_log/_commits")
        assert [n for n in staged if n.startswith(f"{1:020d}.")] == [r.file_name]
    finally:
        proxy.close()
