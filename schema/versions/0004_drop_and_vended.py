"""Dropped tables stay on record; vended credentials are remembered per token.

``owned_tables.dropped_at`` (ms since the epoch, NULL while the table is live) and ``dropped_name`` (the
``catalog.schema.table`` it had): DROP TABLE publishes every ratified commit, frees the name and keeps the
ownership row and its commit rows as the audit trail, marked dropped (docs/decisions.md, DROP TABLE).

``vended_credentials``: one row per credential the owner vended (POST /temporary-*-credentials), with the
token that asked and when it expires, so that revoking a token can say which credentials outlive it and
until when (docs/security.md). No secret is stored.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("owned_tables") as batch:
        batch.add_column(sa.Column("dropped_at", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("dropped_name", sa.String(800), nullable=True))
    op.create_table(
        "vended_credentials",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("token_id", sa.String(32), nullable=False),  # "-" without --auth tokens
        sa.Column("location", sa.String(2048), nullable=False),
        sa.Column("operation", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),  # s3 | local
        sa.Column("issued_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Index("ix_vended_credentials_token", "token_id", "expires_at"),
    )


def downgrade() -> None:
    op.drop_table("vended_credentials")
    with op.batch_alter_table("owned_tables") as batch:
        batch.drop_column("dropped_name")
        batch.drop_column("dropped_at")
