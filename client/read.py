"""Read your own writes: :func:`read_table`, the rows of an owned table through its owner, as a pyarrow Table.

A plain Delta reader (delta-rs, DuckDB, pandas through delta-rs) sees only the published log, ``_delta_log/<v>.json``;
the owner publishes ratified commits in the background, so a read right after a commit can be behind.
:func:`read_table` resolves the snapshot with :func:`client.snapshot.load_snapshot` (the published log plus the
owner's unpublished commits, so it is never behind the owner) and reads the Parquet files that snapshot lists,
adding each file's partition values as columns typed by the table's schema.

It reads what this project's writers write; tables that need a reader feature it does not implement (column
mapping, deletion vectors, type widening, variant) are refused with a ValueError rather than read wrongly.
pyarrow is imported only when called.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from client.http import CommitOwnerClient
from client.snapshot import Snapshot, load_snapshot, load_snapshots
from client.storage import DataFiles

#: Reader features whose tables cannot be read by reading the listed Parquet files as they are.
UNSUPPORTED_READER_FEATURES = frozenset({"columnMapping", "deletionVectors", "typeWidening", "variantType"})

_PRIMITIVES = {
    "boolean": "bool_", "byte": "int8", "short": "int16", "integer": "int32", "long": "int64",
    "float": "float32", "double": "float64", "string": "string", "binary": "binary", "date": "date32",
}


def arrow_type(delta: Any) -> Any:
    """The Arrow type of a Delta schema type (as in the log's ``schemaString``). Raises ValueError."""
    import pyarrow as pa

    if isinstance(delta, str):
        if delta in _PRIMITIVES:
            return getattr(pa, _PRIMITIVES[delta])()
        if delta == "timestamp":
            return pa.timestamp("us", tz="UTC")
        if delta == "timestamp_ntz":
            return pa.timestamp("us")
        if delta.startswith("decimal(") and delta.endswith(")"):
            precision, scale = (int(x) for x in delta[len("decimal("):-1].split(","))
            return pa.decimal128(precision, scale)
        raise ValueError(f"Delta type {delta!r} is not one read_table can read")
    kind = delta.get("type")
    if kind == "struct":
        return pa.struct([arrow_field(f) for f in delta["fields"]])
    if kind == "array":
        return pa.list_(pa.field("element", arrow_type(delta["elementType"]), bool(delta.get("containsNull", True))))
    if kind == "map":
        return pa.map_(arrow_type(delta["keyType"]),
                       pa.field("value", arrow_type(delta["valueType"]), bool(delta.get("valueContainsNull", True))))
    raise ValueError(f"Delta type {delta!r} is not one read_table can read")


def arrow_field(field: Mapping[str, Any]) -> Any:
    import pyarrow as pa

    return pa.field(field["name"], arrow_type(field["type"]), bool(field.get("nullable", True)))


def check_readable(snap: Snapshot) -> None:
    """Raise ValueError when the table needs a reader feature that reading its Parquet files does not honour."""
    unsupported = set(snap.protocol.get("readerFeatures") or []) & UNSUPPORTED_READER_FEATURES
    if unsupported:
        raise ValueError(f"{snap.location} uses reader features {sorted(unsupported)}, which read_table does not "
                         "support")


def snapshot_table(snap: Snapshot, *, columns: Sequence[str] | None = None,
                   storage_options: Mapping[str, Any] | None = None) -> Any:
    """The rows of ``snap``'s active files as one pyarrow Table with the table's schema (``columns`` only, in
    that order, when given). Raises ValueError for an unsupported table or an unknown column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_readable(snap)
    schema = pa.schema([arrow_field(f) for f in snap.schema.get("fields", [])])
    wanted = list(schema.names if columns is None else columns)
    unknown = [c for c in wanted if c not in schema.names]
    if unknown:
        raise ValueError(f"{snap.location} has no column {unknown[0]!r} (its columns: {schema.names})")
    out_schema = pa.schema([schema.field(c) for c in wanted])
    partitions = set(snap.partition_columns)
    stored = [c for c in wanted if c not in partitions]
    files = DataFiles(snap.location, storage_options)
    pieces = []
    for add in sorted(snap.files, key=lambda a: str(a["path"])):
        path = str(add["path"])
        parquet = pq.ParquetFile(io.BytesIO(files.read(path if "://" in path else unquote(path))))
        present = set(parquet.schema_arrow.names)
        data = parquet.read(columns=[c for c in stored if c in present])
        n = data.num_rows
        values = add.get("partitionValues") or {}
        arrays = []
        for c in wanted:
            t = schema.field(c).type
            if c in partitions:
                v = values.get(c)
                arrays.append(pa.nulls(n, t) if v is None else pa.array([v] * n, pa.string()).cast(t))
            elif c in present:
                arrays.append(data.column(c).cast(t))
            else:  # a column added to the table after this file was written
                arrays.append(pa.nulls(n, t))
        pieces.append(pa.Table.from_arrays(arrays, schema=out_schema))
    return pa.concat_tables(pieces) if pieces else out_schema.empty_table()


def read_table(
    location: str,
    version: int | None = None,
    *,
    columns: Sequence[str] | None = None,
    client: CommitOwnerClient | None = None,
    token: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    owner_endpoint: str | None = None,
) -> Any:
    """The rows of the Delta table at ``location`` at ``version`` (latest when None) as a ``pyarrow.Table``,
    commits the owner ratified but has not yet published included: what a writer wrote is read back at once.

    The owner is ``client``, else ``owner_endpoint``, else ``$COMMIT_OWNER_ENDPOINT``, else the endpoint the
    table's properties name (as for :func:`client.snapshot.load_snapshot`); a table no owner owns is read
    from its log alone. Raises the snapshot reader's errors (NotADeltaTableError, VersionNotFoundError,
    UnavailableError, ...) and ValueError for a table needing an unsupported reader feature or an unknown
    column.
    """
    snap = load_snapshot(location, version, client=client, token=token, storage_options=storage_options,
                         owner_endpoint=owner_endpoint)
    return snapshot_table(snap, columns=columns, storage_options=storage_options)


def read_tables(
    locations: Sequence[str],
    *,
    client: CommitOwnerClient | None = None,
    token: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    owner_endpoint: str | None = None,
) -> list[Any]:
    """The rows of each table at ``locations`` (``pyarrow.Table`` each), all as of one instant of their owner:
    a multi-table transaction is in every one of them or in none (:func:`client.snapshot.load_snapshots`).
    Raises what :func:`read_table` raises."""
    snaps = load_snapshots(locations, client=client, token=token, storage_options=storage_options,
                           owner_endpoint=owner_endpoint)
    return [snapshot_table(snap, storage_options=storage_options) for snap in snaps]


__all__ = ["UNSUPPORTED_READER_FEATURES", "arrow_type", "check_readable", "read_table", "read_tables", "snapshot_table"]
