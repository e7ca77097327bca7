"""The ownership store (SQLAlchemy): the service's SQL."""

from coordinator.store.commits import version_message
from coordinator.store.engine import check_database, check_schema, create_engine, migrate, open_engine
from coordinator.store.rows import CommitRow, TableRow, now_ms
from coordinator.store.store import OwnershipStore

__all__ = ["OwnershipStore", "CommitRow", "TableRow", "check_schema", "create_engine",
           "check_database", "open_engine", "migrate", "now_ms", "version_message"]
