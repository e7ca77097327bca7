"""POST /api/v1/transactions and POST /api/v1/snapshots on every backend (SQLite and PostgreSQL, local disk and
S3 through moto), with the real app in this process: all or nothing, replays, refusals that change nothing."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from tests.inprocess import API, InProcess
from tests.support import actions, delta_file, ndjson
from tests.transactions.helpers import new_key, post_tx, settled, state, tables, tx_body


async def test_a_transaction_ratifies_one_version_on_each_table_together(inproc: InProcess) -> None:
    s = inproc
    made = await tables(s, 3)
    acts = [actions(tag=f"t{i}") for i in range(3)]
    status, reply = await post_tx(s, tx_body(*[(t, 1, a) for (t, _), a in zip(made, acts, strict=True)]))
    assert status == 200, reply
    assert [c["tableId"] for c in reply["commits"]] == [t for t, _ in made]
    assert [c["version"] for c in reply["commits"]] == [1, 1, 1]
    tx_id = reply["transactionId"]
    assert all(c["fileName"].startswith(f"{1:020d}.") for c in reply["commits"])
    assert len({c["fileName"] for c in reply["commits"]}) == 3  # a staged file of its own per table
    for (t, loc), a in zip(made, acts, strict=True):
        await s.backfill_to(t, 1)
        assert await asyncio.to_thread(s.backend.read, delta_file(loc, 1)) == ndjson(a)
    listed = await s.service.transactions.recent(5)
    assert listed[0].id == tx_id and sorted(listed[0].commits) == sorted((t, 1) for t, _ in made)


async def test_a_replay_with_the_same_key_answers_the_first_reply_and_ratifies_nothing_more(inproc: InProcess) -> None:
    s = inproc
    made = await tables(s, 2)
    body, key = tx_body(*[(t, 1) for t, _ in made]), new_key()
    first = await post_tx(s, body, key)
    assert first[0] == 200, first
    await settled(s, [t for t, _ in made])
    before = await state(s, made)
    again = await post_tx(s, body, key)
    assert again == first
    assert await state(s, made) == before
    # the same key for another request is refused, and changes nothing
    other = tx_body(*[(t, 2) for t, _ in made])
    status, reply = await post_tx(s, other, key)
    assert status == 422 and reply["error"]["code"] == "IDEMPOTENCY_KEY_REUSED", reply
    assert await state(s, made) == before


async def test_a_conflict_on_one_table_refuses_the_whole_transaction_and_names_it(inproc: InProcess) -> None:
    s = inproc
    made = await tables(s, 3)
    (a, _), (b, _), (c, _) = made
    winner = await s.commit_ok(b, 1)
    await settled(s, [a, b, c])
    before = await state(s, made)
    status, reply = await post_tx(s, tx_body((a, 1), (b, 1), (c, 1)), new_key())
    assert status == 409, reply
    err = reply["error"]
    assert err["code"] == "TRANSACTION_CONFLICT" and err["conflict"] and err["retryable"]
    assert [t["tableId"] for t in err["tables"]] == [b]
    refused = err["tables"][0]
    assert refused["code"] == "COMMIT_VERSION_CONFLICT" and refused["latestTableVersion"] == 1
    assert [u["fileName"] for u in refused["unseenCommits"]] == [winner["fileName"]]
    assert refused["unseenCommitsComplete"] is True
    assert b in err["message"]
    assert await state(s, made) == before  # no commit row, no staged file left on any table


async def test_a_table_that_refuses_for_another_reason_is_named_and_nothing_is_written(inproc: InProcess) -> None:
    s = inproc
    made = await tables(s, 2)
    (a, _), (b, _) = made
    await settled(s, [a, b])
    before = await state(s, made)
    status, reply = await post_tx(s, tx_body((a, 1), (b, 3)))  # version 3 on a table at 0: a gap
    assert status == 400 and reply["error"]["code"] == "INVALID_COMMIT", reply
    assert b in reply["error"]["message"] and "nothing of the transaction" in reply["error"]["message"]
    assert await state(s, made) == before


def _bad_commit() -> list[dict[str, Any]]:
    return [{"add": {"path": "x.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1,
                     "dataChange": True}}]  # no commitInfo first


BAD = {
    "empty": (lambda ids: {"commits": []}, 400, "INVALID_ARGUMENT", "empty"),
    "table twice": (lambda ids: tx_body((ids[0], 1), (ids[1], 1), (ids[0], 1)), 400, "INVALID_ARGUMENT", "twice"),
    "unknown table": (lambda ids: tx_body((ids[0], 1), (UNKNOWN, 1)), 404, "TABLE_NOT_FOUND", "UNKNOWN"),
    "invalid body": (lambda ids: tx_body((ids[0], 1), (ids[1], 1, _bad_commit())), 400, "INVALID_COMMIT", "T1"),
    "version 0": (lambda ids: tx_body((ids[0], 1), (ids[1], 0)), 400, "INVALID_COMMIT", "T1"),
    "over the table limit": (lambda ids: tx_body(*[(str(uuid.uuid4()), 1) for _ in range(65)]), 400,
                             "INVALID_ARGUMENT", "--max-transaction-tables"),
    "not a uuid": (lambda ids: tx_body((ids[0], 1), ("nope", 1)), 400, "INVALID_ARGUMENT", "commits[1].tableId"),
    "no actions": (lambda ids: {"commits": [{"tableId": ids[0], "version": 1, "actions": []}]}, 400,
                   "INVALID_ARGUMENT", "T0"),
    "unknown field": (lambda ids: {"commits": [], "extra": 1}, 400, "INVALID_ARGUMENT", "extra"),
    "gives up ownership": (lambda ids: tx_body((ids[0], 1), (ids[1], 1, [actions()[0], {"metaData": {
        "id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": '{"type":"struct","fields":[]}',
        "partitionColumns": [], "configuration": {}, "createdTime": 1}}])), 400, "INVALID_COMMIT", "T1"),
}
UNKNOWN = str(uuid.UUID(int=7))


@pytest.mark.parametrize("case", list(BAD))
async def test_bad_input_is_refused_naming_the_table_and_changes_nothing(inproc: InProcess, case: str) -> None:
    s = inproc
    made = await tables(s, 2)
    ids = [t for t, _ in made]
    await settled(s, ids)
    before = await state(s, made)
    build, status_wanted, code, named = BAD[case]
    status, reply = await post_tx(s, build(ids))
    assert (status, reply["error"]["code"]) == (status_wanted, code), reply
    named = named.replace("T0", ids[0]).replace("T1", ids[1]).replace("UNKNOWN", UNKNOWN)
    assert named in reply["error"]["message"], reply
    assert await state(s, made) == before


async def test_a_transaction_over_the_byte_limit_is_refused_with_413_and_changes_nothing(inproc: InProcess) -> None:
    s = inproc
    made = await tables(s, 2)
    await settled(s, [t for t, _ in made])
    before = await state(s, made)
    limit = s.settings.max_transaction_bytes
    s.settings.max_transaction_bytes = 2048  # the setting of this running app, as --max-transaction-bytes sets it
    try:
        status, reply = await post_tx(s, tx_body(*[(t, 1, actions(n_adds=8)) for t, _ in made]))
    finally:
        s.settings.max_transaction_bytes = limit
    assert status == 413 and reply["error"]["code"] == "PAYLOAD_TOO_LARGE", reply
    assert "--max-transaction-bytes" in reply["error"]["message"]
    assert await state(s, made) == before


async def test_racing_transactions_and_single_commits_leave_every_transaction_whole(inproc: InProcess) -> None:
    """Transactions over overlapping tables race each other and single commits: each one is ratified whole
    or not at all, and every table's versions stay contiguous."""
    s = inproc
    made = await tables(s, 4)
    ids = [t for t, _ in made]

    async def latest(t: str) -> int:
        return int((await s.get_commits(t))["latestTableVersion"])

    refused: list[tuple[str, list[str]]] = []

    async def one_tx(pick: list[str]) -> tuple[int, Any, list[str]]:
        for _ in range(40):  # a writer that lost rebases (reads the latest versions again) and retries
            versions = [max(0, await latest(t)) + 1 for t in pick]
            key = new_key()
            status, reply = await post_tx(s, tx_body(*zip(pick, versions, strict=True)), key)
            if status != 409:
                break
            refused.append((key, pick))
        return status, reply, pick

    async def single(t: str) -> tuple[int, Any, list[str]]:
        for _ in range(40):
            status, reply = await s.commit(t, max(0, await latest(t)) + 1, ndjson(actions()))
            if status != 409:
                break
        return status, reply, [t]

    jobs = []
    for i in range(12):
        jobs.append(one_tx([ids[i % 4], ids[(i + 1) % 4], ids[(i + 2) % 4]]))
        if i % 3 == 0:
            jobs.append(single(ids[i % 4]))
    results = await asyncio.gather(*jobs)
    assert all(r[0] == 200 for r in results), [r[1] for r in results if r[0] != 200]
    won = [r for r in results if "transactionId" in r[1]]
    assert len(won) == 12 and refused, "every transaction won in the end, some after losing a race"
    rows = {t: (await s.store.get_commits(t, None, None, backfilled=True))[1] for t in ids}
    for t in ids:
        assert [r.version for r in rows[t]] == list(range(1, len(rows[t]) + 1))
    by_key: dict[str, set[str]] = {}
    for t in ids:
        for r in rows[t]:
            by_key.setdefault(r.idempotency_key, set()).add(t)
    for _status, reply, pick in won:
        assert by_key.get(reply["transactionId"]) == set(pick)  # every commit of it, on its tables only
    assert not any(key in by_key for key, _ in refused)  # a refused transaction left no commit anywhere
    ratified_txs = {tx.id for tx in await s.service.transactions.recent(1000)}
    assert {r[1]["transactionId"] for r in won} <= ratified_txs
    assert sum(len(v) for v in rows.values()) == 12 * 3 + 4  # none lost, none duplicated


