"""The two writers share one committer: pyarrow/pandas/Polars appends (client.write_table) and Spark appends
(client.spark.write_table) racing on one owned table each land exactly once, and each reads the other's rows."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="SPARK TESTS SKIPPED: pyspark is not installed")
deltalake = pytest.importorskip("deltalake", reason="delta-rs (deltalake) is needed as the independent reader")

import pyarrow as pa  # noqa: E402

from client.snapshot import load_snapshot  # noqa: E402
from client.spark import read_table  # noqa: E402
from client.spark import write_table as spark_write  # noqa: E402
from client.write import write_table  # noqa: E402

pytestmark = pytest.mark.spark

SCHEMA = "id long, name string, part string"


def batch(n: int, size: int = 3) -> list[tuple[Any, ...]]:
    return [(n * 100 + k, None if k == 0 else f"w{n}-{k}", "a" if k % 2 else "b") for k in range(size)]


def arrow(rows: list[tuple[Any, ...]]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "name": [r[1] for r in rows],
                     "part": [r[2] for r in rows]})


def test_two_python_appends_and_a_spark_append_land_exactly_once_each(
    spark: Any, spark_owner: Any, tmp_path: Path
) -> None:
    location = (tmp_path / "mixed").as_uri()
    owner = spark_owner.client()
    write_table(arrow(batch(0)), location, partition_by=["part"], client=owner)  # versions 0 and 1
    versions: dict[str, list[int]] = {"pandas": [], "polars": [], "spark": []}
    errors: list[BaseException] = []

    def python_writer(kind: str, base: int) -> None:
        try:
            for i in range(3):
                table = arrow(batch(base + i))
                if kind == "pandas":
                    data: Any = table.to_pandas()
                else:
                    import polars as pl

                    data = pl.from_arrow(table)
                versions[kind].append(write_table(data, location, client=spark_owner.client()).version)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def spark_writer() -> None:
        try:
            for i in range(3):
                df = spark.createDataFrame(batch(30 + i), SCHEMA)
                versions["spark"].append(spark_write(df, location, client=spark_owner.client()).version)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=python_writer, args=("pandas", 10)),
               threading.Thread(target=python_writer, args=("polars", 20)),
               threading.Thread(target=spark_writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(v for vs in versions.values() for v in vs) == list(range(2, 11))
    want = sorted(row for n in (0, 10, 11, 12, 20, 21, 22, 30, 31, 32) for row in batch(n))
    got_spark = sorted(tuple(r[c] for c in ("id", "name", "part")) for r in read_table(spark, location).collect())
    assert got_spark == want
    snap = load_snapshot(location, client=owner)
    assert snap.version == 10
    owner.backfill_to_version(snap.owner.table_id, 10)
    got_rs = sorted((r["id"], r["name"], r["part"]) for r in deltalake.DeltaTable(location).to_pyarrow_table().to_pylist())
    assert got_rs == want
    folders = {f["path"].split("/")[0] for f in snap.files}
    assert len(folders) == 10  # one batch folder per write, none left over from a rebase
    assert {p.name for p in (tmp_path / "mixed").iterdir() if p.name.startswith("batch-")} == folders
