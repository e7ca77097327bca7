"""An index of table locations in byte order, for "the tables at, above or below a path" (issue 26).

Vending a path credential asks which tables lie at, above or below a path. Ancestors are found by equality
(the unique location index); descendants are the locations from ``path + "/"`` to ``path + "0"`` in byte
order. PostgreSQL compares text in the database's collation, which need not be byte order (ICU's ``en-US``
sorts ``+`` and ``$`` between ``/`` and ``0``), so the range is asked in the ``C`` collation and needs an index
in that collation. SQLite compares bytes already; it gets the same index (one spelling of the schema for both,
a few bytes per table).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_owned_tables_location_bytes", "owned_tables", ["location"],
                    postgresql_ops={"location": 'COLLATE "C"'})


def downgrade() -> None:
    op.drop_index("ix_owned_tables_location_bytes", table_name="owned_tables")
