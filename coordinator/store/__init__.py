"""The ownership store (SQLAlchemy): the service's SQL."""

from .commits import version_message
from .engine import check_database, check_schema, create_engine, migrate, open_engine
from .rows import CommitRow, TableRow, now_ms
from .store import OwnershipStore

__all__ = ["OwnershipStore", "CommitRow", "TableRow", "check_schema", "create_engine",
           "check_database", "open_engine", "migrate", "now_ms", "version_message"]
