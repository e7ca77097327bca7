"""The py4j bridge (client.spark.use_commit_owner) driven by a Java CONTRACT FIXTURE, not by delta-spark.

delta-spark's jars come from Maven Central, which CI cannot reach. ``tests/spark/java`` declares the
commit-coordinator types with delta-spark 4.x's packages and signatures and a driver that calls the
registered client the way Delta's commit loop does; the tests compile it with javac and load it into the
test SparkSession's JVM. The real delta-spark path is exercised by ``scripts/spark-delta-e2e``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="SPARK TESTS SKIPPED: pyspark is not installed")

from client.spark import spark_session_with_commit_owner, use_commit_owner  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

COMMIT_FAILED = "io.delta.storage.commit.CommitFailedException"


@pytest.fixture(scope="module")
def bridge(spark: Any, spark_owner: Any) -> Any:
    return use_commit_owner(spark, endpoint=spark_owner.endpoint, name="commit-owner")


def new_driver(spark: Any, bridge: Any, path: Path) -> Any:
    return spark._jvm.commitowner.fixture.CommitLoopDriver(
        spark._jsparkSession, bridge.name, {"endpoint": bridge.endpoint}, str(path)
    )


@pytest.fixture
def driver(spark: Any, bridge: Any, tmp_path: Path) -> Any:
    d = new_driver(spark, bridge, tmp_path / "table")
    d.registerNewTable()
    yield d
    d.close()


def flags(exc: Any) -> tuple[bool, bool]:
    assert exc is not None, "the commit was expected to fail"
    assert exc.getClass().getName() == COMMIT_FAILED
    return bool(exc.getRetryable()), bool(exc.getConflict())


def test_registration_stages_in_the_folder_this_delta_reads_and_client_writes_version_zero(
    spark: Any, bridge: Any, spark_owner: Any, tmp_path: Path
) -> None:
    d = new_driver(spark, bridge, tmp_path / "t")
    conf = dict(d.registerNewTable())
    info = spark_owner.client().get_table(conf["tableId"])
    assert bridge.commit_dir == "_staged_commits"  # what the fixture, like Delta 4.x, reads
    assert info.commit_dir == "_staged_commits"
    assert info.latest_table_version == -1
    first = json.loads((tmp_path / "t" / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[0])
    assert "inCommitTimestamp" in first["commitInfo"]
    page = d.getCommits(None, None)
    assert page.getCommits().size() == 0 and page.getLatestTableVersion() == -1
    d.close()


def test_commit_returns_the_version_and_a_file_status_of_the_real_commit_file(driver: Any) -> None:
    c = driver.commit(1, "w")
    assert c.getVersion() == 1
    status = c.getFileStatus()
    local = Path(status.getPath().toUri().getPath())
    assert local.parent.name == "_staged_commits" and local.exists()
    assert status.getLen() == local.stat().st_size
    first = json.loads(local.read_text().splitlines()[0])
    assert c.getCommitTimestamp() == first["commitInfo"]["inCommitTimestamp"]
    assert driver.lastDrainedLines() == 3 and driver.lastIteratorExhausted()


def test_stale_version_raises_a_real_commit_failed_exception_retryable_and_conflict(driver: Any) -> None:
    driver.commit(1, "w")
    driver.commit(2, "w")
    exc = driver.tryCommit(2, "late")
    assert flags(exc) == (True, True)
    assert "Expected version: 3" in exc.getMessage()


def test_gap_and_version_zero_are_fatal_not_retryable(driver: Any) -> None:
    driver.commit(1, "w")
    assert flags(driver.tryCommit(5, "gap")) == (False, False)
    zero = driver.tryCommit(0, "zero")
    assert flags(zero) == (False, False)
    assert "must go via filesystem" in zero.getMessage()


def test_get_commits_from_the_pool_returns_unbackfilled_commits_in_range(driver: Any) -> None:
    for v in (1, 2, 3):
        driver.commit(v, "w")
    page = driver.getCommits(None, None)
    assert [c.getVersion() for c in page.getCommits()] == [1, 2, 3]
    assert page.getLatestTableVersion() == 3
    ranged = driver.getCommits(2, 2)
    assert [c.getVersion() for c in ranged.getCommits()] == [2] and ranged.getLatestTableVersion() == 3
    assert driver.concurrentGetCommits(16, 3) == 16


def test_backfill_publishes_every_version_byte_for_byte(driver: Any, tmp_path: Path) -> None:
    staged = {v: Path(driver.commit(v, "w").getFileStatus().getPath().toUri().getPath()).read_bytes()
              for v in (1, 2)}
    driver.backfillToVersion(2, None)
    log = tmp_path / "table" / "_delta_log"
    for v, data in staged.items():
        assert (log / f"{v:020d}.json").read_bytes() == data
    page = driver.getCommits(None, None)
    assert page.getCommits().size() == 0 and page.getLatestTableVersion() == 2


def test_two_delta_style_commit_loops_race_and_every_version_is_won_exactly_once(
    spark: Any, bridge: Any, driver: Any, tmp_path: Path
) -> None:
    other = new_driver(spark, bridge, tmp_path / "table")
    other.adoptTableConf(driver.tableConf())
    won: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def run(name: str, d: Any) -> None:
        try:
            won[name] = [int(v) for v in d.commitLoop(6, name)]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n, d)) for n, d in (("a", driver), ("b", other))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(won["a"] + won["b"]) == list(range(1, 13))
    assert driver.getCommits(None, None).getLatestTableVersion() == 12
    assert driver.semanticEquals(other)
    other.close()



def test_registration_is_once_per_driver_and_refuses_another_endpoint_under_the_same_name(
    spark: Any, bridge: Any
) -> None:
    assert use_commit_owner(spark, endpoint=bridge.endpoint, name=bridge.name) is bridge
    with pytest.raises(ValueError, match="already registered"):
        use_commit_owner(spark, endpoint="http://127.0.0.1:1", name=bridge.name)


def test_a_table_staged_in_the_other_folder_is_refused_with_a_clear_fatal_error(
    spark: Any, bridge: Any, spark_owner: Any, tmp_path: Path
) -> None:
    location = tmp_path / "old-folder"
    info = spark_owner.client().register_table(location.as_uri(), current_version=-1, commit_dir="_commits")
    d = new_driver(spark, bridge, location)
    d.adoptTableConf({"tableId": info.table_id})
    exc = d.tryCommit(1, "w")
    assert flags(exc) == (False, False)
    assert "_commits" in exc.getMessage() and "_staged_commits" in exc.getMessage()
    assert spark_owner.client().get_table(info.table_id).latest_table_version == -1
    d.close()


def test_session_helper_refuses_to_reconfigure_a_running_session(spark: Any, bridge: Any) -> None:
    with pytest.raises(ValueError, match="already running"):
        spark_session_with_commit_owner(endpoint=bridge.endpoint, name=bridge.name)
    assert spark.range(3).count() == 3  # the running session was left as it was


def test_an_unreachable_owner_is_a_transient_failure_delta_retries(spark: Any, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on once the socket is closed
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    gone = use_commit_owner(spark, endpoint=dead, name="unreachable-owner", timeout=0.5, deadline=0.5)
    d = new_driver(spark, gone, tmp_path / "t")
    d.adoptTableConf({"tableId": "00000000-0000-0000-0000-000000000000"})
    assert flags(d.tryCommit(1, "w")) == (True, False)
    with pytest.raises(Exception, match="IllegalStateException"):
        d.getCommits(None, None)
    d.close()
