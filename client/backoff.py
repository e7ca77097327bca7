"""How long to wait before trying again: bounded exponential backoff with full jitter, the one rule of it.

Full jitter (a delay drawn uniformly from zero to the bound) spreads writers that failed together over the
whole window, so they do not come back together; the bound doubles with each attempt up to a cap. A writer the
owner gave a place in the table's line does not wait: the owner orders the retries itself.
"""

from __future__ import annotations

import random

from client.contract.errors import RetrySlot

#: A commit that lost the race for its version waits up to this long before its first new attempt ...
CONFLICT_BACKOFF_BASE = 0.002
#: ... doubling with each further loss, never more than this (seconds).
CONFLICT_BACKOFF_MAX = 0.1


def full_jitter(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (0 for the first): uniform in [0, min(cap, base * 2**attempt)]."""
    bound = min(cap, base * (2 ** min(max(attempt, 0), 60)))
    return (rng or random).uniform(0.0, bound)


def conflict_delay(losses: int, rng: random.Random | None = None) -> float:
    """Seconds a writer waits after losing the race for a version ``losses`` times in a row (1 for the first)."""
    return full_jitter(losses - 1, CONFLICT_BACKOFF_BASE, CONFLICT_BACKOFF_MAX, rng)


def conflict_wait(losses: int, slot: RetrySlot | None, rng: random.Random | None = None) -> float:
    """Seconds to wait after a lost race: none when the owner gave the writer a place in the table's line (it
    holds the retry until the writer's turn, decision 48), else the jittered :func:`conflict_delay`."""
    return 0.0 if slot is not None else conflict_delay(losses, rng)


__all__ = ["CONFLICT_BACKOFF_BASE", "CONFLICT_BACKOFF_MAX", "conflict_delay", "conflict_wait", "full_jitter"]
