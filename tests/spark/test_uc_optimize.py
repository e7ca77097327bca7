"""The owner's compaction (`commit-owner optimize`, coordinator/ops/optimize.py) of MANAGED tables that stock
delta-spark 4.4 + ``UCSingleCatalog`` writes through ``/delta/v1``, with delta-spark writing during it.

One Spark process (tests/spark/uc_sql.py, one JVM) creates two partitioned tables and grows each by small
INSERTs (the second with deletion vectors on), then, while a compaction of each is under way (between its read
and its commit), INSERTs into the first and DELETEs one row from the second. The compaction of the first moves
onto the INSERT and commits; the DELETE replaced a file the second compaction rewrote (a deletion vector), so
it gives up; a compaction run afterwards applies that deletion vector. delta-spark then reads both tables (rows
and DESCRIBE HISTORY), and the owner's ratified rows are judged as in tests/spark/test_uc_catalog.py.

A third table is delta-spark's default MANAGED table, with row tracking on: grown by INSERTs, an UPDATE and a
DELETE, compacted, then read by delta-spark with the same ``_metadata.row_id`` and ``_metadata.row_commit_version``
per row as before, and INSERTed into (its row id above every earlier one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
import pytest

from client.contract.errors import TableChangedError
from coordinator.ops.optimize import run_optimize
from coordinator.runtime.settings import Settings
from tests.conftest import make_backend
from tests.spark.uc_support import Scenario, history, judge_owner, result_rows, wait_ready
from tests.unity.sail import Owner, local_path, start_owner

pytestmark = [pytest.mark.spark, pytest.mark.slow]

INSERTS = [(1, "a"), (2, "b"), (3, "a"), (4, "b"), (5, "a"), (6, "b")]
# The second table: two rows of one partition per INSERT, so that a DELETE of one row leaves a deletion vector.
PAIRS = [((i, p), (i + 100, p)) for i, p in INSERTS]


@pytest.fixture(scope="module")
def owner(request: pytest.FixtureRequest, uc_jars: Path) -> Iterator[Owner]:
    o = start_owner(make_backend(request, "sqlite", "local", "uc-optimize"), "rest")
    yield o
    o.service.stop()


def _gated(gate: Path, until: Path, s: Scenario, procs: list[Any]) -> Any:
    """A ``before_commit`` that, on the compaction's first proposal only, releases Spark at ``gate`` and waits
    until Spark's statement after it is done (Spark waits at ``until``)."""
    calls: list[int] = []

    def hook(version: int) -> None:
        calls.append(version)
        if len(calls) == 1:
            gate.touch()
            wait_ready(until, 1, procs, s)

    return hook


