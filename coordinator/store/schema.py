"""The ownership store's tables (SQLAlchemy Core). Alembic migrations in ``schema/`` create them.

``owned_tables`` holds one row per table; ratification is a conditional UPDATE of that row plus an
INSERT into ``commits``, whose primary key (table_id, version) is the final arbiter. Commit rows are
kept after backfill: they are the audit trail and answer late idempotent retries.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    JSON,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

owned_tables = Table(
    "owned_tables",
    metadata,
    Column("table_id", String(36), primary_key=True),
    Column("location", String(2048), nullable=False),
    Column("commit_dir", String(32), nullable=False),
    # Version the client writes itself at registration (currentVersion + 1); never ratified here.
    Column("base_version", BigInteger, nullable=False),
    # Highest version known to exist: base_version until the first ratified commit.
    Column("latest_version", BigInteger, nullable=False),
    Column("latest_backfilled_version", BigInteger, nullable=False),
    Column("last_commit_timestamp", BigInteger, nullable=True),
    Column("accepting", Boolean, nullable=False),
    Column("status", String(32), nullable=False),  # ACTIVE | RELEASED | FENCED
    Column("status_reason", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("last_commit_at", BigInteger, nullable=True),
    Column("lease_owner", String(64), nullable=True),
    Column("lease_expires_at", BigInteger, nullable=True),
    Column("backfill_error", Text, nullable=True),
    Column("backfill_error_at", BigInteger, nullable=True),
    UniqueConstraint("location", name="uq_owned_tables_location"),
)

commits = Table(
    "commits",
    metadata,
    Column("table_id", String(36), ForeignKey("owned_tables.table_id"), nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("file_name", String(128), nullable=False),
    Column("idempotency_key", String(36), nullable=False),
    Column("file_size", BigInteger, nullable=False),
    Column("file_modification_time", BigInteger, nullable=False),
    Column("commit_timestamp", BigInteger, nullable=False),
    Column("content_sha256", String(64), nullable=False),
    Column("ratified_at", BigInteger, nullable=False),
    Column("backfilled_at", BigInteger, nullable=True),
    PrimaryKeyConstraint("table_id", "version", name="pk_commits"),
    UniqueConstraint("table_id", "idempotency_key", name="uq_commits_idempotency_key"),
    Index(
        "ix_commits_unbackfilled",
        "table_id",
        "version",
        postgresql_where=Column("backfilled_at").is_(None),
        sqlite_where=Column("backfilled_at").is_(None),
    ),
)

# Bearer tokens of the HTTP API (migration 0002). Only a hash of the secret is kept; ``scopes`` is a JSON
# list of {"prefix": <location prefix or "*">, "actions": ["read" | "commit" | "admin", ...]}.
tokens = Table(
    "tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("hash", String(64), nullable=False),
    Column("scopes", JSON, nullable=False),
    Column("created", BigInteger, nullable=False),
    Column("revoked", BigInteger, nullable=True),  # ms since the epoch; NULL while the token is valid
)
