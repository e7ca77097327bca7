"""Python client of delta-commit-owner: the Delta commit-owner contract over HTTP.

Imports only the standard library, so Spark drivers and ops scripts need nothing else.
"""

from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .http import CommitOwnerClient, encode_actions
from .models import Commit, CommitsPage, TableInfo

__all__ = ["CommitOwnerClient", "Commit", "CommitsPage", "TableInfo", "encode_actions", *_errors_all]
