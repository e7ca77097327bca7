"""Which tables lie at, above or below a path: asked of the location's index, never of every table.

Vending a write credential for a path, and expiring a staging reservation, both ask it. The answer must be
exactly the scopes' rule (``covers`` in both directions: path-segment boundaries), on SQLite and on
PostgreSQL whatever the database's collation: an ICU collation sorts ``+`` and ``$`` between ``/`` and ``0``,
so a byte-order range read in it would take ``/w/x+y`` for a table below ``/w/x``. On PostgreSQL the plan
must use an index, with many more tables registered than the answer holds.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from coordinator.bench.growth import add_grown_tables
from coordinator.security.tokens import covers
from coordinator.store import OwnershipStore, migrate
from coordinator.store import create_engine as create_async_store_engine
from tests.test_sweep import plain_connection

ICU = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"

PLACES = ["w/x", "w/x/y", "w/x/y/z", "w/x+y", "w/x$y", "w/x-y", "w/x.y", "w/xy", "w/x0", "w/X", "w/x/Y",
          "v/x", "w"]
ASKED = ["w/x", "w/x/y", "w/x/y/z/deeper", "w", "w/x+y", "w/x-", "w/X", "v", "u", "w/x/q", "w/x0/a"]


@pytest.fixture(params=["sqlite", "postgres", "postgres-icu"])
def database_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/near.db"
    else:
        url = request.getfixturevalue("pg_database_factory")(ICU if request.param == "postgres-icu" else "")
    migrate(url)
    return url


async def test_tables_near_a_path_are_exactly_those_the_segment_rule_names(database_url: str, tmp_path: Any) -> None:
    engine = create_async_store_engine(database_url)
    store = OwnershipStore(engine)
    root = (tmp_path / "t").as_uri()
    try:
        for place in PLACES:
            await store.register(str(uuid.uuid4()), f"{root}/{place}", "_commits", 0)
        every = await store.list_tables()
        assert len(every) == len(PLACES)
        for asked in ASKED:
            loc = f"{root}/{asked}"
            want = sorted(t.location for t in every if covers(loc, t.location) or covers(t.location, loc))
            got = [t.location for t in await store.tables_near(loc)]
            assert got == want, asked
        # Spot checks of the rule itself, so a wrong `covers` cannot make both sides agree.
        assert [t.location for t in await store.tables_near(f"{root}/w/x+y")] == [f"{root}/w", f"{root}/w/x+y"]
        assert [t.location for t in await store.tables_near(f"{root}/u")] == []
    finally:
        await engine.dispose()


def test_the_tables_below_a_path_are_read_through_an_index(pg_database_factory: Any, tmp_path: Any) -> None:
    from sqlalchemy.dialects import postgresql

    from coordinator.store.tables import near_statement

    url = pg_database_factory(ICU)
    migrate(url)
    db, _ = plain_connection(url)
    try:
        add_grown_tables(db, False, (tmp_path / "grown-").as_uri(), 20000, 1)
        sql = str(near_statement("file:///somewhere/below", "postgresql").compile(
            dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
        plan = " | ".join(str(r[0]) for r in db.execute("EXPLAIN " + sql).fetchall())
        assert "ix_owned_tables_location_bytes" in plan, plan
        assert "uq_owned_tables_location" in plan, plan
        assert "Seq Scan on owned_tables" not in plan, plan
    finally:
        db.close()
