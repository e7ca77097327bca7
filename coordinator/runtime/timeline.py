"""Commit outcomes per minute in this process, over the last hours: what the browser UI charts as conflicts
(409 ``COMMIT_VERSION_CONFLICT``) and refusals (every other refused commit), owner-wide.

Kept in memory (decision 45): the database records only the commits that won, and a refusal writes nothing
there. With ``serve --workers N`` each process keeps its own; a restart starts from nothing.
"""

from __future__ import annotations

import time
from collections import deque

CONFLICT = "COMMIT_VERSION_CONFLICT"
#: Minutes kept.
KEPT_MINUTES = 24 * 60


class OutcomeTimeline:
    def __init__(self, kept_minutes: int = KEPT_MINUTES) -> None:
        # (minute since the epoch, conflicts, refusals), oldest first, only minutes with one or the other
        self._minutes: deque[list[int]] = deque(maxlen=kept_minutes)

    def observe(self, outcome: str, now: float | None = None) -> None:
        """Count one commit's outcome (``ok`` counts nothing here: accepted commits are in the database)."""
        if outcome == "ok":
            return
        minute = int((time.time() if now is None else now) // 60)
        if not self._minutes or self._minutes[-1][0] != minute:
            self._minutes.append([minute, 0, 0])
        self._minutes[-1][1 if outcome == CONFLICT else 2] += 1

    def since(self, minute: int) -> list[tuple[int, int, int]]:
        """``(minute, conflicts, refusals)`` of the minutes from ``minute`` on that saw any."""
        return [(m, c, r) for m, c, r in self._minutes if m >= minute]
