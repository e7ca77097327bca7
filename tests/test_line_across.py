"""One line per table across processes: two services on one database take a raced table's turn in order.

Two real apps in this process, each with its own engine, pool and line, on the same database, as two worker
processes of ``serve --workers 2`` (or two services) are. On PostgreSQL the head of a service's line waits
for the table's turn while the other service holds it (decision 53); a turn nobody comes back for, or held by
a service that went away, passes on; a writer without a ticket is never held. SQLite has no turn between
processes: there the services race in the database, as before, and nothing waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.inprocess import InProcess
from tests.test_line import lost_with_slot, propose, settle


@pytest_asyncio.fixture(loop_scope="session")
async def other(inproc: InProcess) -> AsyncIterator[InProcess]:
    """A second service on the first one's database and storage."""
    s = await InProcess.start(inproc.backend)
    yield s
    await s.stop()


def turn_seconds(table_id: str, seconds: float, *services: InProcess) -> None:
    for s in services:
        memory = s.service.ctx.memories.of(table_id)
        memory.line.turn_seconds = seconds
        assert memory.across is not None
        memory.across.turn_seconds = seconds


async def raced_table(s1: InProcess, s2: InProcess) -> str:
    """A table at version 2 that each service has lost a race for in the database (so both share its turn)."""
    if not s1.store.turns.enabled:
        pytest.skip("SQLite: no turn between processes (decision 53); test_sqlite_services_race_and_nobody_waits")
    table_id, _ = await s1.create_table()
    await s1.commit_ok(table_id, 1)
    lost_with_slot(await propose(s2, table_id, 1), None, 1)  # s2 did not know: lost in the database
    assert (await propose(s2, table_id, 2))[0] == 200
    lost_with_slot(await propose(s1, table_id, 2), None, 1)  # nor did s1
    return table_id


async def test_losers_take_the_next_versions_in_the_order_they_lost_across_services(
        inproc: InProcess, other: InProcess) -> None:
    s1, s2 = inproc, other
    table_id = await raced_table(s1, s2)
    turn_seconds(table_id, 10.0, s1, s2)  # no turn runs out while the test looks
    lost_with_slot(await propose(s2, table_id, 2, "c"), "c", 1)  # s2's head c: s2 takes the table's turn
    a_first = asyncio.ensure_future(propose(s1, table_id, 2, "a"))  # s1's head a waits for it ...
    await settle()
    d_later = asyncio.ensure_future(propose(s2, table_id, 2, "d"))  # ... before s2's d lines up behind c
    await settle()
    assert not a_first.done() and not d_later.done()
    assert (await propose(s2, table_id, 3, "c"))[0] == 200  # c wins 3; s2's round is over: the turn goes to s1
    err = lost_with_slot(await asyncio.wait_for(a_first, 5), "a", 1)  # a lost 3, told from the database's row
    assert err["latestTableVersion"] == 3
    await settle()
    assert not d_later.done()  # d, in the process that held the turn, waits for a
    assert (await propose(s1, table_id, 4, "a"))[0] == 200
    err = lost_with_slot(await asyncio.wait_for(d_later, 5), "d", 1)
    assert err["latestTableVersion"] == 4
    assert (await propose(s2, table_id, 5, "d"))[0] == 200
    assert (await s1.get_commits(table_id))["latestTableVersion"] == 5
    for s in (s1, s2):
        assert s.service.ctx.memories.of(table_id).across.idle  # type: ignore[union-attr]  # every turn given back


async def test_a_round_is_every_ticket_in_line_when_the_turn_is_taken(inproc: InProcess, other: InProcess) -> None:
    """The writers that line up while their service waits for the table's turn are in its round: three of s2's
    writers take three versions before s1's next one (one each per turn made a hand-over per commit, and gave a
    service with one writer as many versions as one with three)."""
    s1, s2 = inproc, other
    table_id = await raced_table(s1, s2)
    turn_seconds(table_id, 10.0, s1, s2)
    lost_with_slot(await propose(s1, table_id, 2, "a"), "a", 1)  # s1 holds the turn, a round of one
    c = asyncio.ensure_future(propose(s2, table_id, 2, "c"))  # s2's head waits for the turn ...
    await settle()
    d = asyncio.ensure_future(propose(s2, table_id, 2, "d"))  # ... while d and e line up behind it
    e = asyncio.ensure_future(propose(s2, table_id, 2, "e"))
    await settle()
    assert (await propose(s1, table_id, 3, "a"))[0] == 200  # s1's round is over: the turn goes to s2
    lost_with_slot(await asyncio.wait_for(c, 5), "c", 1)
    b = asyncio.ensure_future(propose(s1, table_id, 3, "b"))  # s1's next head waits for the turn
    await settle()
    assert (await propose(s2, table_id, 4, "c"))[0] == 200
    assert lost_with_slot(await asyncio.wait_for(d, 5), "d", 1)["latestTableVersion"] == 4
    assert (await propose(s2, table_id, 5, "d"))[0] == 200
    assert lost_with_slot(await asyncio.wait_for(e, 5), "e", 1)["latestTableVersion"] == 5
    await settle()
    assert not b.done()  # s2's round of three is not over yet
    assert (await propose(s2, table_id, 6, "e"))[0] == 200
    assert lost_with_slot(await asyncio.wait_for(b, 5), "b", 1)["latestTableVersion"] == 6
    assert (await propose(s1, table_id, 7, "b"))[0] == 200
    assert (await s2.get_commits(table_id))["latestTableVersion"] == 7


