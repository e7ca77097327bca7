"""Ownership store: owned tables and their commits.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "owned_tables",
        sa.Column("table_id", sa.String(36), primary_key=True),
        sa.Column("location", sa.String(2048), nullable=False),
        sa.Column("commit_dir", sa.String(32), nullable=False),
        sa.Column("base_version", sa.BigInteger, nullable=False),
        sa.Column("latest_version", sa.BigInteger, nullable=False),
        sa.Column("latest_backfilled_version", sa.BigInteger, nullable=False),
        sa.Column("last_commit_timestamp", sa.BigInteger, nullable=True),
        sa.Column("accepting", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("status_reason", sa.Text, nullable=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("last_commit_at", sa.BigInteger, nullable=True),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_expires_at", sa.BigInteger, nullable=True),
        sa.Column("backfill_error", sa.Text, nullable=True),
        sa.Column("backfill_error_at", sa.BigInteger, nullable=True),
        sa.UniqueConstraint("location", name="uq_owned_tables_location"),
    )
    op.create_table(
        "commits",
        sa.Column("table_id", sa.String(36), sa.ForeignKey("owned_tables.table_id"), nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("file_name", sa.String(128), nullable=False),
        sa.Column("idempotency_key", sa.String(36), nullable=False),
        sa.Column("file_size", sa.BigInteger, nullable=False),
        sa.Column("file_modification_time", sa.BigInteger, nullable=False),
        sa.Column("commit_timestamp", sa.BigInteger, nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("ratified_at", sa.BigInteger, nullable=False),
        sa.Column("backfilled_at", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("table_id", "version", name="pk_commits"),
        sa.UniqueConstraint("table_id", "idempotency_key", name="uq_commits_idempotency_key"),
    )
    op.create_index(
        "ix_commits_unbackfilled",
        "commits",
        ["table_id", "version"],
        postgresql_where=sa.text("backfilled_at IS NULL"),
        sqlite_where=sa.text("backfilled_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_commits_unbackfilled", table_name="commits")
    op.drop_table("commits")
    op.drop_table("owned_tables")
