"""The SQLAlchemy models (``coordinator/store/schema.py``) and the Alembic migrations (``schema/versions/``)
describe the same database: a fresh database migrated to head, compared with the models by Alembic's
autogenerate, shows no difference, on SQLite and on PostgreSQL.

A difference means one of the two was changed without the other: add a migration (never edit one that
shipped) or fix the model, whichever states the truth.
"""

from __future__ import annotations

import pprint
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from coordinator.store import migrate
from coordinator.store.engine import sync_url
from coordinator.store.schema import metadata


def _diff(url: str) -> list[Any]:
    engine = create_engine(sync_url(url))
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
            return list(compare_metadata(ctx, metadata))
    finally:
        engine.dispose()


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_the_migrations_build_what_the_models_describe(db: str, tmp_path: Any, request: pytest.FixtureRequest) -> None:
    url = (f"sqlite+aiosqlite:///{tmp_path}/drift.db" if db == "sqlite"
           else request.getfixturevalue("pg_database_factory")())
    migrate(url)  # what `commit-owner migrate --database-url ...` runs
    diff = _diff(url)
    assert diff == [], "the models and the migrations disagree (add a migration or fix the model):\n" + \
        pprint.pformat(diff, width=140)
