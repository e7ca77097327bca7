"""What the owner's maintenance did to each table: one row per step that did something or failed.

``maintenance_runs`` is written by `commit-owner maintain` (its policy: checkpoints, log cleanup, compaction,
vacuum), `commit-owner optimize` and `commit-owner vacuum`, processes of their own; the web UI's table page reads
it, and the maintain worker reads the last vacuum of a table to space vacuums out (issue 42, decision 77). The
worker keeps the newest rows of each table and kind and deletes the rest, so the table stays small for years.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "maintenance_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("table_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),  # checkpoint | log_cleanup | optimize | vacuum
        sa.Column("outcome", sa.String(16), nullable=False),  # done | failed
        sa.Column("trigger", sa.String(16), nullable=False),  # policy | command
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("finished_at", sa.BigInteger, nullable=False),
        sa.Column("figures", sa.JSON, nullable=False),
        sa.Column("message", sa.Text, nullable=True),
        sa.Index("ix_maintenance_runs_table", "table_id", "kind", "finished_at"),
    )


def downgrade() -> None:
    op.drop_table("maintenance_runs")
