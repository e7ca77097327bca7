"""Row tracking through the owner's compaction (Delta's PROTOCOL.md, "Row Tracking"): the one home of what a
rewrite of a table with the ``rowTracking`` writer feature must keep and assign. The compaction
(``coordinator/ops/compaction.py``) asks this module; why: docs/decisions.md, entry 76.

* **Supported** (``rowTracking`` among the writer features) **and not suspended** (``delta.rowTrackingSuspended``
  not true): every new ``add`` gets a fresh ``baseRowId`` above the table's high-water mark (the
  ``delta.rowTracking`` domain; -1 when the domain is missing), the mark is raised by the new files' rows
  (their ``numRecords``) in a ``domainMetadata`` action of the same commit, and ``defaultRowCommitVersion`` is
  the version the commit proposes. Both depend on the version and the domain, so a compaction that moves onto
  the commits that beat it assigns them again.
* **Enabled** (``delta.enableRowTracking`` true as well): each row keeps its stable row id and row commit
  version. A rewritten file holds them in the materialized columns the configuration names
  (``delta.rowTracking.materializedRowIdColumnName`` and ``...RowCommitVersionColumnName``): the source file's
  materialized value when it is there and not null, else the source ``add``'s ``baseRowId`` plus the row's
  physical index in its file (counted before a deletion vector drops rows), resp. its
  ``defaultRowCommitVersion``. The commit is tagged ``delta.rowTracking.preserved``.
* **Not enabled:** nothing is preserved (the protocol says writers cannot): a source file's materialized
  columns, when the configuration names them, are left out of the rewrite, as a Delta reader of the table's
  columns leaves them out.

pyarrow is imported inside the functions that need it (the ``maintain`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from client.contract.delta_log import table_features

FEATURE = "rowTracking"
DOMAIN = "delta.rowTracking"
ENABLED = "delta.enableRowTracking"
SUSPENDED = "delta.rowTrackingSuspended"
ROW_ID_COLUMN = "delta.rowTracking.materializedRowIdColumnName"
ROW_COMMIT_VERSION_COLUMN = "delta.rowTracking.materializedRowCommitVersionColumnName"
PRESERVED_TAG = "delta.rowTracking.preserved"
#: The high-water mark of a table whose ``delta.rowTracking`` domain is missing (no row id assigned yet).
MISSING_HIGH_WATER_MARK = -1


def _true(value: Any) -> bool:
    return str(value).strip().lower() == "true"


@dataclass(frozen=True)
class RowTracking:
    """What a compaction of one table does about row tracking (``of`` reads it from the protocol and metadata)."""

    assigns: bool = False  # fresh baseRowId / defaultRowCommitVersion on the new files, the mark raised
    row_id_column: str | None = None  # enabled: the materialized columns each rewritten file holds
    commit_version_column: str | None = None
    named: tuple[str, ...] = ()  # the materialized columns the configuration names (not table columns)

    @property
    def preserves(self) -> bool:
        return self.row_id_column is not None

    @classmethod
    def of(cls, protocol: Mapping[str, Any] | None, metadata: Mapping[str, Any] | None) -> RowTracking:
        """Raises ValueError for a table whose row tracking cannot be kept (``refusal`` says why)."""
        why = refusal(protocol, metadata)
        if why is not None:
            raise ValueError(why)
        _, writer = table_features(protocol or {})
        conf = (metadata or {}).get("configuration") or {}
        named = tuple(conf[k] for k in (ROW_ID_COLUMN, ROW_COMMIT_VERSION_COLUMN) if conf.get(k))
        if FEATURE not in writer:
            return cls()
        if not _true(conf.get(ENABLED)):
            return cls(assigns=not _true(conf.get(SUSPENDED)), named=named)
        return cls(assigns=True, row_id_column=conf[ROW_ID_COLUMN],
                   commit_version_column=conf[ROW_COMMIT_VERSION_COLUMN], named=named)


def refusal(protocol: Mapping[str, Any] | None, metadata: Mapping[str, Any] | None) -> str | None:
    """Why the row tracking of this table cannot be kept through a rewrite, or None."""
    _, writer = table_features(protocol or {})
    conf = (metadata or {}).get("configuration") or {}
    enabled = _true(conf.get(ENABLED))
    if FEATURE not in writer:
        return f"{ENABLED} is true but the protocol lacks the rowTracking feature" if enabled else None
    if "domainMetadata" not in writer:
        return "it has the rowTracking feature without domainMetadata (no place for the row id high-water mark)"
    if enabled and _true(conf.get(SUSPENDED)):
        return f"row tracking is both enabled and suspended ({ENABLED}, {SUSPENDED})"
    if enabled:
        missing = [k for k in (ROW_ID_COLUMN, ROW_COMMIT_VERSION_COLUMN) if not conf.get(k)]
        if missing:
            return (f"row tracking is enabled but its configuration lacks {' and '.join(missing)} (the columns "
                    "that keep row ids and row commit versions through a rewrite)")
        if conf[ROW_ID_COLUMN] == conf[ROW_COMMIT_VERSION_COLUMN]:
            return f"{ROW_ID_COLUMN} and {ROW_COMMIT_VERSION_COLUMN} name the same column"
    return None


def with_stable_columns(table: Any, add: Mapping[str, Any], tracking: RowTracking) -> Any:
    """``table`` (one source file, every physical row, before its deletion vector is applied) with the
    materialized columns set to each row's stable row id and row commit version (``tracking.preserves``), or
    without them (not enabled). Raises ValueError when a row has neither a materialized value nor the default
    its ``add`` should carry."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = table.drop_columns([c for c in tracking.named if c in table.column_names])
    if not tracking.preserves:
        return out
    assert tracking.row_id_column is not None and tracking.commit_version_column is not None
    n = table.num_rows
    base, version = add.get("baseRowId"), add.get("defaultRowCommitVersion")
    ids = pa.array(range(int(base), int(base) + n), pa.int64()) if base is not None else pa.nulls(n, pa.int64())
    versions = pa.array([int(version)] * n if version is not None else [None] * n, pa.int64())
    for name, default in ((tracking.row_id_column, ids), (tracking.commit_version_column, versions)):
        value = default
        if name in table.column_names:
            try:
                value = pc.coalesce(table.column(name).combine_chunks().cast(pa.int64()), default)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ValueError(f"{add['path']}: its column {name} is not a row tracking column ({e})") from None
        if value.null_count:
            field = "baseRowId" if name == tracking.row_id_column else "defaultRowCommitVersion"
            raise ValueError(f"{add['path']} has rows without a materialized {name} and its add has no {field}")
        out = out.append_column(pa.field(name, pa.int64()), value)
    return out


