"""Python client of delta-commit-owner: the Delta commit-owner contract over HTTP.

Imports only the standard library, so Spark drivers and ops scripts need nothing else. :func:`write_table`
writes pyarrow, pandas or Polars data to an owned table and :func:`read_table` reads it back through the owner
(both import pyarrow when called).
"""

from client.contract.errors import *  # noqa: F401,F403
from client.contract.errors import __all__ as _errors_all
from client.http import CommitOwnerClient, encode_actions
from client.models import Commit, CommitsPage, TableInfo, TransactionResult
from client.read import read_table, read_tables
from client.transaction import Transaction, transaction
from client.write import write_table

__all__ = ["CommitOwnerClient", "Commit", "CommitsPage", "TableInfo", "Transaction", "TransactionResult", "encode_actions",
           "read_table", "read_tables", "transaction", "write_table", *_errors_all]
