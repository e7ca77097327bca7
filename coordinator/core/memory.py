"""What this process knows of a table's newest commits, and where its proposals wait (``TableMemory``).

Not to be confused with a table's *turn* (``core/order/across.py``, ``store/turns.py``): the turn is a
process's exclusive go at a table shared among processes; a table's memory lives in one process only.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque

from client.contract.errors import CommitVersionConflictError
from coordinator.core.order.across import Across
from coordinator.core.order.line import Line
from coordinator.core.rows import Handed
from coordinator.store import version_message
from coordinator.store.turns import TableTurns

#: A table that saw a conflict keeps its last this many commits ratified here in memory to answer the next ones.
RECENT_COMMITS_KEPT = 16
#: How many tables' memories a process keeps; beyond, idle ones are let go a thousand at a time.
MEMORIES_KEPT = 100_000


class TableMemory:
    """One table inside this process: its proposals taken one at a time (``lock``), the highest version seen
    ratified, and once the table saw a conflict its last commits.

    Versions only grow, so a proposal at or below ``latest`` is certainly stale, whatever other processes
    did since: it is answered with a conflict (and the latest version) without touching storage or the
    database. The database stays the judge of every proposal that might win.
    """

    __slots__ = ("lock", "latest", "recent", "queued", "line", "across")

    def __init__(self, turn_seconds: float = 0.0, across: Across | None = None) -> None:
        self.lock = asyncio.Lock()
        self.line = Line(turn_seconds)  # the ticketed writers waiting for the table's turn (decision 48)
        self.across = across  # the table's turn among processes (decision 53); None: the line is off
        self.latest = -1
        self.queued = 0  # proposals waiting for the lock
        # The last commits this process ratified, kept once the table saw a conflict: losers are then told
        # what they missed from memory, without a query per conflict.
        self.recent: deque[Handed] | None = None

    def stale(self, version: int) -> CommitVersionConflictError | None:
        if version > self.latest:
            return None
        return CommitVersionConflictError(version_message(version, self.latest + 1),
                                          latest_table_version=self.latest)

    def saw(self, version: int | None) -> None:
        if version is not None and version > self.latest:
            self.latest = version

    def ratified(self, commit: Handed) -> None:
        version = commit.row.version
        if self.recent is not None and (not self.recent or version > self.recent[-1].row.version):
            self.recent.append(commit)  # (an idempotent replay of an older version is not news)
        self.saw(version)

    def learned(self, commits: list[Handed]) -> None:
        """Keep ``commits`` (consecutive, read from the database: another process ratified some) beside the ones
        this process ratified, so that the next losers of a shared table are answered from memory too."""
        if not commits:
            return
        kept = {c.row.version: c for c in self.recent or ()}
        kept.update((c.row.version, c) for c in commits)
        self.recent = deque((kept[v] for v in sorted(kept)), maxlen=RECENT_COMMITS_KEPT)
        self.saw(commits[-1].row.version)

    def unseen(self, version: int, limit: int) -> list[Handed] | None:
        """The commits from ``version`` to ``latest`` when this process ratified every one of them (and they
        are within ``limit``); else None. Starts keeping commits on a table's first conflict."""
        if self.recent is None:
            self.recent = deque(maxlen=RECENT_COMMITS_KEPT)
            return None
        if self.latest < version or self.latest - version + 1 > limit:
            return None
        commits = [c for c in self.recent if c.row.version >= version]
        return commits if [c.row.version for c in commits] == list(range(version, self.latest + 1)) else None

    @property
    def idle(self) -> bool:
        return not self.lock.locked() and not self.line and (self.across is None or self.across.idle)


class Memories:
    """The process's ``TableMemory`` of each table it commits to, made on first use."""

    def __init__(self, turns: TableTurns, turn_seconds: float) -> None:
        self._turns = turns
        self._turn_seconds = turn_seconds
        self._kept: OrderedDict[str, TableMemory] = OrderedDict()

    def get(self, table_id: str) -> TableMemory | None:
        return self._kept.get(table_id)

    def of(self, table_id: str) -> TableMemory:
        m = self._kept.get(table_id)
        if m is None:
            seconds = self._turn_seconds
            across = Across(self._turns, table_id, seconds) if seconds > 0 else None
            m = self._kept[table_id] = TableMemory(seconds, across)
            if len(self._kept) > MEMORIES_KEPT:
                for key in list(self._kept)[:1000]:
                    if self._kept[key].idle:
                        del self._kept[key]
        return m

    def pop(self, table_id: str) -> None:
        self._kept.pop(table_id, None)


__all__ = ["RECENT_COMMITS_KEPT", "Memories", "TableMemory"]
