"""Python writes without Spark: :func:`write_table` for pyarrow, pandas and Polars data.

The data becomes one pyarrow Table (pandas and Polars through their own Arrow conversion), its Delta schema
is derived from the Arrow types, and :class:`ArrowFiles` writes one Parquet file per partition with pyarrow,
taking each file's statistics from its own Parquet footer. Checking, committing, rebasing a lost append,
:class:`TableChangedError` for an overwrite that lost, and deleting the files of a write that committed
nothing are the shared committer's (:mod:`client.commit`), the same as behind ``client.spark.write_table``.

pyarrow, pandas and Polars are imported only when used: ``import client`` needs the standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from client.actions import ARROW_ENGINE_INFO, HIVE_NULL, DataFile, Mode
from client.commit import WriteOptions, WriteResult, check_mode, write_and_commit
from client.contract.errors import TableChangedError
from client.contract.layout import data_file_name
from client.http import CommitOwnerClient
from client.stats import leaves, parquet_footer_stats

#: Characters Hive escapes (``%XX``) in a partition folder name, besides control characters.
_HIVE_ESCAPED = set('"#%\'*/:=?\\{[]^\x7f')


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("client.write_table needs pyarrow: pip install pyarrow (pandas and Polars data too)") from None
    return pyarrow


def to_arrow(data: Any) -> Any:
    """A ``pyarrow.Table`` of ``data``: a pyarrow Table, RecordBatch or RecordBatchReader (read whole), a pandas
    DataFrame (its index is dropped) or a Polars DataFrame. Raises TypeError for anything else."""
    pa = _pyarrow()
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    module = type(data).__module__.split(".")[0]
    if module == "pandas" and type(data).__name__ == "DataFrame":
        return pa.Table.from_pandas(data, preserve_index=False)
    if module == "polars" and type(data).__name__ == "DataFrame":
        return data.to_arrow()
    raise TypeError(
        f"write_table takes a pyarrow Table or RecordBatchReader, a pandas DataFrame or a Polars DataFrame, "
        f"not {type(data).__module__}.{type(data).__name__}"
    )


def _delta_type(t: Any, name: str) -> tuple[Any, Any]:
    """``(Delta schema type, Arrow type the data is written as)`` of an Arrow type. Raises ValueError."""
    pa = _pyarrow()
    types = pa.types
    simple = [
        (types.is_boolean, "boolean", pa.bool_()),
        (types.is_int8, "byte", pa.int8()),
        (types.is_int16, "short", pa.int16()),
        (types.is_int32, "integer", pa.int32()),
        (types.is_int64, "long", pa.int64()),
        (types.is_uint8, "short", pa.int16()),
        (types.is_uint16, "integer", pa.int32()),
        (types.is_uint32, "long", pa.int64()),
        (types.is_float32, "float", pa.float32()),
        (types.is_float64, "double", pa.float64()),
        (types.is_date, "date", pa.date32()),
    ]
    for test, delta, arrow in simple:
        if test(t):
            return delta, arrow
    if types.is_string(t) or types.is_large_string(t) or getattr(types, "is_string_view", lambda _: False)(t):
        return "string", pa.string()
    if types.is_binary(t) or types.is_large_binary(t) or getattr(types, "is_binary_view", lambda _: False)(t):
        return "binary", pa.binary()
    if types.is_timestamp(t):
        if t.tz is None:
            raise ValueError(
                f"column {name!r} holds timestamps without a time zone; Delta's timestamp is an instant: give "
                f"them one (pandas: .dt.tz_localize('UTC'), Polars: .dt.replace_time_zone('UTC'))"
            )
        return "timestamp", pa.timestamp("us", tz="UTC")
    if types.is_decimal(t) and t.precision <= 38:
        return f"decimal({t.precision},{t.scale})", pa.decimal128(t.precision, t.scale)
    if types.is_dictionary(t):
        return _delta_type(t.value_type, name)
    if types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        delta_fields, arrow_fields = _fields(fields, prefix=f"{name}.")
        return {"type": "struct", "fields": delta_fields}, pa.struct(arrow_fields)
    if types.is_list(t) or types.is_large_list(t):
        inner, inner_arrow = _delta_type(t.value_type, f"{name}[]")
        return ({"type": "array", "elementType": inner, "containsNull": True},
                pa.list_(pa.field("element", inner_arrow)))
    if types.is_null(t):
        raise ValueError(f"column {name!r} has no type (all its values are null): give it one before writing")
    raise ValueError(f"column {name!r} has Arrow type {t}, which write_table cannot store in a Delta table")


def _fields(fields: Sequence[Any], prefix: str = "") -> tuple[list[dict[str, Any]], list[Any]]:
    pa = _pyarrow()
    delta, arrow = [], []
    for f in fields:
        d, a = _delta_type(f.type, prefix + f.name)
        delta.append({"name": f.name, "type": d, "nullable": bool(f.nullable), "metadata": {}})
        arrow.append(pa.field(f.name, a, nullable=f.nullable))
    return delta, arrow


def delta_schema(table: Any) -> tuple[dict[str, Any], Any]:
    """``(Delta struct type, the table cast to the Arrow types it is written as)``. Raises ValueError naming the
    column whose type has no Delta counterpart (naive timestamps, unsigned 64-bit integers, all-null columns)."""
    pa = _pyarrow()
    names = table.column_names
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"column names appear twice: {dupes}")
    delta, arrow = _fields(list(table.schema))
    target = pa.schema(arrow)
    # safe=False: only sub-microsecond digits of timestamps can be lost (Delta stores microseconds).
    return {"type": "struct", "fields": delta}, (table if table.schema == target else table.cast(target, safe=False))


def _hive_escape(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if (c in _HIVE_ESCAPED or ord(c) < 32) else c for c in text)


def partition_folders(values: Mapping[str, str | None]) -> str:
    """The Hive folders of a file of the partition ``values`` (``c=v/`` each, escaped; null as Hive's default)."""
    return "".join(f"{_hive_escape(c)}={_hive_escape(v) if v is not None else HIVE_NULL}/" for c, v in values.items())


def _partition_value(value: Any) -> str | None:
    """Delta's string form of a partition value (``None`` for null; an empty string is null, as in Spark)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    text = str(value)
    return text if text != "" else None


def nan_leaves(table: Any, data_schema: Mapping[str, Any]) -> set[tuple[str, ...]]:
    """Float leaves that must get no bounds: top-level ones holding a NaN, and every nested one (not scanned)."""
    import pyarrow.compute as pc

    out = set()
    for path, t in leaves(data_schema):
        if t in ("float", "double") and (len(path) > 1 or pc.any(pc.is_nan(table[path[0]])).as_py()):
            out.add(path)
    return out


class ArrowFiles:
    """The pyarrow file writer of the shared committer: one Parquet file per partition, statistics from its
    footer, written whole through :class:`client.storage.DataFiles` (local disk or S3)."""

    def __init__(self, table: Any, schema_json: Mapping[str, Any], location: str,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        from client.storage import DataFiles

        self.table = table
        self.schema_json = schema_json
        self.files = DataFiles(location, storage_options)

    def _parts(self, partition_by: Sequence[str]) -> list[tuple[dict[str, str | None], Any]]:
        if not partition_by:
            return [({}, self.table)]
        import pyarrow.compute as pc

        keys = self.table.select(list(partition_by)).group_by(list(partition_by)).aggregate([]).to_pylist()
        out = []
        for key in keys:
            mask = None
            for c in partition_by:
                col = self.table[c]
                m = pc.is_null(col) if key[c] is None else pc.equal(col, key[c])
                mask = m if mask is None else pc.and_(mask, m)
            values = {c: _partition_value(key[c]) for c in partition_by}
            out.append((values, self.table.filter(mask).drop_columns(list(partition_by))))
        return sorted(out, key=lambda kv: [str(v) for v in kv[0].values()])

    def write(self, folder: str, partition_by: Sequence[str]) -> list[DataFile]:
        pa = _pyarrow()
        import pyarrow.parquet as pq

        data_schema = {"type": "struct",
                       "fields": [f for f in self.schema_json["fields"] if f["name"] not in partition_by]}
        out = []
        for i, (values, part) in enumerate(self._parts(partition_by)):
            rel = f"{folder}/{partition_folders(values)}{data_file_name(i)}"
            sink = pa.BufferOutputStream()
            pq.write_table(part, sink, compression="snappy", write_statistics=True)
            buf = sink.getvalue()
            footer = pq.read_metadata(pa.BufferReader(buf))
            self.files.put(rel, buf.to_pybytes())
            out.append(DataFile(
                path=quote(rel, safe="/="),
                size=buf.size,
                modification_time=int(time.time() * 1000),
                partition_values=values,
                stats=parquet_footer_stats(footer, data_schema, nan_leaves(part, data_schema)),
            ))
        return out

    def discard(self, folder: str) -> None:
        self.files.remove_folder(folder)


def write_table(
    data: Any,
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
    """Write ``data`` (pyarrow Table / RecordBatchReader, pandas or Polars DataFrame) to the owned Delta table at
    ``location`` and commit it through the owner; the Python twin of ``client.spark.write_table``.

    A missing table is created (owned by ``client``, or ``endpoint`` / ``$COMMIT_OWNER_ENDPOINT``) with
    ``partition_by`` as its partition columns; ``protocol`` and ``full_name`` are those of
    :func:`client.lifecycle.create_table`. ``storage_options`` go to fsspec (``s3://``: s3fs options such as
    ``{"key": ..., "secret": ..., "client_kwargs": {"endpoint_url": ...}}``). ``before_commit`` is called with
    the version about to be proposed, before every attempt. The data is held in memory (a RecordBatchReader is
    read whole), and each partition becomes one Parquet file, built in memory and then stored.

    With ``wait_published`` (the default) it returns once the new version is published in ``_delta_log`` (the
    owner is asked to backfill through it; at most :data:`client.publish.PUBLISH_WAIT_SECONDS`, then a warning),
    so a plain Delta reader such as ``deltalake.DeltaTable(location)`` sees the write; ``WriteResult.
    published_version`` says how far the table is published. ``wait_published=False`` returns right after the
    commit (more writes per second; read them back with :func:`client.read_table`, which asks the owner).

    Raises TypeError for data of another kind; ValueError for a bad mode, a partition column, a column type with
    no Delta counterpart, or a schema that differs from the table's (all before any file is written);
    TableChangedError when an overwrite lost to a commit that changed the table (its files are deleted); the
    owner's errors (CommitFailedError and family); CommitStateUnknownError (the files are kept then).
    """
    check_mode(mode)
    table = to_arrow(data)
    schema_json, table = delta_schema(table)
    options = WriteOptions.collect(locals())
    return write_and_commit(ArrowFiles(table, schema_json, location, storage_options), location, schema_json, options,
                            engine_info=ARROW_ENGINE_INFO)


__all__ = ["ArrowFiles", "TableChangedError", "WriteResult", "delta_schema", "nan_leaves", "partition_folders", "to_arrow",
           "write_table"]
