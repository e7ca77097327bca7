"""Migrations 0003 and 0004 on both databases: a store at the revision before with tables upgrades with its
rows intact (unnamed tables; not dropped), and downgrades back."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, inspect, text

from coordinator.store import migrate
from coordinator.store.engine import sync_url


def store_with_a_table(db: str, tmp_path: Any, request: Any, revision: str) -> tuple[str, Engine]:
    """A store (SQLite file or a fresh PostgreSQL database) migrated to ``revision``, holding one owned table."""
    url = (f"sqlite+aiosqlite:///{tmp_path}/m.db" if db == "sqlite"
           else request.getfixturevalue("pg_database_factory")())
    migrate(url, revision=revision)
    engine = create_engine(sync_url(url))
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO owned_tables (table_id, location, commit_dir, base_version, latest_version, "
            "latest_backfilled_version, accepting, status, created_at, updated_at) VALUES "
            "('00000000-0000-0000-0000-000000000001', 'file:///wh/t', '_commits', 0, 3, 3, true, 'ACTIVE', 1, 1)"))
    return url, engine


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_0003_adds_names_beside_existing_tables_and_downgrades(db: str, tmp_path, request) -> None:  # type: ignore[no-untyped-def]
    url, engine = store_with_a_table(db, tmp_path, request, "0002")
    try:
        migrate(url)
        names = set(inspect(engine).get_table_names())
        assert {"catalogs", "schemas", "table_names", "staging_tables"} <= names
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT o.table_id, n.name FROM owned_tables o LEFT JOIN table_names n ON n.table_id = o.table_id"
            )).all()
        assert [tuple(r) for r in rows] == [("00000000-0000-0000-0000-000000000001", None)]
        from alembic import command

        from coordinator.store.engine import _alembic_config

        command.downgrade(_alembic_config(url), "0002")
        assert not {"catalogs", "schemas", "table_names", "staging_tables"} & set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM owned_tables")).scalar() == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_0004_adds_the_dropped_mark_and_the_credential_ledger_and_downgrades(db: str, tmp_path, request) -> None:  # type: ignore[no-untyped-def]
    from alembic import command

    from coordinator.store.engine import _alembic_config

    url, engine = store_with_a_table(db, tmp_path, request, "0003")
    try:
        migrate(url)
        assert "vended_credentials" in set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT table_id, status, dropped_at, dropped_name FROM owned_tables")).all()
        assert [tuple(r) for r in rows] == [("00000000-0000-0000-0000-000000000001", "ACTIVE", None, None)]
        command.downgrade(_alembic_config(url), "0003")
        assert "vended_credentials" not in set(inspect(engine).get_table_names())
        assert not {"dropped_at", "dropped_name"} & {c["name"] for c in inspect(engine).get_columns("owned_tables")}
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM owned_tables")).scalar() == 1
    finally:
        engine.dispose()
