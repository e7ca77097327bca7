"""The Python transaction context manager and the multi-table reader, on every backend: pandas and pyarrow writes
to several tables committed together on exit, nothing (and no file) on an exception, rebases on lost races;
read back through the owner as of one instant, and by delta-rs once published."""

from __future__ import annotations

import asyncio
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import client
from client.contract.errors import TableChangedError
from tests.inprocess import InProcess
from tests.support import delta_rs_table


def _ids(t: Any) -> list[int]:
    return sorted(t.column("id").to_pylist())


async def _tables(s: InProcess, n: int) -> list[str]:
    """``n`` new tables created by write_table (version 0), each holding the row id 0 (version 1)."""
    owner = s.client()
    locs = [s.backend.new_location() for _ in range(n)]
    for loc in locs:
        await asyncio.to_thread(client.write_table, pa.table({"id": pa.array([0], pa.int64())}), loc, client=owner,
                                storage_options=s.backend.storage_options())
    return locs


async def test_writes_to_several_tables_are_committed_together_on_exit(inproc: InProcess) -> None:
    s = inproc
    a, b = await _tables(s, 2)
    opts = s.backend.storage_options()

    def run() -> client.TransactionResult:
        with client.transaction(client=s.client(), storage_options=opts) as tx:
            tx.write_table(pd.DataFrame({"id": [1, 2]}), a)
            tx.write_table(pa.table({"id": pa.array([3], pa.int64())}), b, mode="overwrite")
        assert tx.result is not None
        return tx.result

    result = await asyncio.to_thread(run)
    assert sorted(c.version for c in result.commits.values()) == [2, 2]  # (version 1: the row 0)
    got = await asyncio.to_thread(client.read_tables, [a, b], client=s.client(), storage_options=opts)
    assert [_ids(t) for t in got] == [[0, 1, 2], [3]]
    # published (the transaction waited for it): a plain Delta reader sees both
    assert _ids(delta_rs_table(s.backend, a).to_pyarrow_table()) == [0, 1, 2]
    assert _ids(delta_rs_table(s.backend, b).to_pyarrow_table()) == [3]


async def test_an_exception_in_the_block_commits_nothing_and_deletes_the_files(inproc: InProcess) -> None:
    s = inproc
    a, b = await _tables(s, 2)
    before = [await asyncio.to_thread(s.backend.snapshot, loc) for loc in (a, b)]

    def run() -> None:
        with client.transaction(client=s.client(), storage_options=s.backend.storage_options()) as tx:
            tx.write_table(pd.DataFrame({"id": [1]}), a)
            tx.write_table(pd.DataFrame({"id": [2]}), b)
            raise RuntimeError("the pipeline failed half-way")

    with pytest.raises(RuntimeError):
        await asyncio.to_thread(run)
    assert [await asyncio.to_thread(s.backend.snapshot, loc) for loc in (a, b)] == before
    for loc in (a, b):
        assert (await asyncio.to_thread(client.read_table, loc, client=s.client(),
                                        storage_options=s.backend.storage_options())).num_rows == 1


