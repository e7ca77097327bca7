"""A commit whose reply is lost is retried by the client with the same idempotency key: one version, not two.

On every backend, with the app in this process and a real TCP proxy that cuts the first reply off."""

from __future__ import annotations

import asyncio

from client import CommitOwnerClient
from tests.inprocess import InProcess
from tests.support import ReplyDroppingProxy, actions, delta_file, ndjson


async def test_commit_retried_after_a_dropped_reply_yields_one_version(inproc: InProcess) -> None:
    s = inproc
    table_id, loc = await s.create_table()
    proxy = ReplyDroppingProxy(s.port, drop=1)
    try:
        c = CommitOwnerClient(proxy.endpoint, deadline=30)
        acts = actions()
        # the first reply is cut off; the client retries with the same key (blocking client: off the loop)
        r = await asyncio.to_thread(c.commit, table_id, 1, acts)
        c.close()
        assert proxy.dropped == 1
        assert r.version == 1
        page = await s.get_commits(table_id)
        assert page["latestTableVersion"] == 1
        nxt = await s.commit_ok(table_id, 2)
        assert nxt["version"] == 2  # version 1 was ratified exactly once
        await s.backfill_to(table_id, 2)
        assert await asyncio.to_thread(s.backend.read, delta_file(loc, 1)) == ndjson(acts)
        staged = await asyncio.to_thread(s.backend.list, f"{loc}/_delta_log/_commits")
        assert [n for n in staged if n.startswith(f"{1:020d}.")] == [r.file_name]
    finally:
        proxy.close()
