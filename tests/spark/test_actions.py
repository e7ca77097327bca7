"""Delta actions built for files Spark wrote (pure functions; no Spark session needed)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark", reason="SPARK TESTS SKIPPED: pyspark is not installed")

from client.spark.actions import (  # noqa: E402
    DataFile,
    add_action,
    commit_info,
    next_in_commit_timestamp,
    partition_values_from_path,
    remove_action,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_partition_values_are_decoded_from_uri_and_hive_escaping() -> None:
    rel = "p=a%20b/q=x%2525y/part-0.parquet"
    assert partition_values_from_path(rel, ["p", "q"]) == {"p": "a b", "q": "x%y"}


def test_hive_default_partition_is_null() -> None:
    assert partition_values_from_path("p=__HIVE_DEFAULT_PARTITION__/f.parquet", ["p"]) == {"p": None}


def test_missing_partition_folder_is_an_error() -> None:
    with pytest.raises(ValueError, match="no folder for partition"):
        partition_values_from_path("f.parquet", ["p"])


def test_commit_info_carries_in_commit_timestamp_as_first_field() -> None:
    ci = commit_info(in_commit_timestamp=123, mode="append", read_version=4, partition_by=["p"], num_files=2,
                     num_records=7)
    body = ci["commitInfo"]
    assert list(json.loads(json.dumps(ci))["commitInfo"])[0] == "inCommitTimestamp"
    assert body["inCommitTimestamp"] == 123 and body["readVersion"] == 4 and body["isBlindAppend"] is True
    assert body["operationParameters"]["partitionBy"] == '["p"]'
    overwrite = commit_info(in_commit_timestamp=5, mode="overwrite", read_version=0, partition_by=[], num_files=0,
                            num_records=0)["commitInfo"]
    assert overwrite["isBlindAppend"] is False and overwrite["operationParameters"]["mode"] == "Overwrite"


def test_add_action_serializes_stats_as_a_json_string() -> None:
    f = DataFile("b/p=1/x.parquet", 10, 99, {"p": "1"}, {"numRecords": 3, "minValues": {"id": 1}})
    add = add_action(f)["add"]
    assert add["path"] == "b/p=1/x.parquet" and add["size"] == 10 and add["modificationTime"] == 99
    assert add["dataChange"] is True and add["partitionValues"] == {"p": "1"}
    assert json.loads(add["stats"]) == {"numRecords": 3, "minValues": {"id": 1}}


def test_remove_action_keeps_partition_values_and_size() -> None:
    rm = remove_action("x.parquet", partition_values={"p": None}, size=5, deletion_timestamp=7)["remove"]
    assert rm == {"path": "x.parquet", "deletionTimestamp": 7, "dataChange": True, "extendedFileMetadata": True,
                  "partitionValues": {"p": None}, "size": 5}


def test_in_commit_timestamp_is_strictly_increasing() -> None:
    far_future = 10**15
    assert next_in_commit_timestamp(far_future) == far_future + 1
    assert next_in_commit_timestamp(None) > 0
