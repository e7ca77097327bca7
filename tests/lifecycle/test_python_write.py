"""client.write_table: pyarrow, pandas and Polars data written to owned tables without Spark, through a real owner.

Every table is read back by delta-rs (the independent reader) and by the snapshot reader (the rows of the
files it lists as active, with their partition values), and the two must equal the rows written.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import client
from client.contract.errors import TableChangedError, UnavailableError
from client.snapshot import load_snapshot
from client.write import write_table
from harness.world import free_port

UTC = dt.timezone.utc
COLUMNS = ["id", "name", "ts", "day", "part", "n"]


def rows(batch: int, size: int = 5) -> list[dict[str, Any]]:
    """Rows with nulls, a partition value with characters that need escaping, and a null partition value."""
    base = dt.datetime(2026, 3, 1, tzinfo=UTC) + dt.timedelta(days=batch)
    parts = ["even", "odd", "a/b:c=d", None]
    return [{
        "id": batch * 1000 + k,
        "name": None if k == size - 1 else f"row-{batch}-{k}",
        "ts": base + dt.timedelta(seconds=k, microseconds=k * 7),
        "day": (base + dt.timedelta(days=k)).date(),
        "part": parts[k % len(parts)],
        "n": k % 2,
    } for k in range(size)]


def arrow_rows(data: list[dict[str, Any]]) -> pa.Table:
    return pa.table({
        "id": pa.array([r["id"] for r in data], pa.int64()),
        "name": pa.array([r["name"] for r in data], pa.string()),
        "ts": pa.array([r["ts"] for r in data], pa.timestamp("us", tz="UTC")),
        "day": pa.array([r["day"] for r in data], pa.date32()),
        "part": pa.array([r["part"] for r in data], pa.string()),
        "n": pa.array([r["n"] for r in data], pa.int32()),
    })


def as_kind(kind: str, data: list[dict[str, Any]]) -> Any:
    table = arrow_rows(data)
    if kind == "pyarrow":
        return table
    if kind == "reader":
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=2))
    if kind == "pandas":
        return table.to_pandas()
    if kind == "polars":
        import polars as pl

        return pl.from_arrow(table)
    raise AssertionError(kind)


def normal(r: dict[str, Any]) -> tuple[Any, ...]:
    ts = r["ts"]
    if ts is not None and getattr(ts, "tzinfo", None) is not None:
        ts = ts.astimezone(UTC)
    return tuple(ts if c == "ts" else r[c] for c in COLUMNS)


def expected(data: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((normal(r) for r in data), key=repr)


def delta_rs_rows(location: str, owner: client.CommitOwnerClient, version: int | None = None) -> list[tuple[Any, ...]]:
    """delta-rs's rows, once the owner has published everything up to the latest version (it backfills in the
    background; delta-rs reads only the published log)."""
    snap = load_snapshot(location, client=owner)
    assert snap.owner is not None and snap.owner.table_id is not None
    owner.backfill_to_version(snap.owner.table_id, snap.version)
    table = DeltaTable(location)
    if version is not None:
        table.load_as_version(version)
    return sorted((normal(r) for r in table.to_pyarrow_table().to_pylist()), key=repr)


def snapshot_rows(location: str, owner: client.CommitOwnerClient, version: int | None = None) -> list[tuple[Any, ...]]:
    """The rows of the active files the snapshot reader lists (unbackfilled commits included), partition values
    taken from the ``add`` actions, typed by the table's schema."""
    from urllib.parse import unquote

    snap = load_snapshot(location, version, client=owner)
    root = Path(snap.location[len("file://"):])
    types = {f["name"]: f["type"] for f in snap.schema["fields"]}
    out = []
    for a in snap.files:
        for r in pq.read_table(root / unquote(a["path"])).to_pylist():
            for c, v in (a.get("partitionValues") or {}).items():
                r[c] = None if v is None else (int(v) if types[c] in ("integer", "long") else v)
            out.append(normal(r))
    return sorted(out, key=repr)


