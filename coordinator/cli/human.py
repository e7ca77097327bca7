"""How the human output of every command spells a value (``--json`` keeps the real JSON values).

One place, so that no listing prints Python's ``None``, ``True`` or ``False`` or a raw millisecond count.
"""

from __future__ import annotations

from typing import Any

NONE = "-"


def cell(value: Any) -> str:
    """A value for a person: nothing is ``-``, a flag is yes/no, a list is comma-separated."""
    if value is None or value == "":
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value) or NONE
    return str(value)


def when(ms: int | None) -> str:
    """Milliseconds since the epoch as an ISO-8601 UTC time to the second; ``-`` for none."""
    from coordinator.ops.context import iso_time

    return iso_time(ms) or NONE
