"""What a delta-spark session asks Maven for: delta-spark at the coordinates its own pip package names, and the
AWS SDK v1 DynamoDB client that delta-spark's coordinator provider loads but does not depend on.

The builders here are real ``SparkSession.Builder`` objects that are never started (starting one would make
Spark fetch the packages from Maven, which CI cannot reach)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="SPARK TESTS SKIPPED: pyspark is not installed")

from pyspark.sql import SparkSession  # noqa: E402

from client.spark.jars import AWS_SDK_V1_DYNAMODB, delta_spark_package, installed_versions  # noqa: E402
from client.spark.session import with_delta_jars  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.4.1"


def _packages(builder: SparkSession.Builder) -> list[str]:
    # Builder keeps its settings in _options until getOrCreate; there is no public getter before start-up.
    raw = builder._options.get("spark.jars.packages", "")
    return raw.split(",") if raw else []


def test_delta_spark_coordinates_are_the_ones_its_pip_package_asks_for() -> None:
    spark_version, delta_version = installed_versions()
    if delta_version is None:
        pytest.skip("SPARK TESTS SKIPPED: the delta-spark Python package is not installed (make install-test)")
    from delta import configure_spark_with_delta_pip

    asked = _packages(configure_spark_with_delta_pip(SparkSession.Builder()))
    assert asked == [delta_spark_package(spark_version, delta_version)]
    if spark_version == "4.2.0" and delta_version == "4.4.1":
        assert asked == ["io.delta:delta-spark_4.2_2.13:4.4.1"]


def test_the_session_requests_the_aws_sdk_with_delta_spark() -> None:
    spark_version, delta_version = installed_versions()
    packages = _packages(with_delta_jars(SparkSession.Builder(), extra_packages=[HADOOP_AWS]))
    expected = [AWS_SDK_V1_DYNAMODB, HADOOP_AWS]
    if delta_version is not None:
        expected.insert(0, delta_spark_package(spark_version, delta_version))
    assert packages == expected
    assert AWS_SDK_V1_DYNAMODB.startswith("com.amazonaws:aws-java-sdk-dynamodb:1.12.")


def test_local_jars_mean_nothing_is_fetched() -> None:
    assert _packages(with_delta_jars(SparkSession.Builder(), fetch_jars=False)) == []
    assert _packages(with_delta_jars(SparkSession.Builder(), fetch_jars=False, extra_packages=[HADOOP_AWS])) == [
        HADOOP_AWS]