async def test_a_consistent_read_returns_every_table_as_of_one_instant(inproc: InProcess) -> None:
    s = inproc
    made = await tables(s, 3)
    ids = [t for t, _ in made]
    status, reply = await post_tx(s, tx_body(*[(t, 1) for t in ids]))
    assert status == 200, reply
    status, snap = await s.post_json(f"{API}/snapshots", {"tableIds": list(reversed(ids))})
    assert status == 200, snap
    assert [t["tableId"] for t in snap["tables"]] == list(reversed(ids))
    for t in snap["tables"]:
        assert t["latestTableVersion"] == 1
        assert [c["version"] for c in t["commits"]] in ([1], [])  # unpublished, or published already
    # bad input: a clear 4xx naming what is wrong
    for body, code, named in [({"tableIds": []}, 400, "empty"), ({"tableIds": [ids[0], ids[0]]}, 400, "twice"),
                              ({"tableIds": [ids[0], UNKNOWN]}, 404, UNKNOWN), ({"tableIds": ["x"]}, 400, "tableIds[0]"),
                              ({}, 400, "tableIds")]:
        status, err = await s.post_json(f"{API}/snapshots", body)
        assert status == code and named in err["error"]["message"], (body, err)


async def test_a_reader_racing_transactions_never_sees_half_of_one(inproc: InProcess) -> None:
    s = inproc
    made = await tables(s, 3)
    ids = [t for t, _ in made]
    stop = asyncio.Event()
    seen: list[list[int]] = []

    async def reader() -> None:
        while not stop.is_set():
            status, snap = await s.post_json(f"{API}/snapshots", {"tableIds": ids})
            assert status == 200, snap
            seen.append([t["latestTableVersion"] for t in snap["tables"]])

    task = asyncio.create_task(reader())
    try:
        for v in range(1, 9):
            status, reply = await post_tx(s, tx_body(*[(t, v) for t in ids]))
            assert status == 200, reply
            await asyncio.sleep(0)
    finally:
        stop.set()
        await task
    assert seen and all(len(set(v)) == 1 for v in seen), [v for v in seen if len(set(v)) != 1]


