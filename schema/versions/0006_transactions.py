"""Multi-table transactions: one row per ratified transaction (issue 28).

``transactions``: the transaction's id (its idempotency key, also the idempotency key of each of its commit
rows), the checksum of what was asked (a replay with the same key must ask the same), the tables and versions
it ratified, and when. Written in the same database transaction as the commit rows (docs/transactions.md).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "transactions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("request_sha256", sa.String(64), nullable=False),
        sa.Column("commits", sa.JSON, nullable=False),
        sa.Column("committed_at", sa.BigInteger, nullable=False),
        sa.Index("ix_transactions_committed_at", "committed_at"),
    )


def downgrade() -> None:
    op.drop_table("transactions")
