"""The ownership store's tables (SQLAlchemy Core). Alembic migrations in ``schema/`` create them.

``owned_tables`` holds one row per table; ratification is a conditional UPDATE of that row plus an
INSERT into ``commits``, whose primary key (table_id, version) is the final arbiter. Commit rows are
kept after backfill: they are the audit trail and answer late idempotent retries.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    LargeBinary,
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
    Column("status", String(32), nullable=False),  # ACTIVE | RELEASED | FENCED | DROPPED
    Column("status_reason", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("last_commit_at", BigInteger, nullable=True),
    Column("lease_owner", String(64), nullable=True),
    Column("lease_expires_at", BigInteger, nullable=True),
    Column("backfill_error", Text, nullable=True),
    Column("backfill_error_at", BigInteger, nullable=True),
    # DROP TABLE (migration 0004): when, and the name it had; the row and its commits stay as the audit trail.
    Column("dropped_at", BigInteger, nullable=True),
    Column("dropped_name", String(800), nullable=True),
    UniqueConstraint("location", name="uq_owned_tables_location"),
)
# The locations in byte order (migration 0007), whatever the database's collation: PostgreSQL's in the ``C``
# collation (Alembic reflects it by its column, without the collation), for the range "every table below a path"
# (store/tables.py, ``Tables.near``). On SQLite, which compares bytes, it repeats the unique index.
Index("ix_owned_tables_location_bytes", owned_tables.c.location, postgresql_ops={"location": 'COLLATE "C"'})

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
    # The commit's bytes while it is unpublished, when the owner writes its staged file (migration 0005): the
    # database is the write-ahead log of the staged file (core/ratify.py). NULL for writer-staged commits.
    Column("body", LargeBinary, nullable=True),
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

# -- names (migration 0003, the Unity Catalog facade) ------------------------------------------------
# A table's name is optional: ``table_names`` holds one row per named table. Foreign keys keep the
# hierarchy whole (no schema without its catalog, no name without its schema, no drop of a non-empty
# parent); staging reservations go with their schema.

catalogs = Table(
    "catalogs",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("id", String(36), nullable=False),
    Column("comment", Text, nullable=True),
    Column("properties", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    UniqueConstraint("id", name="uq_catalogs_id"),
)

schemas = Table(
    "schemas",
    metadata,
    Column("catalog_name", String(255), ForeignKey("catalogs.name", name="fk_schemas_catalog"), nullable=False),
    Column("name", String(255), nullable=False),
    Column("id", String(36), nullable=False),
    Column("comment", Text, nullable=True),
    Column("properties", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    PrimaryKeyConstraint("catalog_name", "name", name="pk_schemas"),
    UniqueConstraint("id", name="uq_schemas_id"),
)

table_names = Table(
    "table_names",
    metadata,
    Column("table_id", String(36), ForeignKey("owned_tables.table_id", name="fk_table_names_table"),
           primary_key=True),
    Column("catalog_name", String(255), nullable=False),
    Column("schema_name", String(255), nullable=False),
    Column("name", String(255), nullable=False),
    Column("table_type", String(16), nullable=False),
    Column("data_source_format", String(16), nullable=False),
    Column("comment", Text, nullable=True),
    Column("columns", JSON, nullable=False),
    Column("properties", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    UniqueConstraint("catalog_name", "schema_name", "name", name="uq_table_names_name"),
    ForeignKeyConstraint(["catalog_name", "schema_name"], ["schemas.catalog_name", "schemas.name"],
                         name="fk_table_names_schema"),
)

staging_tables = Table(
    "staging_tables",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("catalog_name", String(255), nullable=False),
    Column("schema_name", String(255), nullable=False),
    Column("name", String(255), nullable=False),
    Column("location", String(2048), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    UniqueConstraint("location", name="uq_staging_tables_location"),
    ForeignKeyConstraint(["catalog_name", "schema_name"], ["schemas.catalog_name", "schemas.name"],
                         name="fk_staging_tables_schema", ondelete="CASCADE"),
)

# Credentials vended through the Unity Catalog facade (migration 0004): which token asked, for what, and
# until when they work. No secret is kept; revoking a token reads what outlives it (docs/security.md).
vended_credentials = Table(
    "vended_credentials",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("token_id", String(32), nullable=False),
    Column("location", String(2048), nullable=False),
    Column("operation", String(32), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("issued_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Index("ix_vended_credentials_token", "token_id", "expires_at"),
)

# Multi-table transactions (migration 0006): one row per ratified transaction, written in the same database
# transaction as its commit rows (whose idempotency key is the transaction's id). It answers the replay of a
# transaction whose reply was lost, and the ops view of transactions.
transactions = Table(
    "transactions",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("request_sha256", String(64), nullable=False),  # of what was asked (rules in store/transactions.py)
    Column("commits", JSON, nullable=False),  # [[table_id, version], ...] in table-id order
    Column("committed_at", BigInteger, nullable=False),
    Index("ix_transactions_committed_at", "committed_at"),
)

# What the owner's maintenance did (migration 0008, decision 77): one row per step of `commit-owner maintain`,
# `optimize` or `vacuum` that did something or failed; the table page shows them, the maintain worker spaces
# vacuums by them and keeps only the newest of each table and kind (coordinator/store/maintenance.py).
maintenance_runs = Table(
    "maintenance_runs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("table_id", String(36), nullable=False),
    Column("kind", String(16), nullable=False),  # checkpoint | log_cleanup | optimize | vacuum
    Column("outcome", String(16), nullable=False),  # done | failed
    Column("trigger", String(16), nullable=False),  # policy | command
    Column("started_at", BigInteger, nullable=False),
    Column("finished_at", BigInteger, nullable=False),
    Column("figures", JSON, nullable=False),
    Column("message", Text, nullable=True),
    Index("ix_maintenance_runs_table", "table_id", "kind", "finished_at"),
)

# Which builds may run on each schema revision (migration 0009, decision 81): the oldest schema revision whose
# code still runs on it, and the release whose migration wrote the row. Read at start-up by a build that finds
# a revision newer than it knows (coordinator/store/engine.py: check_schema).
schema_compatibility = Table(
    "schema_compatibility",
    metadata,
    Column("revision", String(32), primary_key=True),
    Column("oldest_code_revision", String(32), nullable=False),
    Column("written_by", String(32), nullable=False),
)
