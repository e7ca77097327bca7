"""Bearer tokens of the HTTP API: id, hash of the secret, scopes, created, revoked.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        # sha256 (hex) of the token's secret part; the secret itself is never stored.
        sa.Column("hash", sa.String(64), nullable=False),
        # [{"prefix": "s3://bucket/team-a" | "*", "actions": ["read" | "commit" | "admin", ...]}, ...]
        sa.Column("scopes", sa.JSON, nullable=False),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("revoked", sa.BigInteger, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("tokens")
