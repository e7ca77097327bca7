"""The ownership store (SQLAlchemy): the only place SQL lives."""

from .engine import SchemaOutOfDateError, check_schema, create_engine, migrate
from .rows import CommitRow, TableRow
from .store import OwnershipStore, now_ms, version_message

__all__ = ["OwnershipStore", "CommitRow", "TableRow", "SchemaOutOfDateError", "check_schema", "create_engine",
           "migrate", "now_ms", "version_message"]
