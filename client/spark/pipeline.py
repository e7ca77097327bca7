"""A PySpark pipeline that needs no Delta jars: Spark writes Parquet, this client commits through the owner.

``write_table`` writes the DataFrame's Parquet files into a fresh folder under the table and describes them
with statistics (:class:`SparkFiles`); checking, committing, rebasing a lost append, failing an overwrite that
lost with :class:`TableChangedError` and deleting the folder of a write that committed nothing are the
shared committer's (:mod:`client.commit`, also behind the pyarrow writer :func:`client.write_table`).

``read_table`` reads the active files of any version through the snapshot reader of :mod:`client.snapshot`,
which includes commits the owner ratified but has not yet backfilled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import reduce
from typing import Any
from urllib.parse import unquote

from client.actions import DataFile, Mode
from client.commit import WriteOptions, WriteResult, write_and_commit
from client.contract.errors import TableChangedError
from client.contract.layout import normalize_location
from client.http import CommitOwnerClient
from client.read import check_readable
from client.spark.stats import collect_data_files


def _spark_path(location: str) -> str:
    """The path Spark's Hadoop file systems understand for an owner location (``s3://`` -> ``s3a://``)."""
    return "s3a://" + location[len("s3://"):] if location.startswith("s3://") else location


class SparkFiles:
    """The Spark file writer of the shared committer (:func:`client.commit.write_and_commit`): Spark writes the
    Parquet files, one Spark aggregation gives their statistics, Hadoop's file system deletes a discarded folder."""

    def __init__(self, df: Any, location: str) -> None:
        self.df = df
        self.root = _spark_path(normalize_location(location))

    def write(self, folder: str, partition_by: Sequence[str]) -> list[DataFile]:
        written = f"{self.root}/{folder}"
        self.df.write.mode("errorifexists").partitionBy(*partition_by).parquet(written)
        data_schema = _data_schema(self.df.schema, partition_by)
        return collect_data_files(self.df.sparkSession, written, folder + "/", data_schema, list(partition_by))

    def discard(self, folder: str) -> None:
        spark = self.df.sparkSession
        jvm = spark.sparkContext._jvm
        p = jvm.org.apache.hadoop.fs.Path(f"{self.root}/{folder}")
        p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(p, True)


def write_table(
    df: Any,
    location: str,
    *,
    mode: Mode = "append",
    partition_by: Sequence[str] | None = None,
    client: CommitOwnerClient | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    protocol: str = "managedCommit",
    full_name: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    before_commit: Callable[[int], None] | None = None,
    wait_published: bool = True,
) -> WriteResult:
    """Write ``df`` to the owned Delta table at ``location`` and commit it through the owner.

    A missing table is created first (owned by ``client``, or by ``endpoint`` / ``$COMMIT_OWNER_ENDPOINT``,
    property names chosen by ``protocol``), with ``partition_by`` as its partition columns and, with
    ``full_name`` (``catalog.schema.table``), listed under that name by the owner's Unity Catalog API
    (``protocol="catalogManaged"`` makes it a catalog-managed table engines such as Sail read by name).
    Tables that name no owner endpoint (catalog-managed ones, e.g. created by Sail) need ``client`` or
    ``endpoint``.
    ``wait_published`` (the default) returns once the version is published in ``_delta_log``, as for
    :func:`client.write_table`.
    ``before_commit`` is called with the version about to be proposed, before every attempt (tracing, and
    tests that need a concurrent commit at a precise point). The checks, the commit, the rebase of a lost
    append and the clean-up are :func:`client.commit.write_and_commit`, shared with :func:`client.write_table`.

    Raises ValueError for a bad mode, partition column or a schema that differs from the table's (nothing is
    written); TableChangedError when an overwrite lost to a commit that changed the table; the owner's
    errors (CommitFailedError and family) when the commit is refused; CommitStateUnknownError when the
    outcome could not be learned (the Parquet files are then kept, as they may be referenced).
    """
    return write_and_commit(SparkFiles(df, location), location, df.schema.jsonValue(), WriteOptions.collect(locals()))


def _data_schema(schema: Any, partition_by: Sequence[str]) -> Any:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if f.name not in partition_by])


def read_table(
    spark: Any,
    location: str,
    version: int | None = None,
    *,
    client: CommitOwnerClient | None = None,
    token: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    owner_endpoint: str | None = None,
) -> Any:
    """A DataFrame of the table at ``version`` (latest when None), unbackfilled commits included.

    ``owner_endpoint`` (or ``$COMMIT_OWNER_ENDPOINT``) overrides the owner endpoint the table's properties name.

    Raises the snapshot reader's errors (NotADeltaTableError, VersionNotFoundError, ...) and ValueError for
    tables using reader features this reader does not implement (column mapping, deletion vectors).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from client.snapshot import load_snapshot

    snap = load_snapshot(location, version, client=client, token=token, storage_options=storage_options,
                         owner_endpoint=owner_endpoint)
    check_readable(snap)
    schema = StructType.fromJson(snap.schema)
    partition_by = snap.partition_columns
    data_schema = _data_schema(schema, partition_by)
    root = _spark_path(snap.location)
    groups: dict[tuple[Any, ...], list[str]] = {}
    for a in snap.files:
        pv = a.get("partitionValues") or {}
        key = tuple(pv.get(c) for c in partition_by)
        path = a["path"]
        full = path if "://" in path else f"{root}/{unquote(path)}"
        groups.setdefault(key, []).append(_spark_path(full))
    frames = []
    for key, paths in sorted(groups.items(), key=lambda kv: str(kv[0])):
        frame = spark.read.schema(data_schema).parquet(*sorted(paths))
        for c, v in zip(partition_by, key, strict=True):
            frame = frame.withColumn(c, F.lit(v).cast(schema[c].dataType))
        frames.append(frame.select(*[F.col("`" + f.name.replace("`", "``") + "`") for f in schema.fields]))
    if not frames:
        return spark.createDataFrame([], schema)
    return reduce(lambda a, b: a.unionByName(b), frames)


__all__ = ["SparkFiles", "TableChangedError", "WriteResult", "read_table", "write_table"]
