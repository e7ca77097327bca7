"""Per-file statistics of Delta ``add`` actions: the bound rules both writers share, and the pyarrow writer's
statistics read from a Parquet footer.

Bounds are only written when they are exact or safely wide: timestamps are rounded outwards to
milliseconds, a string max longer than 32 characters and NaN float bounds are left out, decimals and
timestamps without time zone get only null counts. A reader may skip a file only on bounds, so a missing
bound is always safe. Standard library only at import time (pyarrow is imported by the caller's objects).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Iterator, Mapping
from typing import Any

STRING_PREFIX = 32
_INTEGRAL = {"byte", "short", "integer", "long"}


def bound_kind(delta_type: Any) -> str | None:
    """How a column of this Delta type (its schema-JSON type name) gets bounds; None: null counts only."""
    if not isinstance(delta_type, str):
        return None  # struct, array, map
    if delta_type in _INTEGRAL:
        return "int"
    if delta_type in ("float", "double"):
        return "float"
    if delta_type in ("string", "date", "timestamp"):
        return delta_type
    return None  # boolean, binary, decimal, timestamp_ntz


def iso_utc_ms(micros: int, *, round_up: bool) -> str:
    """A timestamp in microseconds since the epoch as Delta's stats spell it, rounded to ms (up or down)."""
    ms = micros // 1000 if not round_up else -((-micros) // 1000)
    t = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def set_path(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for p in path[:-1]:
        tree = tree.setdefault(p, {})
    tree[path[-1]] = value


def bound(kind: str, value: Any, *, is_max: bool) -> Any:
    """The stats value of a min (``is_max`` False) or max; None when it must be left out.

    Timestamps come as microseconds since the epoch, dates as ``datetime.date``.
    """
    if value is None:
        return None
    if kind == "float":
        return None if math.isnan(value) or math.isinf(value) else value
    if kind == "timestamp":
        return iso_utc_ms(int(value), round_up=is_max)
    if kind == "date":
        return value.isoformat()
    if kind == "string":
        if len(value) <= STRING_PREFIX:
            return value
        return None if is_max else value[:STRING_PREFIX]
    return value


def leaves(schema_json: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """``(path, type)`` of every leaf of a Delta struct type, descending into structs only."""
    for f in schema_json.get("fields", []):
        path = prefix + (f["name"],)
        t = f["type"]
        if isinstance(t, dict) and t.get("type") == "struct":
            yield from leaves(t, path)
        else:
            yield path, t


_PER_UNIT = {"MILLIS": 1000, "MICROS": 1}


def parquet_footer_stats(metadata: Any, data_schema: Mapping[str, Any],
                         no_bounds: Collection[tuple[str, ...]] = ()) -> dict[str, Any]:
    """``numRecords``, ``minValues``, ``maxValues`` and ``nullCount`` of one Parquet file from its footer.

    ``metadata`` is a ``pyarrow.parquet.FileMetaData``; ``data_schema`` the Delta struct type of the file's
    columns (partition columns excluded). A leaf whose column chunks lack statistics gets no entry (safe).
    Leaves in ``no_bounds`` get a null count only: Parquet's float bounds skip NaN, which Delta readers (NaN
    above every number) may not, so the writer names its float columns that hold a NaN.
    """
    stats: dict[str, Any] = {"numRecords": int(metadata.num_rows), "minValues": {}, "maxValues": {}, "nullCount": {}}
    by_path: dict[str, int] = {}
    if metadata.num_row_groups:
        rg = metadata.row_group(0)
        for i in range(rg.num_columns):
            by_path[rg.column(i).path_in_schema] = i
    for path, delta_type in leaves(data_schema):
        idx = by_path.get(".".join(path))
        if idx is None and metadata.num_row_groups:
            continue  # arrays and maps: no footer entry of that name; no stats
        nulls = 0
        lo: Any = None
        hi: Any = None
        exact = True
        kind = None if path in no_bounds else bound_kind(delta_type)
        for g in range(metadata.num_row_groups):
            st = metadata.row_group(g).column(idx).statistics
            if st is None or not st.has_null_count:
                exact = False
                break
            nulls += int(st.null_count)
            if kind is None:
                continue
            if not st.has_min_max:
                if st.num_values:  # values without bounds: leave the bounds out
                    kind = None
                continue
            a, b = st.min, st.max
            if kind == "timestamp":
                unit = str(st.logical_type.to_json()).upper()
                per = next((m for name, m in _PER_UNIT.items() if name in unit), None)
                if per is None:  # nanoseconds: this project writes microseconds; no bounds
                    kind = None
                    continue
                a, b = int(st.min_raw) * per, int(st.max_raw) * per
            lo = a if lo is None or a < lo else lo
            hi = b if hi is None or b > hi else hi
        if not exact:
            continue
        set_path(stats["nullCount"], path, nulls)
        if kind is None:
            continue
        low, high = bound(kind, lo, is_max=False), bound(kind, hi, is_max=True)
        if low is not None:
            set_path(stats["minValues"], path, low)
        if high is not None:
            set_path(stats["maxValues"], path, high)
    return stats


__all__ = ["STRING_PREFIX", "bound", "bound_kind", "iso_utc_ms", "leaves", "parquet_footer_stats", "set_path"]