async def test_a_transaction_that_lost_a_race_is_rebased_and_an_overwrite_that_lost_fails(inproc: InProcess) -> None:
    s = inproc
    a, b = await _tables(s, 2)
    opts = s.backend.storage_options()

    def appends() -> client.Transaction:
        with client.transaction(client=s.client(), storage_options=opts, wait_published=False) as tx:
            tx.write_table(pd.DataFrame({"id": [1]}), a)
            tx.write_table(pd.DataFrame({"id": [2]}), b)
            # another writer commits to b meanwhile
            client.write_table(pd.DataFrame({"id": [9]}), b, client=s.client(), storage_options=opts,
                               wait_published=False)
        return tx

    tx = await asyncio.to_thread(appends)
    assert tx.rebases == 1 and tx.result is not None and tx.result.commits[tx.parts[b].table_id].version == 3
    got = await asyncio.to_thread(client.read_tables, [a, b], client=s.client(), storage_options=opts)
    assert [_ids(t) for t in got] == [[0, 1], [0, 2, 9]]
    before = [await asyncio.to_thread(s.backend.snapshot, loc) for loc in (a, b)]

    def overwrite() -> None:
        with client.transaction(client=s.client(), storage_options=opts, wait_published=False) as tx:
            tx.write_table(pd.DataFrame({"id": [5]}), a)
            tx.write_table(pd.DataFrame({"id": [6]}), b, mode="overwrite")
            client.write_table(pd.DataFrame({"id": [7]}), b, client=s.client(), storage_options=opts,
                               wait_published=False)

    with pytest.raises(TableChangedError):
        await asyncio.to_thread(overwrite)
    got = await asyncio.to_thread(client.read_tables, [a, b], client=s.client(), storage_options=opts)
    assert [_ids(t) for t in got] == [[0, 1], [0, 2, 7, 9]]  # nothing of the transaction on either table
    after_a = await asyncio.to_thread(s.backend.snapshot, a)
    assert not any(k not in before[0] for k in after_a if k.endswith(".parquet"))  # its files were deleted


async def test_a_second_write_to_the_same_table_is_refused_before_anything_is_written(inproc: InProcess) -> None:
    s = inproc
    (a,) = await _tables(s, 1)
    before = await asyncio.to_thread(s.backend.snapshot, a)

    def run() -> None:
        with client.transaction(client=s.client(), storage_options=s.backend.storage_options()) as tx:
            tx.write_table(pd.DataFrame({"id": [1]}), a)
            tx.write_table(pd.DataFrame({"id": [2]}), a)

    with pytest.raises(ValueError, match="one write per table"):
        await asyncio.to_thread(run)
    assert await asyncio.to_thread(s.backend.snapshot, a) == before


async def test_a_transaction_whose_reply_was_lost_is_replayed_by_the_client_and_lands_once(inproc: InProcess) -> None:
    from tests.support import ReplyDroppingProxy, actions

    s = inproc
    made = await asyncio.gather(*(s.create_table() for _ in range(2)))
    proxy = ReplyDroppingProxy(s.port, drop=1, match=lambda req: b"POST /api/v1/transactions" in req)
    try:
        owner = client.CommitOwnerClient(proxy.endpoint, deadline=30)
        got = await asyncio.to_thread(owner.commit_transaction, [(t, 1, actions()) for t, _ in made])
        owner.close()
    finally:
        proxy.close()
    assert proxy.dropped == 1
    assert [c.version for c in got.commits.values()] == [1, 1]
    for t, _ in made:
        rows = (await s.store.get_commits(t, None, None, backfilled=True))[1]
        assert [(r.version, r.idempotency_key) for r in rows] == [(1, got.transaction_id)]  # once


async def test_the_multi_table_reader_lists_again_when_a_transaction_is_published_under_it(inproc: InProcess) -> None:
    """A transaction ratified and published between the listings and the owner's answer: the owner's versions are
    beyond what was listed, so every log is listed again, and both tables are read at the new version."""
    from client.snapshot import load_snapshots
    from tests.support import actions

    s = inproc
    locs = await _tables(s, 2)
    owner = s.client()
    ids = [(await asyncio.to_thread(owner.get_table, location=loc)).table_id for loc in locs]

    def sneak(attempt: int, listings: list[Any]) -> None:
        if attempt == 0:
            owner.commit_transaction([(t, 2, actions()) for t in ids])
            for t in ids:
                owner.backfill_to_version(t, 2)

    snaps = await asyncio.to_thread(load_snapshots, locs, client=owner, storage_options=s.backend.storage_options(),
                                    after_listing=sneak)
    assert [snap.version for snap in snaps] == [2, 2] and [snap.relists for snap in snaps] == [1, 1]
    assert [len(snap.files) for snap in snaps] == [2, 2]  # the row 0's file and the transaction's
