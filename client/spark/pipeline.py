"""A PySpark pipeline that needs no Delta jars: Spark writes Parquet, this client commits through the owner.

``write_table`` writes the DataFrame's Parquet files into a fresh folder under the table, describes them
as ``add`` actions with statistics, and commits ``commitInfo`` (in-commit timestamp first) + ``remove``
(overwrite) + ``add`` through the owner. A blind append that loses the race for a version is rebased onto
the new latest version and sent again; an overwrite that loses is re-checked against the new snapshot and
fails with :class:`TableChangedError` when the table's files or schema changed in between. Whenever a
write ends without a commit, its Parquet folder is deleted, so a failed write changes nothing.

``read_table`` reads the active files of any version through the snapshot reader of :mod:`client.snapshot`,
which includes commits the owner ratified but has not yet backfilled.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from functools import reduce
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import unquote

from ..errors import (
    CommitFailedError,
    CommitStateUnknownError,
    CommitVersionConflictError,
    TableAlreadyExistsError,
)
from ..http import CommitOwnerClient
from .actions import Mode, add_action, commit_info, next_in_commit_timestamp, remove_action
from .stats import collect_data_files

log = logging.getLogger(__name__)

ENDPOINT_ENV = "COMMIT_OWNER_ENDPOINT"
MAX_REBASES = 100
CREATE_WAIT_SECONDS = 30.0
# Partition values are written as the folder names Spark produces; these types round-trip exactly.
PARTITION_TYPES = {"string", "byte", "short", "integer", "long", "date", "boolean"}
# Reader features this reader does not implement: refuse instead of returning wrong rows.
UNSUPPORTED_READER_FEATURES = {"columnMapping", "deletionVectors", "typeWidening", "variantType"}


class TableChangedError(CommitFailedError):
    """An overwrite lost the race to a commit that changed the table; nothing was committed (false/true).

    Re-run the overwrite against the new state if it should still replace everything.
    """

    code = "TABLE_CHANGED"
    http_status = 409
    retryable = False
    conflict = True


@dataclass(frozen=True)
class WriteResult:
    """What one :func:`write_table` call committed."""

    location: str
    version: int
    num_files: int
    num_records: int
    rebases: int


def _spark_path(location: str) -> str:
    """The path Spark's Hadoop file systems understand for an owner location (``s3://`` -> ``s3a://``)."""
    return "s3a://" + location[len("s3://"):] if location.startswith("s3://") else location


def _owner_client(
    client: CommitOwnerClient | None, endpoint: str | None, token: str | None
) -> CommitOwnerClient | None:
    if client is not None:
        return client
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV)
    return CommitOwnerClient(endpoint, token=token) if endpoint else None


def _field_types(schema_json: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(f["name"], f["type"]) for f in schema_json.get("fields", [])]


def _load(location: str, client: CommitOwnerClient | None, storage_options: Mapping[str, Any] | None,
          version: int | None = None) -> Any:
    from ..snapshot import load_snapshot

    return load_snapshot(location, version, client=client, storage_options=storage_options)


def _await_table(location: str, client: CommitOwnerClient, storage_options: Mapping[str, Any] | None,
                 deadline: float = CREATE_WAIT_SECONDS) -> Any:
    """Load a table another creator registered, waiting (bounded) for its version 0 to be published.

    Raises NotADeltaTableError when version 0 did not appear within ``deadline`` seconds.
    """
    from ..errors import NotADeltaTableError

    started = time.monotonic()
    delay = 0.02
    while True:
        try:
            return _load(location, client, storage_options)
        except NotADeltaTableError as e:
            if time.monotonic() - started > deadline:
                raise NotADeltaTableError(
                    f"{location}: another writer registered this table but its version 0 did not appear within "
                    f"{deadline:.0f}s; check that creator, or forget the registration"
                ) from e
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _delete_tree(spark: Any, path: str) -> None:
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(p, True)