def high_water_mark(domains: Mapping[str, Mapping[str, Any]]) -> int:
    """The highest row id assigned in the table (its ``delta.rowTracking`` domain; -1 when there is none).
    Raises ValueError for a domain that does not say it."""
    body = domains.get(DOMAIN)
    if body is None or body.get("removed"):
        return MISSING_HIGH_WATER_MARK
    try:
        mark = json.loads(body.get("configuration") or "{}")["rowIdHighWaterMark"]
    except (TypeError, ValueError, KeyError):
        mark = None
    if isinstance(mark, bool) or not isinstance(mark, int):
        raise ValueError(f"the {DOMAIN} domain does not hold an integer rowIdHighWaterMark: {body!r}")
    return mark


def assign(added: Sequence[Mapping[str, Any]], tracking: RowTracking, *, version: int,
           domains: Mapping[str, Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The new files' ``add`` bodies with their fresh ``baseRowId`` and ``defaultRowCommitVersion`` when the
    commit is ``version`` over ``domains`` (the table's domain metadata), and the ``domainMetadata`` actions that
    raise the high-water mark past their rows (none when nothing is assigned). Raises ValueError (a file
    without ``numRecords``, a domain without a mark)."""
    if not tracking.assigns:
        return [dict(a) for a in added], []
    start = mark = high_water_mark(domains)
    out = []
    for a in added:
        try:
            rows = int(json.loads(a.get("stats") or "{}")["numRecords"])
        except (TypeError, ValueError, KeyError):
            raise ValueError(f"{a['path']} has no numRecords to assign row ids by") from None
        out.append({**a, "baseRowId": mark + 1, "defaultRowCommitVersion": int(version)})
        mark += rows
    if mark == start:
        return out, []
    conf = json.dumps({"rowIdHighWaterMark": mark}, separators=(",", ":"))
    return out, [{"domainMetadata": {"domain": DOMAIN, "configuration": conf, "removed": False}}]


__all__ = ["DOMAIN", "PRESERVED_TAG", "ROW_COMMIT_VERSION_COLUMN", "ROW_ID_COLUMN", "RowTracking", "assign",
           "high_water_mark", "refusal", "with_stable_columns"]
