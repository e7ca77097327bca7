"""``Catalog.check_managed``: a preview commit without metadata reads a table's name row once per process, and
still refuses what ``Catalog.managed`` refuses (a table it has not seen MANAGED, a dropped one)."""

from __future__ import annotations

from typing import Any

import pytest

from client.contract.errors import InvalidArgumentError
from client.contract.layout import STAGED_COMMITS_DIR
from coordinator.core.catalog import Catalog
from coordinator.store.rows import EXTERNAL, MANAGED, TableRow


class Names:
    """The one NameStore read ``check_managed`` makes, counted."""

    def __init__(self, types: dict[str, str]) -> None:
        self.types = types
        self.reads = 0

    async def name_of(self, table_id: str) -> Any:
        self.reads += 1
        kind = self.types.get(table_id)
        return None if kind is None else type("Name", (), {"table_type": kind})()


def table(table_id: str, commit_dir: str = STAGED_COMMITS_DIR, dropped_at: int | None = None) -> TableRow:
    return TableRow(table_id=table_id, location=f"file:///w/{table_id}", commit_dir=commit_dir, base_version=0,
                    latest_version=3, latest_backfilled_version=3, last_commit_timestamp=None, accepting=True,
                    status="ACTIVE", status_reason=None, created_at=0, updated_at=0, last_commit_at=None,
                    dropped_at=dropped_at)


async def test_a_managed_table_is_read_once_then_known() -> None:
    names = Names({"m": MANAGED})
    catalog = Catalog(None, names)  # type: ignore[arg-type]
    for _ in range(3):
        await catalog.check_managed(table("m"))
    assert names.reads == 1


async def test_what_managed_refuses_is_refused_every_time() -> None:
    names = Names({"e": EXTERNAL})
    catalog = Catalog(None, names)  # type: ignore[arg-type]
    for t in (table("e"), table("e"), table("gone")):
        with pytest.raises(InvalidArgumentError):
            await catalog.check_managed(t)
    assert names.reads == 3  # a refusal is never remembered


async def test_a_known_table_is_judged_again_when_its_row_says_dropped_or_owner_written() -> None:
    names = Names({"m": MANAGED})
    catalog = Catalog(None, names)  # type: ignore[arg-type]
    await catalog.check_managed(table("m"))
    names.types.clear()  # the name went with the table
    with pytest.raises(InvalidArgumentError):
        await catalog.check_managed(table("m", dropped_at=1))
    with pytest.raises(InvalidArgumentError):
        await catalog.check_managed(table("m", commit_dir="_commits"))
    assert names.reads == 3
