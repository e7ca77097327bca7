"""A ratified commit's bytes are kept in its row until it is published.

``commits.body``: the commit file's bytes as the owner ratified them, for commits whose staged file the owner
writes itself (``/api/v1``); NULL for writer-staged commits (the writer's file is the record, judged by its
SHA-256) and once the commit is published as ``<v>.json``. With the bytes in the row, the owner writes the
staged file in parallel with the ratifying transaction rather than before it, and rewrites a staged file that
a crash left unwritten from the row before any reader is told about it (docs/decisions.md, the database as
the write-ahead log).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("commits") as batch:
        batch.add_column(sa.Column("body", sa.LargeBinary, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("commits") as batch:
        batch.drop_column("body")
