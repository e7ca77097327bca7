"""One table's turn among processes, as this process takes part in it (decision 53).

Each process has its own line per table (``coordinator/core/order/line.py``). When other processes take commits for the
same table, the heads of their lines race in the database, and every turn the loser has written a staged file
and run its statement for nothing. So, once a table is *shared* (this process lost a race in the database for
it, or found its turn held by another process, within ``SHARED_SECONDS``), the head of this process's line
first takes the table's turn among processes (``store/turns.py``: it waits there, in order, while another
process holds it) and this process keeps it for one *round*: as many wins as it had tickets in line when it
took it (each of its writers one version), at most ``ROUND_MAX_SECONDS``, or until its line is empty or its
head stays away ``turn_seconds``. Then it gives the turn back, and a process waiting for it goes next.

A table only one process takes commits for is never shared: the uncontended path runs no extra statement. An
old client's proposal (no ticket) never waits for the turn. Taking the turn decides nothing: the database's
conditional statement still judges each proposal, and a process that could not take the turn (a timeout, too
many turns held, SQLite) races as it did without one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sized

from coordinator.store.turns import Held, TableTurns

#: A table counts as raced by another process this long after the last sign of it (seconds).
SHARED_SECONDS = 10.0
#: A process gives a table's turn back after this long at the latest (seconds), its round over or not.
ROUND_MAX_SECONDS = 1.0


def wait_seconds(turn_seconds: float) -> float:
    """How long a head waits for another process to give the turn back: longer than a round can keep it."""
    return ROUND_MAX_SECONDS + 2 * turn_seconds + 1.0


class Across:
    """This process's hold on one table's turn among processes."""

    __slots__ = ("turns", "table_id", "turn_seconds", "shared_until", "held", "quota", "round_ends", "uses",
                 "in_use", "_giving", "_timer")

    def __init__(self, turns: TableTurns | None, table_id: str, turn_seconds: float) -> None:
        self.turns = turns
        self.table_id = table_id
        self.turn_seconds = turn_seconds
        self.shared_until = 0.0
        self.held: Held | None = None
        self.quota = 0  # wins left in this process's round
        self.round_ends = 0.0
        self.uses = 0
        self.in_use = False
        self._giving: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def contended(self) -> None:
        """Another process took a version of this table (or held its turn): share the turn for a while."""
        if self.turns is not None and self.turns.enabled:
            self.shared_until = time.monotonic() + SHARED_SECONDS

    @property
    def shared(self) -> bool:
        """Whether another process raced for this table within ``SHARED_SECONDS``."""
        return time.monotonic() < self.shared_until

    async def enter(self, line: Sized) -> int | None:
        """Before the head of this process's ``line`` proposes: hold the table's turn if the table is shared.
        Returns the table's latest version when the turn was just taken (else None)."""
        if self._giving is not None:
            await asyncio.shield(self._giving)
        self.uses += 1
        if self.held is not None:
            self.in_use = True
            return None
        if self.turns is None or not self.shared:
            return None
        held = await self.turns.take(self.table_id)
        if held is None:
            return None
        if held.waited:
            self.contended()
        self.held, self.in_use = held, True
        # The round: every ticket in line once the turn is taken. Counted before the wait, it missed the
        # writers that joined meanwhile (those of the last round, back with their next proposals): rounds of
        # one commit each, a hand-over per commit.
        self.quota = max(1, len(line))
        self.round_ends = time.monotonic() + ROUND_MAX_SECONDS
        return held.latest

    async def leave(self, counted: bool, waiting: int) -> None:
        """The head's proposal was decided; ``counted``: it ended its ticket's place (a win, or a refusal that is
        not a lost race). Gives the turn back when the round is over; else watches for an absent head."""
        if self.held is None or not self.in_use:
            return
        self.in_use = False
        if counted:
            self.quota -= 1
        if self.quota <= 0 or waiting == 0 or time.monotonic() >= self.round_ends:
            giving = self._giving = asyncio.get_running_loop().create_task(self._give())
            await asyncio.shield(giving)
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.turn_seconds, self._idle, self.uses)

    def _idle(self, uses: int) -> None:
        """The head did not come back within ``turn_seconds``: let the next process in."""
        self._timer = None
        if self.held is not None and not self.in_use and self.uses == uses and self._giving is None:
            self._giving = asyncio.get_running_loop().create_task(self._give())

    async def _give(self) -> None:
        held, self.held = self.held, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        try:
            if held is not None and self.turns is not None:
                await self.turns.give(held)
        finally:
            self._giving = None

    @property
    def idle(self) -> bool:
        """Nothing held: this process may forget the table."""
        return self.held is None and self._giving is None


__all__ = ["ROUND_MAX_SECONDS", "SHARED_SECONDS", "Across", "wait_seconds"]