async def test_compaction_while_delta_spark_inserts_and_deletes(owner: Owner, uc_jars: Path, tmp_path: Path) -> None:
    s = Scenario(owner, uc_jars, tmp_path, rest=True)
    grow, race_insert, race_delete, judged = (tmp_path / g for g in ("grow", "race-insert", "race-delete", "judged"))
    t1, t2 = f"{s.catalog}.s.appended", f"{s.catalog}.s.deleted"
    # The fact source: delta-spark's own OPTIMIZE of a plain path table (no catalog), its commitInfo compared below.
    plain, plain_rt = tmp_path / "plain", tmp_path / "plain-rt"
    steps: list[Any] = [f"CREATE TABLE spark_catalog.delta.`{plain}` (id INT) USING delta",
                        *(f"INSERT INTO spark_catalog.delta.`{plain}` VALUES ({i})" for i in range(3)),
                        f"OPTIMIZE spark_catalog.delta.`{plain}`",
                        # and of one with row tracking, after an UPDATE (a materialized row id): its actions
                        f"CREATE TABLE spark_catalog.delta.`{plain_rt}` (id INT) USING delta "
                        "TBLPROPERTIES ('delta.enableRowTracking' = 'true')",
                        *(f"INSERT INTO spark_catalog.delta.`{plain_rt}` VALUES ({i})" for i in range(3)),
                        f"UPDATE spark_catalog.delta.`{plain_rt}` SET id = 10 WHERE id = 1",
                        f"OPTIMIZE spark_catalog.delta.`{plain_rt}`",
                        f"CREATE SCHEMA {s.catalog}.s"]
    # delta-spark's default MANAGED table has the rowTracking feature: grown by INSERTs, an UPDATE (the row keeps
    # its row id, materialized) and a DELETE (a deletion vector), its row ids read before and after compaction
    t0 = f"{s.catalog}.s.tracked"
    tracked_ids = (f"SELECT id, _metadata.row_id AS row_id, _metadata.row_commit_version AS row_commit_version "
                   f"FROM {t0}")
    steps += [f"CREATE TABLE {t0} (id INT) USING delta",
              *(f"INSERT INTO {t0} SELECT /*+ REPARTITION(1) */ * FROM VALUES {v} AS v(id)"
                for v in ("(1), (2)", "(3), (4)", "(5)")),
              f"UPDATE {t0} SET id = 30 WHERE id = 3", f"DELETE FROM {t0} WHERE id = 1", tracked_ids]
    steps.append(f"CREATE TABLE {t1} (id INT, part STRING) USING delta PARTITIONED BY (part) "
                 "TBLPROPERTIES ('delta.enableRowTracking' = 'false')")
    steps += [f"INSERT INTO {t1} VALUES ({i}, '{p}')" for i, p in INSERTS]
    steps.append(f"CREATE TABLE {t2} (id INT, part STRING) USING delta PARTITIONED BY (part) "
                 "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableRowTracking' = 'false')")
    steps += [f"INSERT INTO {t2} SELECT /*+ REPARTITION(1) */ * FROM VALUES ({a[0]}, '{a[1]}'), ({b[0]}, '{b[1]}') "
              "AS v(id, part)" for a, b in PAIRS]  # one file of two rows each
    steps += [{"wait": str(grow)},
              {"wait": str(race_insert)}, f"INSERT INTO {t1} VALUES (100, 'a')",
              {"wait": str(race_delete)}, f"DELETE FROM {t2} WHERE id = 1",
              {"wait": str(judged)},
              f"SELECT id, part FROM {t1}", f"DESCRIBE HISTORY {t1}", f"SELECT id, part FROM {t2}",
              f"DESCRIBE HISTORY {t2}",
              tracked_ids, f"INSERT INTO {t0} VALUES (6)", tracked_ids, f"DESCRIBE HISTORY {t0}"]
    spark = s.start("writer", steps)
    settings = Settings.load(environ=owner.backend.env())
    try:
        wait_ready(grow, 1, [spark], s)
        grow.touch()
        ids = {t: owner.uc("GET", f"/tables/{t}") for t in (t1, t2)}
        for t in (t1, t2):
            first = [json.loads(x) for x in (local_path(ids[t]["storage_location"]) / "_delta_log" /
                                             f"{0:020d}.json").read_text().splitlines()]
            print(f"\n[{t}] protocol {[a for a in first if 'protocol' in a]}, configuration "
                  f"{[a['metaData'].get('configuration') for a in first if 'metaData' in a]}")
        theirs = json.loads((plain / "_delta_log" / f"{4:020d}.json").read_text().splitlines()[0])["commitInfo"]
        theirs_rt = [json.loads(x) for x in (plain_rt / "_delta_log" / f"{5:020d}.json").read_text().splitlines()]
        print(f"\ndelta-spark's own OPTIMIZE with row tracking: {json.dumps(theirs_rt)}")
        print(f"\ndelta-spark's own OPTIMIZE commitInfo: {json.dumps(theirs)}")
        for t in (t1, t2):
            judge_owner(s, ids[t]["table_id"], ids[t]["storage_location"], len(INSERTS))

        # The row-tracking table: compacted, each row's row id and row commit version kept in the new files.
        tracked = owner.uc("GET", f"/tables/{t0}")
        root0 = local_path(tracked["storage_location"])
        first = [json.loads(x) for x in (root0 / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
        conf0 = next(a["metaData"] for a in first if "metaData" in a)["configuration"]
        print(f"\n[{t0}] protocol {[a for a in first if 'protocol' in a]}, configuration {conf0}")
        assert conf0["delta.enableRowTracking"] == "true"
        judge_owner(s, tracked["table_id"], tracked["storage_location"], 5)
        rep0 = await run_optimize(settings, tracked["storage_location"], target_size=1 << 20)
        print(f"\n[{t0}] compaction: {rep0}")
        assert rep0["version"] == 6 and rep0["filesAdded"] == 1, rep0
        judge_owner(s, tracked["table_id"], tracked["storage_location"], 6)
        compacted = [json.loads(x) for x in (root0 / "_delta_log" / f"{6:020d}.json").read_text().splitlines()]
        marks = [json.loads(a["domainMetadata"]["configuration"])["rowIdHighWaterMark"] for a in compacted
                 if "domainMetadata" in a]
        new_add = next(a["add"] for a in compacted if "add" in a)
        assert new_add["defaultRowCommitVersion"] == 6 and marks == [new_add["baseRowId"] + 4 - 1], compacted
        # the shape of delta-spark's own: the tag, a fresh baseRowId and version, the mark in the same commit, the
        # two materialized columns in the new file
        assert compacted[0]["commitInfo"]["tags"]["delta.rowTracking.preserved"] == "true"
        assert theirs_rt[0]["commitInfo"].get("tags", {}).get("delta.rowTracking.preserved") == "true"
        their_add = next(a["add"] for a in theirs_rt if "add" in a)
        assert their_add["defaultRowCommitVersion"] == 5 and "baseRowId" in their_add
        assert [a["domainMetadata"]["domain"] for a in theirs_rt if "domainMetadata" in a] == ["delta.rowTracking"]

        def hidden(root: Path, add: dict[str, Any]) -> list[str]:
            return sorted(c for c in pq.read_schema(root / unquote(add["path"])).names if c != "id")

        assert len(hidden(plain_rt, their_add)) == 2
        assert hidden(root0, new_add) == sorted([conf0["delta.rowTracking.materializedRowIdColumnName"],
                                                 conf0["delta.rowTracking.materializedRowCommitVersionColumnName"]])

        # An INSERT lands between the compaction's read and its commit: the compaction commits after it.
        rep = await run_optimize(settings, ids[t1]["storage_location"], target_size=1 << 20,
                                 before_commit=_gated(race_insert, race_delete, s, [spark]))
        assert rep["readVersion"] == 6 and rep["version"] == 8 and rep["rebases"] == 1
        assert rep["filesRemoved"] == 6 and rep["filesAdded"] == 2
        judge_owner(s, ids[t1]["table_id"], ids[t1]["storage_location"], 8)

        # A DELETE removes a file the compaction rewrites: the compaction gives up, its files deleted.
        with pytest.raises(TableChangedError, match="gave up: version 7 removed"):
            await run_optimize(settings, ids[t2]["storage_location"], target_size=1 << 20,
                               before_commit=_gated(race_delete, judged, s, [spark]))
        judge_owner(s, ids[t2]["table_id"], ids[t2]["storage_location"], 7)
        root = local_path(ids[t2]["storage_location"])
        referenced = {unquote(a["add"]["path"]) for f in sorted((root / "_delta_log").glob("*.json"))
                      for a in map(json.loads, f.read_text().splitlines()) if "add" in a}
        files = {str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}
        assert files <= referenced, files - referenced  # the compaction's own files are gone again
        deleting = [json.loads(x) for x in (root / "_delta_log" / f"{7:020d}.json").read_text().splitlines()]
        assert [a["add"]["deletionVector"]["cardinality"] for a in deleting if "add" in a] == [1]

        # Run again with nobody racing: the DELETE's deletion vector is applied (the row left out of the rewrite).
        purge = await run_optimize(settings, ids[t2]["storage_location"], target_size=1 << 20)
        assert purge["version"] == 8 and purge["deletionVectorsPurged"] == 1 and purge["filesAdded"] == 2
        info = json.loads((root / "_delta_log" / f"{8:020d}.json").read_text().splitlines()[0])["commitInfo"]
        assert info["operationMetrics"]["numDeletionVectorsRemoved"] == "1"
        # the same operation, parameters and metric names as delta-spark's own OPTIMIZE writes
        assert info["operation"] == theirs["operation"] == "OPTIMIZE"
        assert info["operationParameters"] == theirs["operationParameters"], theirs
        assert set(info["operationMetrics"]) == set(theirs["operationMetrics"]), theirs
        assert all(isinstance(v, str) for v in theirs["operationMetrics"].values())
        judge_owner(s, ids[t2]["table_id"], ids[t2]["storage_location"], 8)

        judged.touch()
        results = s.expect_ok(spark, spark.finish(), len([x for x in steps if isinstance(x, str)]))
        sel1, hist1, sel2, hist2, ids_after, _, ids_then, hist0 = results[-8:]
        ids_before = next(r for r in results if r["sql"] == tracked_ids)
        print(f"\n[{t0}] row ids before the compaction: {ids_before['rows']}")
        # delta-spark reads the same rows with the same row ids and row commit versions after the compaction
        cols = ("id", "row_id", "row_commit_version")
        assert result_rows(ids_after, *cols) == result_rows(ids_before, *cols)
        assert sorted(r[0] for r in result_rows(ids_before, *cols)) == [2, 4, 5, 30]
        assert history(hist0)[6] == "OPTIMIZE"
        # an INSERT after it gets a row id above every earlier one (the mark the compaction raised), version 7
        (late,) = [r for r in result_rows(ids_then, *cols) if r[0] == 6]
        assert late[1] > marks[0] and late[2] == 7
        assert sorted((r for r in result_rows(ids_then, *cols) if r[0] != 6), key=repr) == result_rows(ids_before,
                                                                                                      *cols)
        assert result_rows(sel1, "id", "part") == sorted([*INSERTS, (100, "a")], key=repr)
        assert history(hist1)[8] == "OPTIMIZE" and history(hist1)[7] == "WRITE"
        optimize_row = next(r for r in hist1["rows"] if int(r["version"]) == 8)
        print(f"\n[{t1}] DESCRIBE HISTORY of the owner's compaction: {json.dumps(optimize_row, default=str)[:1500]}")
        assert result_rows(sel2, "id", "part") == sorted([r for pair in PAIRS for r in pair if r[0] != 1], key=repr)
        assert history(hist2)[7] == "DELETE" and history(hist2)[8] == "OPTIMIZE"
    finally:
        if spark.proc.poll() is None:
            spark.proc.kill()
            spark.proc.wait(30)