async def test_a_turn_among_services_nobody_comes_back_for_passes_on(inproc: InProcess, other: InProcess) -> None:
    s1, s2 = inproc, other
    table_id = await raced_table(s1, s2)
    turn_seconds(table_id, 0.3, s1, s2)
    lost_with_slot(await propose(s2, table_id, 2, "gone"), "gone", 1)  # s2 takes the turn; its writer never returns
    started = time.monotonic()
    assert (await propose(s1, table_id, 3, "next"))[0] == 200  # held until s2's turn ran out
    waited = time.monotonic() - started
    assert 0.2 <= waited < 3, waited
    assert (await s1.get_commits(table_id))["latestTableVersion"] == 3


async def test_the_turn_of_a_service_that_went_away_passes_on_at_once(inproc: InProcess) -> None:
    s1 = inproc
    s2 = await InProcess.start(inproc.backend)
    try:
        table_id = await raced_table(s1, s2)
        turn_seconds(table_id, 30.0, s1, s2)
        lost_with_slot(await propose(s2, table_id, 2, "c"), "c", 1)  # s2 holds the turn for up to 30 s ...
        held = asyncio.ensure_future(propose(s1, table_id, 3, "a"))
        await settle()
        assert not held.done()
    finally:
        await s2.stop()  # ... and goes away: its connections, and so its turn, with it
    assert (await asyncio.wait_for(held, 3))[0] == 200
    assert (await s1.get_commits(table_id))["latestTableVersion"] == 3


async def test_a_writer_without_a_ticket_is_not_held_by_another_services_turn(
        inproc: InProcess, other: InProcess) -> None:
    s1, s2 = inproc, other
    table_id = await raced_table(s1, s2)
    turn_seconds(table_id, 10.0, s1, s2)
    lost_with_slot(await propose(s2, table_id, 2, "c"), "c", 1)  # s2 holds the table's turn
    started = time.monotonic()
    assert (await propose(s1, table_id, 3))[0] == 200  # an old client races as before, at once
    assert time.monotonic() - started < 0.5
    lost_with_slot(await propose(s2, table_id, 3, "c"), "c", 1)  # c, beaten by it in the database, keeps its turn
    assert (await propose(s2, table_id, 4, "c"))[0] == 200
    assert (await s2.get_commits(table_id))["latestTableVersion"] == 4
    assert s2.service.ctx.memories.of(table_id).across.idle  # type: ignore[union-attr]


async def test_sqlite_services_race_and_nobody_waits(inproc: InProcess, other: InProcess) -> None:
    s1, s2 = inproc, other
    if s1.store.turns.enabled:
        pytest.skip("PostgreSQL: the turn among processes has its own tests here")
    table_id, _ = await s1.create_table()
    await s1.commit_ok(table_id, 1)
    turn_seconds(table_id, 10.0, s1, s2)
    lost_with_slot(await propose(s2, table_id, 1, "b"), "b", 1)  # lost in the database: b keeps s2's turn
    started = time.monotonic()
    assert (await propose(s1, table_id, 2, "a"))[0] == 200  # s1's line is its own: a is not held
    assert time.monotonic() - started < 0.5
    lost_with_slot(await propose(s2, table_id, 2, "b"), "b", 1)
    assert (await propose(s2, table_id, 3, "b"))[0] == 200
    assert (await s1.get_commits(table_id))["latestTableVersion"] == 3


async def test_a_table_no_other_service_commits_to_never_takes_the_turn(inproc: InProcess) -> None:
    s = inproc
    table_id, _ = await s.create_table()
    await s.commit_ok(table_id, 1)
    lost_with_slot(await propose(s, table_id, 1, "b"), "b", 1)  # a loser of this process: told from memory
    for version, ticket in ((2, "a"), (3, "b"), (4, "a")):
        assert (await propose(s, table_id, version, ticket))[0] == 200
    across = s.service.ctx.memories.of(table_id).across
    assert across is not None and across.shared_until == 0.0 and across.idle  # no statement spent on a turn
