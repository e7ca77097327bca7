"""The maintenance policy on a MANAGED table that stock delta-spark 4.4 + ``UCSingleCatalog`` writes through
``/delta/v1``: delta-spark refuses OPTIMIZE itself, its ``ALTER TABLE ... SET TBLPROPERTIES`` sets the
policy's threshold (a ``commitowner.*`` property, committed through the owner like any metadata change), one
`commit-owner maintain` pass compacts the table, and delta-spark reads the same rows with OPTIMIZE in its history.
The load-table reply tells clients no maintenance is left to them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.ops.maintain import run_maintain
from coordinator.ops.policy import PARTITION_SMALL_FILES
from coordinator.runtime.settings import Settings
from tests.conftest import make_backend
from tests.spark.uc_support import Scenario, history, judge_owner, result_rows, wait_ready
from tests.unity.sail import Owner, start_owner

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = [(1, "a"), (2, "b"), (3, "a"), (4, "b"), (5, "a"), (6, "b")]


@pytest.fixture(scope="module")
def owner(request: pytest.FixtureRequest, uc_jars: Path) -> Iterator[Owner]:
    o = start_owner(make_backend(request, "postgres", "local", "uc-policy"), "rest")
    yield o
    o.service.stop()


async def test_delta_spark_sets_the_policy_by_property_and_a_maintain_pass_compacts(owner: Owner, uc_jars: Path,
                                                                                      tmp_path: Path) -> None:
    s = Scenario(owner, uc_jars, tmp_path, rest=True)
    grown, judged = tmp_path / "grown", tmp_path / "judged"
    t = f"{s.catalog}.s.events"
    steps: list[object] = [
        f"CREATE SCHEMA {s.catalog}.s",
        f"CREATE TABLE {t} (id INT, part STRING) USING delta PARTITIONED BY (part)",  # row tracking on (the default)
        *(f"INSERT INTO {t} VALUES ({i}, '{p}')" for i, p in ROWS),
        f"ALTER TABLE {t} SET TBLPROPERTIES ('{PARTITION_SMALL_FILES}' = '2')",
        {"wait": str(grown)},
        {"wait": str(judged)},
        f"SELECT id, part FROM {t}", f"DESCRIBE HISTORY {t}", f"SHOW TBLPROPERTIES {t}",
        f"OPTIMIZE {t}",  # refused by delta-spark itself, the catalog's job (the first failure ends the process)
    ]
    spark = s.start("writer", steps)
    try:
        wait_ready(grown, 1, [spark], s)
        record = owner.uc("GET", f"/tables/{t}")
        loaded = owner.uc("GET", f"/delta/v1/catalogs/{s.catalog}/schemas/s/tables/events")
        assert loaded["allowed-maintenance-operations"] == []
        assert loaded["metadata"]["properties"][PARTITION_SMALL_FILES] == "2"  # the ALTER went through the owner
        version = loaded["latest-table-version"]
        assert version == len(ROWS) + 1
        grown.touch()

        # Defaults (50 small files a partition) would leave 3 alone; the table's property says more than 2.
        out = await run_maintain(Settings.load(environ=owner.backend.env()), (record["table_id"],))
        assert out["failures"] == [] and out["compactions"] == 1
        opt = out["tables"][0]["optimize"]
        assert opt["version"] == version + 1 and opt["filesRemoved"] == 6 and opt["filesAdded"] == 2
        assert "has 3 files smaller than" in opt["reason"] and "(more than 2)" in opt["reason"]
        judge_owner(s, record["table_id"], record["storage_location"], version + 1)
        judged.touch()

        *ok, refused = spark.finish()
        assert all(r["ok"] for r in ok), [r for r in ok if not r["ok"]]
        assert refused["sql"] == f"OPTIMIZE {t}" and not refused["ok"]
        assert "DELTA_UNSUPPORTED_CATALOG_MANAGED_TABLE_OPERATION" in refused["error"], refused
        sel, hist, props = ok[-3:]
        assert result_rows(sel, "id", "part") == sorted(ROWS, key=repr)
        ops = history(hist)
        assert max(ops) == version + 1 and ops[version + 1] == "OPTIMIZE"
        assert (PARTITION_SMALL_FILES, "2") in result_rows(props, "key", "value")
    finally:
        spark.proc.kill()
