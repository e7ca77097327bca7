"""Scenario 9 of the bench (transactions of k tables beside the same commits one table at a time), run for a
fraction of a second against the real app: its rows, and the versions it says it committed."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.bench import transactions
from tests.inprocess import InProcess


async def test_the_transaction_scenario_measures_both_sides_and_commits_what_it_counts(inproc: InProcess) -> None:
    s = inproc
    if s.backend.name != "postgres-local-inproc":
        pytest.skip("one backend is enough for the bench's own arithmetic (the API runs on every backend elsewhere)")
    made = await asyncio.gather(*(s.create_table() for _ in range(4)))
    ids = [t for t, _ in made]
    latest = dict.fromkeys(ids, 0)
    rows = await transactions.run(s.endpoint, 0.3, ids, latest, sizes=(2, 4))
    assert [name for name, _, _ in rows] == [transactions.scenario(k, side) for k in (2, 4) for side in transactions.SIDES]
    for name, sample, extra in rows:
        assert sample.count > 0 and sample.failures == 0, name
        assert extra["commits_per_second"] == round(sample.count * extra["tables"] / sample.elapsed, 1)
    for t in ids:
        assert (await s.get_commits(t))["latestTableVersion"] == latest[t]
    assert latest[ids[0]] == sum(r[1].count for r in rows)  # the first table takes part in every operation
