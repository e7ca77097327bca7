"""write_table / read_table: Spark writes Parquet, the client commits through a real owner (no Delta jars).

Every version is read back with read_table (which sees unbackfilled commits through the owner) and,
after a backfill, with delta-rs, and compared with the DataFrames written.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="SPARK TESTS SKIPPED: pyspark is not installed")
deltalake = pytest.importorskip("deltalake", reason="delta-rs (deltalake) is needed as the independent reader")

from client.contract.errors import UnavailableError  # noqa: E402
from client.snapshot import load_snapshot  # noqa: E402
from client.spark import read_table, write_table  # noqa: E402
from client.spark.pipeline import TableChangedError  # noqa: E402
from harness.world import free_port  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCHEMA = "id long, name string, ts timestamp, day date, part string"
COLUMNS = ["id", "name", "ts", "day", "part"]
UTC = dt.timezone.utc


def batch(n: int, size: int = 4) -> list[tuple[Any, ...]]:
    base = dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(days=n)
    rows = []
    for k in range(size):
        rows.append((
            n * 1000 + k,
            None if k == size - 1 else f"row-{n}-{k}",
            (base + dt.timedelta(seconds=k, microseconds=k * 7)).replace(tzinfo=None),
            (base + dt.timedelta(days=k)).date(),
            "even" if k % 2 == 0 else "odd",
        ))
    return rows


def spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in df.collect())


def delta_rs_rows(location: str, version: int) -> list[tuple[Any, ...]]:
    table = deltalake.DeltaTable(location)
    table.load_as_version(version)
    out = []
    for r in table.to_pyarrow_table().to_pylist():
        ts = r["ts"]
        if ts is not None and ts.tzinfo is not None:
            ts = ts.astimezone(UTC).replace(tzinfo=None)
        out.append((r["id"], r["name"], ts, r["day"], r["part"]))
    return sorted(out)


def commit_lines(location_dir: Path, version: int) -> list[dict[str, Any]]:
    text = (location_dir / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def batch_dirs(location_dir: Path) -> set[str]:
    return {p.name for p in location_dir.iterdir() if p.name.startswith("batch-")}


def test_five_appends_and_an_overwrite_read_back_the_same_rows_at_every_version(
    spark: Any, spark_owner: Any, tmp_path: Path
) -> None:
    where = tmp_path / "events"
    location = where.as_uri()
    owner = spark_owner.client()
    expected: dict[int, list[tuple[Any, ...]]] = {0: []}
    written: list[tuple[Any, ...]] = []
    for n in range(1, 6):
        rows = batch(n)
        result = write_table(spark.createDataFrame(rows, SCHEMA), location, partition_by=["part"], client=owner,
                             wait_published=False)
        assert result.version == n and result.num_records == len(rows)
        written += rows
        expected[n] = sorted(written)
    final = batch(99, size=3)
    result = write_table(spark.createDataFrame(final, SCHEMA), location, mode="overwrite", client=owner,
                         wait_published=False)
    assert result.version == 6
    expected[6] = sorted(final)

    # Nothing is published yet (the owner backfills only when asked, and the writes did not wait for it):
    # read_table reads through the owner.
    assert not (where / "_delta_log" / f"{1:020d}.json").exists()
    for version, rows in expected.items():
        assert spark_rows(read_table(spark, location, version)) == rows, f"read_table at version {version}"
    assert spark_rows(read_table(spark, location)) == expected[6]

    table_id = owner.get_table(location=location).table_id
    owner.backfill_to_version(table_id, 6)
    for version, rows in expected.items():
        assert delta_rs_rows(location, version) == rows, f"delta-rs at version {version}"

    first = commit_lines(where, 1)
    assert list(first[0]) == ["commitInfo"] and "inCommitTimestamp" in first[0]["commitInfo"]
    adds = [a["add"] for a in first if "add" in a]
    stats = [json.loads(a["stats"]) for a in adds]
    assert sum(s["numRecords"] for s in stats) == 4
    assert min(s["minValues"]["id"] for s in stats) == 1000 and max(s["maxValues"]["id"] for s in stats) == 1003
    assert sum(s["nullCount"]["name"] for s in stats) == 1
    assert {a["partitionValues"]["part"] for a in adds} == {"even", "odd"}
    # timestamps as UTC ISO strings rounded outwards to ms, dates as ISO dates
    assert min(s["minValues"]["ts"] for s in stats) == "2026-01-02T00:00:00.000Z"
    assert max(s["maxValues"]["ts"] for s in stats) == "2026-01-02T00:00:03.001Z"
    assert min(s["minValues"]["day"] for s in stats) == "2026-01-02"
    assert all(a["size"] == (where / a["path"]).stat().st_size for a in adds)
    overwrite = commit_lines(where, 6)
    removed = {a["remove"]["path"] for a in overwrite if "remove" in a}
    assert len(removed) == sum(1 for v in range(1, 6) for a in commit_lines(where, v) if "add" in a)


def test_two_concurrent_writers_land_every_batch_exactly_once(spark: Any, spark_owner: Any, tmp_path: Path) -> None:
    location = (tmp_path / "shared").as_uri()
    owner = spark_owner.client()
    versions: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        try:
            for i in range(4):
                r = write_table(spark.createDataFrame(batch(w * 10 + i), SCHEMA), location, client=owner)
                with lock:
                    versions.append(r.version)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(versions) == list(range(1, 9))
    expected = sorted(row for w in (1, 2) for i in range(4) for row in batch(w * 10 + i))
    assert spark_rows(read_table(spark, location)) == expected


def test_an_append_that_loses_the_race_is_rebased_onto_the_winner(
    spark: Any, spark_owner: Any, tmp_path: Path
) -> None:
    location = (tmp_path / "rebase").as_uri()
    owner = spark_owner.client()
    write_table(spark.createDataFrame(batch(1), SCHEMA), location, client=owner)
    fired: list[int] = []

    def sneak_in(version: int) -> None:
        if not fired:
            fired.append(version)
            write_table(spark.createDataFrame(batch(2), SCHEMA), location, client=owner)

    result = write_table(spark.createDataFrame(batch(3), SCHEMA), location, client=owner, before_commit=sneak_in)
    assert fired == [2] and result.version == 3 and result.rebases == 1
    assert spark_rows(read_table(spark, location)) == sorted(batch(1) + batch(2) + batch(3))


def test_an_overwrite_that_loses_to_a_data_change_fails_and_leaves_nothing_behind(
    spark: Any, spark_owner: Any, tmp_path: Path
) -> None:
    where = tmp_path / "overwrite-race"
    location = where.as_uri()
    owner = spark_owner.client()
    write_table(spark.createDataFrame(batch(1), SCHEMA), location, client=owner)
    fired: list[int] = []

    def sneak_in(version: int) -> None:
        if not fired:
            fired.append(version)
            write_table(spark.createDataFrame(batch(2), SCHEMA), location, client=owner)

    with pytest.raises(TableChangedError, match="changed the table"):
        write_table(spark.createDataFrame(batch(3), SCHEMA), location, mode="overwrite", client=owner,
                    before_commit=sneak_in)
    assert spark_rows(read_table(spark, location)) == sorted(batch(1) + batch(2))
    # the overwrite's Parquet folder is gone: only folders the table references remain
    referenced = {f["path"].split("/")[0] for f in load_snapshot(location, client=owner).files}
    assert batch_dirs(where) == referenced and len(referenced) == 2


def test_bad_input_is_refused_before_anything_is_written(
    spark: Any, spark_owner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMMIT_OWNER_ENDPOINT", raising=False)
    where = tmp_path / "bad"
    location = where.as_uri()
    owner = spark_owner.client()
    df = spark.createDataFrame(batch(1), SCHEMA)
    with pytest.raises(ValueError, match="mode"):
        write_table(df, location, mode="upsert", client=owner)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partition column"):
        write_table(df, location, partition_by=["nope"], client=owner)
    nobody = f"http://127.0.0.1:{free_port()}"  # no owner named: the one rule's default, here a closed port
    monkeypatch.setenv("COMMIT_OWNER_ENDPOINT", nobody)
    with pytest.raises(UnavailableError, match="cannot reach the commit owner at " + re.escape(nobody)):
        write_table(df, location)
    monkeypatch.delenv("COMMIT_OWNER_ENDPOINT")
    assert not where.exists()
    write_table(df, location, client=owner)
    before = batch_dirs(where)
    with pytest.raises(ValueError, match="differ"):
        write_table(spark.createDataFrame([(1, "x")], "id long, other string"), location, client=owner)
    with pytest.raises(ValueError, match="partition_by"):
        write_table(df, location, partition_by=["part"], client=owner)
    assert batch_dirs(where) == before
    assert spark_rows(read_table(spark, location)) == sorted(batch(1))