def commit_actions(where: Path, version: int) -> list[dict[str, Any]]:
    text = (where / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def all_files(where: Path) -> set[str]:
    return {str(p.relative_to(where)) for p in where.rglob("*") if p.is_file()} if where.exists() else set()


def batch_dirs(where: Path) -> set[str]:
    return {p.name for p in where.iterdir() if p.name.startswith("batch-")}


@pytest.mark.parametrize("kind", ["pyarrow", "reader", "pandas", "polars"])
def test_partitioned_writes_read_back_identically_by_delta_rs_and_the_snapshot_reader(
    kind: str, owner_service: Any, tmp_path: Path
) -> None:
    where = tmp_path / kind
    location = where.as_uri()
    owner = owner_service.client()
    first, second, final = rows(1), rows(2, size=7), rows(3, size=3)
    r1 = write_table(as_kind(kind, first), location, partition_by=["part", "n"], client=owner)
    r2 = write_table(as_kind(kind, second), location, client=owner)
    assert (r1.version, r1.num_records, r2.version, r2.num_records) == (1, 5, 2, 7)
    assert snapshot_rows(location, owner) == delta_rs_rows(location, owner) == expected(first + second)
    r3 = write_table(as_kind(kind, final), location, mode="overwrite", client=owner)
    assert r3.version == 3
    assert snapshot_rows(location, owner) == delta_rs_rows(location, owner) == expected(final)
    assert delta_rs_rows(location, owner, 2) == snapshot_rows(location, owner, 2) == expected(first + second)

    table = load_snapshot(location, client=owner)
    assert table.partition_columns == ["part", "n"]
    assert [f["type"] for f in table.schema["fields"]] == ["long", "string", "timestamp", "date", "string", "integer"]
    # per-file statistics from the footers: they add up to the rows written and bound them exactly
    adds = [a["add"] for a in commit_actions(where, 1) if "add" in a]
    assert {(a["partitionValues"]["part"], a["partitionValues"]["n"]) for a in adds} == {
        (r["part"], str(r["n"])) for r in first}
    stats = [json.loads(a["stats"]) for a in adds]
    assert sum(s["numRecords"] for s in stats) == 5
    assert sum(s["nullCount"]["name"] for s in stats) == 1
    assert min(s["minValues"]["id"] for s in stats) == 1000 and max(s["maxValues"]["id"] for s in stats) == 1004
    assert min(s["minValues"]["ts"] for s in stats) == "2026-03-02T00:00:00.000Z"
    assert max(s["maxValues"]["ts"] for s in stats) == "2026-03-02T00:00:04.001Z"  # 28 us rounded up to 1 ms
    assert min(s["minValues"]["day"] for s in stats) == "2026-03-02"
    assert all(a["size"] == (where / a["path"].replace("%25", "%")).stat().st_size for a in adds)
    info = commit_actions(where, 1)[0]["commitInfo"]
    assert list(commit_actions(where, 1)[0]) == ["commitInfo"] and "inCommitTimestamp" in info
    assert info["engineInfo"] == "delta-commit-owner pyarrow-writer"
    removed = {a["remove"]["path"] for a in commit_actions(where, 3) if "remove" in a}
    assert removed == {a["add"]["path"] for v in (1, 2) for a in commit_actions(where, v) if "add" in a}


def test_two_concurrent_python_appends_land_exactly_once_each(owner_service: Any, tmp_path: Path) -> None:
    location = (tmp_path / "shared").as_uri()
    owner = owner_service.client()
    write_table(arrow_rows(rows(0)), location, partition_by=["part"], client=owner)
    results: list[client.commit.WriteResult] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(w: int, kind: str) -> None:
        try:
            for i in range(4):
                r = write_table(as_kind(kind, rows(w * 10 + i)), location, client=owner_service.client())
                with lock:
                    results.append(r)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(1, "pandas")), threading.Thread(target=writer, args=(2, "polars"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(r.version for r in results) == list(range(2, 10))  # 0: create, 1: the first write
    want = expected(rows(0) + [row for w in (1, 2) for i in range(4) for row in rows(w * 10 + i)])
    assert snapshot_rows(location, owner) == delta_rs_rows(location, owner) == want


def test_an_append_that_loses_the_race_is_rebased(owner_service: Any, tmp_path: Path) -> None:
    location = (tmp_path / "rebase").as_uri()
    owner = owner_service.client()
    write_table(arrow_rows(rows(1)), location, client=owner)
    fired: list[int] = []

    def sneak_in(version: int) -> None:
        if not fired:
            fired.append(version)
            write_table(as_kind("pandas", rows(2)), location, client=owner)

    r = write_table(as_kind("polars", rows(3)), location, client=owner, before_commit=sneak_in)
    assert fired == [2] and r.version == 3 and r.rebases == 1
    assert snapshot_rows(location, owner) == delta_rs_rows(location, owner) == expected(rows(1) + rows(2) + rows(3))


def test_an_overwrite_that_loses_to_a_change_raises_and_leaves_no_new_files(owner_service: Any, tmp_path: Path) -> None:
    where = tmp_path / "overwrite-race"
    location = where.as_uri()
    owner = owner_service.client()
    write_table(arrow_rows(rows(1)), location, partition_by=["part"], client=owner)
    fired: list[int] = []
    after_sneak: set[str] = set()

    def sneak_in(version: int) -> None:
        if not fired:
            fired.append(version)
            write_table(arrow_rows(rows(2)), location, client=owner)
            after_sneak.update(all_files(where))

    with pytest.raises(TableChangedError, match="changed the table"):
        write_table(as_kind("pandas", rows(3)), location, mode="overwrite", client=owner, before_commit=sneak_in)
    assert snapshot_rows(location, owner) == delta_rs_rows(location, owner) == expected(rows(1) + rows(2))
    # the overwrite's files are gone: only the folders the table references remain
    referenced = {f["path"].split("/")[0] for f in load_snapshot(location, client=owner).files}
    assert batch_dirs(where) == referenced and len(referenced) == 2
    new_data = {f for f in all_files(where) - after_sneak if not f.startswith("_delta_log/")}
    assert new_data == set()
    assert load_snapshot(location, client=owner).version == 2


def test_bad_input_is_refused_before_any_file_is_written(
    owner_service: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMMIT_OWNER_ENDPOINT", raising=False)
    where = tmp_path / "bad"
    location = where.as_uri()
    owner = owner_service.client()
    good = arrow_rows(rows(1))
    with pytest.raises(ValueError, match="mode"):
        write_table(good, location, mode="upsert", client=owner)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partition column 'nope'"):
        write_table(good, location, partition_by=["nope"], client=owner)
    with pytest.raises(ValueError, match="partition column 'ts' has type timestamp"):
        write_table(good, location, partition_by=["ts"], client=owner)
    nobody = f"http://127.0.0.1:{free_port()}"  # no owner named: the one rule's default, here a closed port
    monkeypatch.setenv("COMMIT_OWNER_ENDPOINT", nobody)
    with pytest.raises(UnavailableError, match=re.escape(f"cannot reach the commit owner at {nobody} (from "
                                                         "$COMMIT_OWNER_ENDPOINT)")):
        write_table(good, location)
    monkeypatch.delenv("COMMIT_OWNER_ENDPOINT")
    with pytest.raises(TypeError, match="pandas DataFrame"):
        write_table([{"id": 1}], location, client=owner)
    naive = pa.table({"ts": pa.array([dt.datetime(2026, 1, 1)], pa.timestamp("us"))})
    with pytest.raises(ValueError, match="column 'ts' holds timestamps without a time zone"):
        write_table(naive, location, client=owner)
    with pytest.raises(ValueError, match="column 'x' has no type"):
        write_table(pa.table({"x": pa.array([None, None])}), location, client=owner)
    assert not where.exists()
    assert all(t.location != location for t in owner.list_tables())  # nothing registered either

    r = write_table(good, location, partition_by=["part"], client=owner)
    owner.backfill_to_version(owner.get_table(location=location).table_id, r.version)  # the backfiller is idle now
    before = all_files(where)
    with pytest.raises(ValueError, match="differ"):  # id as int32 where the table has long
        write_table(good.set_column(0, "id", good["id"].cast(pa.int32())), location, client=owner)
    with pytest.raises(ValueError, match="differ"):  # a column missing
        write_table(good.drop_columns(["name"]), location, client=owner)
    with pytest.raises(ValueError, match="partition_by"):
        write_table(good, location, partition_by=["n"], client=owner)
    assert all_files(where) == before
    assert load_snapshot(location, client=owner).version == 1
    assert snapshot_rows(location, owner) == delta_rs_rows(location, owner) == expected(rows(1))


def test_the_client_package_imports_no_data_library(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = ("import sys, client; print(client.write_table.__module__, "
            "sorted(m for m in ('pyarrow', 'pandas', 'polars') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "client.write []"


@pytest.mark.s3
def test_a_partitioned_pandas_write_on_s3_is_read_by_delta_rs_and_a_failed_one_leaves_no_object(
    owner: client.CommitOwnerClient, lifecycle_s3: tuple[str, dict[str, Any]]
) -> None:
    from client.storage import LogStorage
    from tests.lifecycle.helpers import delta_rs_options

    bucket, options = lifecycle_s3
    location = f"s3://{bucket}/py"
    r = write_table(as_kind("pandas", rows(1)), location, partition_by=["part"], client=owner, storage_options=options)
    write_table(as_kind("polars", rows(2)), location, client=owner, storage_options=options)
    snap = load_snapshot(location, client=owner, storage_options=options)
    assert (r.version, snap.version) == (1, 2) and snap.owner is not None and snap.owner.table_id is not None
    owner.backfill_to_version(snap.owner.table_id, 2)
    got = DeltaTable(location, storage_options=delta_rs_options(options)).to_pyarrow_table().to_pylist()
    assert sorted((normal(x) for x in got), key=repr) == expected(rows(1) + rows(2))

    fs = LogStorage(location, options).fs
    fs.invalidate_cache()
    before = set(fs.find(f"{bucket}/py"))

    def lose(version: int) -> None:
        write_table(as_kind("pyarrow", rows(3)), location, client=owner, storage_options=options)

    with pytest.raises(TableChangedError):
        write_table(as_kind("pandas", rows(4)), location, mode="overwrite", client=owner, storage_options=options,
                    before_commit=lose)
    fs.invalidate_cache()
    new = {k for k in set(fs.find(f"{bucket}/py")) - before if "/_delta_log/" not in k}
    from urllib.parse import unquote

    final = load_snapshot(location, client=owner, storage_options=options)
    winner = {unquote(f["path"]) for f in final.files if f["path"].split("/")[0] not in
              {f2["path"].split("/")[0] for f2 in snap.files}}
    assert final.version == 3 and len(winner) == 4  # the winner's four partitions
    assert {k.split("/py/", 1)[1] for k in new} == winner  # the loser's objects are gone


README_EXAMPLE = "## Python writes"


def test_the_readme_pandas_example_writes_a_table_delta_rs_reads(owner_service: Any, tmp_path: Path) -> None:
    import re
    import subprocess
    import sys

    from tests.support import ROOT

    text = (ROOT / "README.md").read_text()
    section = text[text.index(README_EXAMPLE):]
    code = re.findall(r"^```python\n(.*?)^```", section[:section.index("\n## ", 5)], re.M | re.S)[0]
    assert len(code.strip().splitlines()) == 4  # three to write, one to read with delta-rs
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("COMMIT_OWNER_")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code.replace("http://127.0.0.1:8080", owner_service.endpoint)],
                         cwd=tmp_path, env=env, check=True, capture_output=True, text=True, timeout=120)
    # delta-rs, right after write_table returned, printed the three rows: the write was already published
    printed = [line.split() for line in out.stdout.strip().splitlines()[1:]]
    assert sorted((int(r[1]), r[2]) for r in printed) == [(1, "Oslo"), (2, "Lima"), (3, "Oslo")], out.stdout
    location = (tmp_path / "warehouse" / "cities").as_uri()
    owner = owner_service.client()
    snap = load_snapshot(location, client=owner)
    assert snap.owner is not None and snap.owner.table_id is not None and snap.partition_columns == ["city"]
    got = DeltaTable(location).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["city"]) for r in got) == [(1, "Oslo"), (2, "Lima"), (3, "Oslo")]


def test_arrow_types_map_onto_delta_types_and_empty_writes_commit_no_rows(owner_service: Any, tmp_path: Path) -> None:
    import pandas as pd

    location = (tmp_path / "types").as_uri()
    owner = owner_service.client()
    df = pd.DataFrame({
        "u8": pd.array([1, 255], dtype="uint8"),
        "u32": pd.array([0, 4_000_000_000], dtype="uint32"),
        "f": pd.array([1.5, float("nan")], dtype="float32"),
        "cat": pd.Categorical(["x", "y"]),
        "ts": pd.to_datetime(["2026-01-01T00:00:00.000000123Z", "2026-01-01T01:00:00.000000000Z"]),
        "ok": [True, False],
    })
    r = write_table(df, location, client=owner)
    snap = load_snapshot(location, client=owner)
    assert [(f["name"], f["type"]) for f in snap.schema["fields"]] == [
        ("u8", "short"), ("u32", "long"), ("f", "float"), ("cat", "string"), ("ts", "timestamp"), ("ok", "boolean")]
    owner.backfill_to_version(snap.owner.table_id, r.version)  # type: ignore[union-attr]
    got = DeltaTable(location).to_pyarrow_table().to_pylist()
    assert [(x["u8"], x["u32"], x["cat"], x["ok"]) for x in got] == [(1, 0, "x", True), (255, 4_000_000_000, "y", False)]
    assert got[0]["ts"] == dt.datetime(2026, 1, 1, tzinfo=UTC)  # nanoseconds cut to microseconds
    stats = json.loads(snap.files[0]["stats"])
    assert stats["numRecords"] == 2 and stats["nullCount"]["f"] == 1  # pandas' NaN is a missing value
    assert stats["minValues"]["f"] == stats["maxValues"]["f"] == 1.5
    assert "ok" not in stats["minValues"] and stats["maxValues"]["u32"] == 4_000_000_000

    # a real NaN (pyarrow keeps it; Parquet's bounds skip it): that column gets a null count only
    nan = pa.table({"x": pa.array([1.0, float("nan"), None], pa.float64()), "y": pa.array([2.0, 3.0, None])})
    write_table(nan, (tmp_path / "nan").as_uri(), client=owner)
    nan_stats = json.loads(load_snapshot((tmp_path / "nan").as_uri(), client=owner).files[0]["stats"])
    assert nan_stats["nullCount"] == {"x": 1, "y": 1} and "x" not in nan_stats["minValues"]
    assert "x" not in nan_stats["maxValues"] and (nan_stats["minValues"]["y"], nan_stats["maxValues"]["y"]) == (2.0, 3.0)

    empty = write_table(df.iloc[0:0], location, client=owner)
    assert (empty.version, empty.num_records) == (r.version + 1, 0)
    assert len(load_snapshot(location, client=owner).files) == 2
