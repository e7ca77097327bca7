"""PySpark integration of delta-commit-owner.

Two paths:

* :func:`use_commit_owner` / :func:`spark_session_with_commit_owner`: delta-spark's own transaction
  code routes the commits of owned tables to this owner through a py4j bridge (needs delta-spark's jars).
* :func:`write_table` / :func:`read_table`: Spark writes the Parquet files, this client writes the Delta
  actions and commits them through the owner (needs no Delta jars).

Importing this package requires pyspark (the ``spark`` extra).
"""

from __future__ import annotations

try:
    import pyspark  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "client.spark needs pyspark: from a clone, .venv/bin/pip install -e '.[spark]'"
    ) from e

from client.spark.bridge import (
    CommitDirMismatchError,
    DeltaSparkUnavailableError,
    OwnerBridge,
    use_commit_owner,
)
from client.spark.pipeline import read_table, write_table
from client.spark.session import spark_session_with_commit_owner

__all__ = [
    "CommitDirMismatchError",
    "DeltaSparkUnavailableError",
    "OwnerBridge",
    "read_table",
    "spark_session_with_commit_owner",
    "use_commit_owner",
    "write_table",
]