def _check_partition_types(df: Any, partition_by: Sequence[str]) -> None:
    types = {f.name: f.dataType.typeName() for f in df.schema.fields}
    for c in partition_by:
        if c not in types:
            raise ValueError(f"partition column {c!r} is not a column of the DataFrame ({sorted(types)})")
        if types[c] not in PARTITION_TYPES:
            raise ValueError(f"partition column {c!r} has type {types[c]}; supported: {sorted(PARTITION_TYPES)}")


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
    storage_options: Mapping[str, Any] | None = None,
    before_commit: Callable[[int], None] | None = None,
) -> WriteResult:
    """Write ``df`` to the owned Delta table at ``location`` and commit it through the owner.

    A missing table is created first (owned by ``client``, or by ``endpoint`` / ``$COMMIT_OWNER_ENDPOINT``,
    property names chosen by ``protocol``), with ``partition_by`` as its partition columns.
    ``before_commit`` is called with the version about to be proposed, before every attempt (tracing, and
    tests that need a concurrent commit at a precise point).

    Raises ValueError for a bad mode, partition column or a schema that differs from the table's (nothing is
    written); TableChangedError when an overwrite lost to a commit that changed the table; the owner's
    errors (CommitFailedError and family) when the commit is refused; CommitStateUnknownError when the
    outcome could not be learned (the Parquet files are then kept, as they may be referenced).
    """
    from ..lifecycle import create_table
    from ..errors import NotADeltaTableError
    from ..storage import normalize_location

    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    partition_by = list(partition_by or [])
    _check_partition_types(df, partition_by)
    location = normalize_location(location)
    owner = _owner_client(client, endpoint, token)
    schema_json = df.schema.jsonValue()

    try:
        snap = _load(location, owner, storage_options)
    except NotADeltaTableError:
        if owner is None:
            raise ValueError(
                f"{location} is not a Delta table yet; give client= or endpoint= (or set ${ENDPOINT_ENV}) "
                "so that write_table can create it"
            ) from None
        try:
            create_table(location, schema_json, partition_by, client=owner, protocol=protocol,
                         storage_options=storage_options)
            snap = _load(location, owner, storage_options)
        except TableAlreadyExistsError:
            # A concurrent writer registered first; write into its table once its version 0 is visible.
            snap = _await_table(location, owner, storage_options)
    _check_compatible(snap, schema_json, partition_by if partition_by else None)
    partition_by = snap.partition_columns
    if snap.owner is None or snap.owner.table_id is None:
        raise ValueError(f"{location} is not owned by a commit owner; take ownership first (client.lifecycle)")
    if owner is None:
        owner = CommitOwnerClient(snap.owner.endpoint or "", token=token)
    table_id = snap.owner.table_id

    folder = f"batch-{uuid.uuid4().hex}"
    written = f"{_spark_path(location)}/{folder}"
    spark = df.sparkSession
    committed = False
    try:
        df.write.mode("errorifexists").partitionBy(*partition_by).parquet(written)
        data_schema = _data_schema(df.schema, partition_by)
        files = collect_data_files(spark, written, folder + "/", data_schema, partition_by)
        adds = [add_action(f) for f in files]
        num_records = sum(int(f.stats.get("numRecords", 0)) for f in files)
        planned_removes = {a["path"] for a in snap.files} if mode == "overwrite" else set()
        rebases = 0
        while True:
            ict = next_in_commit_timestamp(snap.in_commit_timestamp)
            removes = [
                remove_action(a["path"], partition_values=a.get("partitionValues") or {}, size=a.get("size"),
                              deletion_timestamp=ict)
                for a in snap.files
            ] if mode == "overwrite" else []
            actions = [
                commit_info(in_commit_timestamp=ict, mode=mode, read_version=snap.version, partition_by=partition_by,
                            num_files=len(files), num_records=num_records),
                *removes,
                *adds,
            ]
            version = snap.version + 1
            if before_commit is not None:
                before_commit(version)
            try:
                owner.commit(table_id, version, actions)
            except CommitVersionConflictError:
                rebases += 1
                if rebases > MAX_REBASES:
                    raise
                snap = _load(location, owner, storage_options)
                _check_compatible(snap, schema_json, partition_by, during_race=True)
                if mode == "overwrite" and {a["path"] for a in snap.files} != planned_removes:
                    raise TableChangedError(
                        f"overwrite of {location} lost the race for version {version} to a commit that changed the "
                        f"table's files (now at version {snap.version}); nothing was committed, re-run the overwrite",
                        latest_table_version=snap.version,
                    ) from None
                continue
            except CommitStateUnknownError:
                committed = True  # it may have landed: keep the files it would reference
                raise
            committed = True
            return WriteResult(location, version, len(files), num_records, rebases)
    finally:
        if not committed:
            try:
                _delete_tree(spark, written)
            except Exception:  # noqa: BLE001 - never hide the error that ended the write
                log.warning("could not delete the uncommitted files under %s", written, exc_info=True)


def _data_schema(schema: Any, partition_by: Sequence[str]) -> Any:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if f.name not in partition_by])


def _check_compatible(snap: Any, schema_json: Mapping[str, Any], partition_by: Sequence[str] | None,
                      *, during_race: bool = False) -> None:
    """Raise ValueError (TableChangedError during a race) when the DataFrame does not fit the table."""
    table_fields = _field_types(snap.schema)
    mine = _field_types(schema_json)
    problem = None
    if table_fields != mine:
        problem = f"DataFrame columns {mine} differ from the table's {table_fields}"
    elif partition_by is not None and list(partition_by) != snap.partition_columns:
        problem = f"partition_by {list(partition_by)} differs from the table's {snap.partition_columns}"
    if problem is None:
        return
    if during_race:
        raise TableChangedError(f"{snap.location} changed during the write: {problem}; nothing was committed",
                                latest_table_version=snap.version)
    raise ValueError(f"{snap.location}: {problem} (schema changes are not supported by write_table)")


def read_table(
    spark: Any,
    location: str,
    version: int | None = None,
    *,
    client: CommitOwnerClient | None = None,
    token: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """A DataFrame of the table at ``version`` (latest when None), unbackfilled commits included.

    Raises the snapshot reader's errors (NotADeltaTableError, VersionNotFoundError, ...) and ValueError for
    tables using reader features this reader does not implement (column mapping, deletion vectors).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from ..snapshot import load_snapshot

    snap = load_snapshot(location, version, client=client, token=token, storage_options=storage_options)
    features = set(snap.protocol.get("readerFeatures") or [])
    unsupported = features & UNSUPPORTED_READER_FEATURES
    if unsupported:
        raise ValueError(
            f"{snap.location} uses reader features {sorted(unsupported)}, which read_table does not support"
        )
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


__all__ = ["TableChangedError", "WriteResult", "read_table", "write_table"]