async def test_racing_replays_of_one_key_land_once_and_leave_only_the_ratified_files(inproc: InProcess) -> None:
    s = inproc
    made = await tables(s, 3)
    body, key = tx_body(*[(t, 1) for t, _ in made]), new_key()
    replies = await asyncio.gather(*(post_tx(s, body, key) for _ in range(4)))
    assert all(r[0] == 200 for r in replies), replies
    assert [r[1] for r in replies] == [replies[0][1]] * 4 and replies[0][1]["transactionId"] == key
    for (t, loc), c in zip(made, replies[0][1]["commits"], strict=True):
        rows = (await s.store.get_commits(t, None, None, backfilled=True))[1]
        assert [(r.version, r.idempotency_key) for r in rows] == [(1, key)]
        await s.backfill_to(t, 1)  # the ratified staged file is there to publish, with the bytes sent
        assert await asyncio.to_thread(s.backend.read, delta_file(loc, 1)) == ndjson(body["commits"][
            [x for x, _ in made].index(t)]["actions"])
        assert c["fileName"] == rows[0].file_name  # every reply names the file ratified
        staged = await asyncio.to_thread(s.backend.list, f"{loc}/_delta_log/_commits")
        assert [n for n in staged if n.startswith(f"{1:020d}.")] in ([rows[0].file_name], [])  # the losers' removed
