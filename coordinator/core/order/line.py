"""The line of writers racing on one table in this process: the version after a commit goes to the writer that
has waited longest, not to the one that just won (decision 48).

A writer that takes part sends a ticket with each proposal (``Commit-Slot``, any short token it chose, or the
one a 409 handed it). The first proposal of a ticket joins the line at its end. The head of the line has the
table's *turn*: its proposal goes to ratification; every other ticket's proposal is held here until its ticket
reaches the head. A proposal that reaches the head stale (versions were taken while it waited) is answered
with the conflict at once, and the turn waits ``turn_seconds`` for the same ticket's next proposal (the 409
says so: position 1, retry now, no backoff). A turn that ends in a win moves the head to the next ticket; a
turn whose writer does not come back in time expires, so an abandoned ticket never stops the line.

Proposals without a ticket (older clients, the Unity Catalog and Delta REST APIs) never wait: they race for
the version as before, and a head that loses a version to one keeps its turn and tries the next. Racing alone
they would starve, though: a writer that learns the latest version from its 409 and comes back after a backoff
finds it taken again whenever the line commits faster than it loops. So the writers without a ticket share
one place in the line (``OUTSIDERS``, decision 55): the first of them to lose while ticketed writers wait puts
it at the end; when it reaches the head, the table's turn goes to the next proposal without a ticket (the
ticketed ones are held, so the version it learned stays free) and ends when one of them wins, or when none
comes within ``turn_seconds``, as for any ticket. Together they take one turn per round of the line.

The database still decides every race: the line only chooses which of this process's proposals goes to the
database and when. With several processes (``serve --workers``) each has its own line; a ticket is known only
to the process that saw it, so a writer that keeps its connection stays in line. Once processes race for a
table, the heads of their lines take the table's turn among processes in order (``coordinator/core/order/across.py``).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from client.contract.errors import InvalidArgumentError, RetrySlot

#: What a ticket may look like: a short token (a UUID fits).
TICKET_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: A ticketed proposal is held at most this long (seconds), then goes to the database in any case.
HOLD_MAX_SECONDS = 10.0
#: The one place in a line that every writer without a ticket shares (no ticket can be empty).
OUTSIDERS = ""


def parse_ticket(value: str | None) -> str | None:
    """The ``Commit-Slot`` header's ticket, or None without one. Raises InvalidArgumentError."""
    if value is None:
        return None
    if not TICKET_PATTERN.fullmatch(value):
        raise InvalidArgumentError("Commit-Slot must be 1 to 64 letters, digits, '-' or '_' (the ticket a 409's "
                                   "retrySlot handed out, or one the writer chose)")
    return value


@dataclass(frozen=True)
class Pass:
    """How a proposal went to ratification: with its ticket (or none), and whether it used the table's turn."""

    ticket: str | None
    turn: bool = False


OUTSIDE = Pass(None)


class Line:
    """The tickets waiting for one table's turn in this process, oldest first."""

    __slots__ = ("turn_seconds", "hold_max", "order", "deadline", "busy", "_changed")

    def __init__(self, turn_seconds: float, hold_max: float = HOLD_MAX_SECONDS) -> None:
        self.turn_seconds = turn_seconds
        self.hold_max = hold_max
        self.order: OrderedDict[str, None] = OrderedDict()
        self.deadline = 0.0  # the head's turn ends then unless its proposal is being decided
        self.busy = False  # the head's proposal is being decided
        self._changed: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self.order)

    def position(self, ticket: str) -> int:
        """1 for the head, 2 for the next, ...; 0 when the ticket is not in line."""
        for i, t in enumerate(self.order, 1):
            if t == ticket:
                return i
        return 0

    async def enter(self, ticket: str | None) -> Pass:
        """Wait for this proposal's turn: when the line is empty, or for the head. Without a ticket it never
        waits: it takes the turn when the outsiders' place is the head and free, else it races."""
        if self.turn_seconds <= 0:
            return OUTSIDE
        if ticket is None:
            self._expire(time.monotonic())
            if self.order and next(iter(self.order)) == OUTSIDERS and not self.busy:
                self.busy = True
                return Pass(OUTSIDERS, turn=True)
            return OUTSIDE
        give_up = time.monotonic() + self.hold_max
        while True:
            now = time.monotonic()
            self._expire(now)
            if ticket not in self.order:
                self.order[ticket] = None
                if len(self.order) == 1:
                    self._open(now)
            if next(iter(self.order)) == ticket and not self.busy:
                self.busy = True
                return Pass(ticket, turn=True)
            if now >= give_up:
                return Pass(ticket)
            wake = give_up if self.busy else min(give_up, self.deadline)
            changed = self._changed = self._changed or asyncio.Event()
            try:
                await asyncio.wait_for(changed.wait(), max(0.0, wake - now))
            except asyncio.TimeoutError:
                pass

    def leave(self, p: Pass, done: bool) -> RetrySlot | None:
        """The proposal was decided. ``done`` (a win, or a refusal that is not a lost race) ends its ticket's
        place; a lost race keeps it (the head keeps the turn, renewed). Returns the slot to tell a ticketed
        loser (None for a writer without a ticket: ``offer`` gives it one). A racing proposal without a ticket
        that lost while ticketed writers wait puts the outsiders' place at the end of the line."""
        if p.ticket is None:
            if not done and self.turn_seconds > 0 and self.order and OUTSIDERS not in self.order:
                self.order[OUTSIDERS] = None
            return None
        now = time.monotonic()
        if p.turn:
            self.busy = False
        if done:
            if p.ticket in self.order:
                head = next(iter(self.order)) == p.ticket
                del self.order[p.ticket]
                if head and self.order:
                    self._open(now)
                self._notify()
            return None
        if p.turn:
            self._open(now)
            self._notify()
        position = self.position(p.ticket)
        if not position or p.ticket == OUTSIDERS:
            return None
        return RetrySlot(p.ticket, position, int(self.turn_seconds * 1000))

    def offer(self) -> RetrySlot | None:
        """A ticket for a loser that sent none: its place once it comes back with it (none when the line is off)."""
        if self.turn_seconds <= 0:
            return None
        return RetrySlot(uuid.uuid4().hex, len(self.order) + 1, int(self.turn_seconds * 1000))

    def _open(self, now: float) -> None:
        self.deadline = now + self.turn_seconds

    def _expire(self, now: float) -> None:
        """Drop heads whose turn passed without their proposal."""
        expired = False
        while self.order and not self.busy and now >= self.deadline:
            self.order.popitem(last=False)
            self._open(now)
            expired = True
        if expired:
            self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None


__all__ = ["HOLD_MAX_SECONDS", "Line", "OUTSIDE", "OUTSIDERS", "Pass", "TICKET_PATTERN", "parse_ticket"]
