"""Per-file statistics of freshly written Parquet files, computed by one Spark aggregation.

Spark reads the files back (``_metadata`` gives path, size and modification time) and aggregates per
file: ``numRecords`` and, per leaf column, ``minValues`` / ``maxValues`` / ``nullCount``. Which bounds are
written, and how, is :mod:`client.stats` (shared with the pyarrow writer).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from client.actions import DataFile, partition_values_from_path
from client.stats import bound, bound_kind, set_path


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _leaves(schema: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    from pyspark.sql.types import StructType

    for f in schema.fields:
        path = prefix + (f.name,)
        if isinstance(f.dataType, StructType):
            yield from _leaves(f.dataType, path)
        else:
            yield path, f.dataType


def _bound_kind(data_type: Any) -> str | None:
    return bound_kind(data_type.typeName())


def collect_data_files(
    spark: Any, written_dir: str, relative_prefix: str, data_schema: Any, partition_columns: list[str]
) -> list[DataFile]:
    """Describe every Parquet file under ``written_dir`` as a DataFile whose path starts with ``relative_prefix``.

    ``data_schema`` holds only the non-partition columns. Raises ValueError if a file sits outside
    ``written_dir`` or lacks a partition folder.
    """
    from pyspark.sql import functions as F

    df = spark.read.schema(data_schema).option("recursiveFileLookup", "true").parquet(written_dir)
    leaves = [(path, _bound_kind(t)) for path, t in _leaves(data_schema)]
    aggs = [F.count(F.lit(1)).alias("n")]
    for i, (path, kind) in enumerate(leaves):
        c = F.col(".".join(_quote(p) for p in path))
        aggs.append(F.sum(F.when(c.isNull(), 1).otherwise(0)).alias(f"z{i}"))
        if kind == "timestamp":
            aggs += [F.min(F.unix_micros(c)).alias(f"l{i}"), F.max(F.unix_micros(c)).alias(f"h{i}")]
        elif kind is not None:
            aggs += [F.min(c).alias(f"l{i}"), F.max(c).alias(f"h{i}")]
    rows = (
        df.select("*", "_metadata.file_path", "_metadata.file_size", "_metadata.file_modification_time")
        .groupBy("file_path", "file_size", F.unix_millis("file_modification_time").alias("mtime"))
        .agg(*aggs)
        .collect()
    )
    base = urlsplit(_qualified(spark, written_dir)).path.rstrip("/") + "/"
    seen: dict[str, DataFile] = {}
    for r in rows:
        rel = _relative(r["file_path"], base)
        stats: dict[str, Any] = {"numRecords": int(r["n"]), "minValues": {}, "maxValues": {}, "nullCount": {}}
        for i, (path, kind) in enumerate(leaves):
            set_path(stats["nullCount"], path, int(r[f"z{i}"] or 0))
            if kind is None:
                continue
            lo, hi = bound(kind, r[f"l{i}"], is_max=False), bound(kind, r[f"h{i}"], is_max=True)
            if lo is not None:
                set_path(stats["minValues"], path, lo)
            if hi is not None:
                set_path(stats["maxValues"], path, hi)
        seen[rel] = DataFile(
            path=relative_prefix + rel,
            size=int(r["file_size"]),
            modification_time=int(r["mtime"]),
            partition_values=partition_values_from_path(rel, partition_columns),
            stats=stats,
        )
    # Files without rows do not appear in the aggregation; describe them from the file system.
    for uri in df.inputFiles():
        rel = _relative(uri, base)
        if rel not in seen:
            size, mtime = _status(spark, uri)
            seen[rel] = DataFile(
                path=relative_prefix + rel,
                size=size,
                modification_time=mtime,
                partition_values=partition_values_from_path(rel, partition_columns),
                stats={"numRecords": 0, "minValues": {}, "maxValues": {}, "nullCount": {}},
            )
    return [seen[k] for k in sorted(seen)]


def _relative(uri: str, base_path: str) -> str:
    path = urlsplit(uri).path
    if not path.startswith(base_path):
        raise ValueError(f"file {uri} is not under {base_path}")
    return path[len(base_path):]


def _qualified(spark: Any, path: str) -> str:
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return str(fs.makeQualified(p).toUri().toString())


def _status(spark: Any, uri: str) -> tuple[int, int]:
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(uri))
    st = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).getFileStatus(p)
    return int(st.getLen()), int(st.getModificationTime())


__all__ = ["collect_data_files"]
