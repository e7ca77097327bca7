"""The bridge says clearly when delta-spark is missing or too old, or when the AWS SDK v1 it loads is missing.

Each case starts a plain JVM through py4j (no Spark session) with a chosen classpath: nothing Delta-like
at all, only a stand-in for delta-spark 3.2's preview class, or a provider that loads an AWS SDK v1 class
at first use, as delta-spark 4.x's does (contract fixtures, not delta-spark).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="SPARK TESTS SKIPPED: pyspark is not installed")

from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway  # noqa: E402
from py4j.protocol import Py4JJavaError  # noqa: E402

from client.spark import DeltaSparkUnavailableError  # noqa: E402
from client.spark.bridge import check_delta_spark, explain_missing_classes, staged_commit_dir  # noqa: E402
from client.spark.jars import AWS_SDK_V1_DYNAMODB, delta_spark_package, installed_versions  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

OLD_FIXTURE = Path(__file__).parent / "java-old"
NO_AWS_FIXTURE = Path(__file__).parent / "java-no-aws"


def _py4j_jar() -> str:
    import py4j

    share = Path(py4j.__file__).resolve().parents[4] / "share" / "py4j"
    jars = sorted(share.glob("py4j*.jar"))
    if not jars:
        import pyspark

        jars = sorted((Path(pyspark.__file__).parent / "jars").glob("py4j-*.jar"))
    if not jars:
        pytest.skip("SPARK TESTS SKIPPED: py4j's jar was not found")
    return str(jars[0])


def _jars() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")


def _start_jvm(*extra: Path) -> JavaGateway:
    classpath = os.pathsep.join([_jars(), *(str(p) for p in extra)])
    port = launch_gateway(jarpath=_py4j_jar(), classpath=classpath, die_on_exit=True)
    return JavaGateway(gateway_parameters=GatewayParameters(port=port))


@pytest.fixture
def plain_jvm(contract_classes: Path) -> Iterator[Any]:
    """A JVM with pyspark's jars only (``contract_classes`` just brings the Java/pyspark skip check)."""
    gateway = _start_jvm()
    yield gateway.jvm
    gateway.shutdown()


def test_a_jvm_without_delta_spark_is_refused_with_what_to_install(plain_jvm: Any) -> None:
    with pytest.raises(DeltaSparkUnavailableError, match="delta-spark is not on the driver class path") as err:
        check_delta_spark(plain_jvm)
    spark_version, delta_version = installed_versions()
    message = err.value.message
    # the coordinates delta-spark's pip package asks Maven for, the AWS SDK it does not bring, and how to check
    assert delta_spark_package(spark_version, delta_version or "<delta version>") in message
    assert AWS_SDK_V1_DYNAMODB in message and "spark.driver.extraClassPath" in message
    assert "check_delta_spark(spark)" in message
    assert staged_commit_dir(plain_jvm) == "_commits"  # no Delta utils: the RFC's folder


@pytest.fixture
def old_classes(tmp_path: Path) -> Path:
    out = tmp_path / "old"
    sources = [str(p) for p in OLD_FIXTURE.rglob("*.java")]
    subprocess.run(["javac", "-d", str(out), *sources], check=True)
    return out


def test_delta_spark_3_2_managed_commits_preview_is_refused_as_too_old(
    old_classes: Path, contract_classes: Path
) -> None:
    gateway = _start_jvm(old_classes)
    try:
        with pytest.raises(DeltaSparkUnavailableError, match="too old"):
            check_delta_spark(gateway.jvm)
    finally:
        gateway.shutdown()


@pytest.fixture
def provider_classes(tmp_path: Path, contract_classes: Path) -> Path:
    """The provider fixture compiled with its AWS SDK v1 stand-in (``contract_classes``: the skip check)."""
    out = tmp_path / "no-aws"
    subprocess.run(["javac", "-d", str(out), *(str(p) for p in NO_AWS_FIXTURE.rglob("*.java"))], check=True)
    return out


def test_a_driver_without_the_aws_sdk_is_refused_naming_the_jar(provider_classes: Path) -> None:
    shutil.rmtree(provider_classes / "com")  # a driver without aws-java-sdk-dynamodb
    gateway = _start_jvm(provider_classes)
    try:
        with pytest.raises(DeltaSparkUnavailableError, match="AWS SDK v1") as err:
            check_delta_spark(gateway.jvm)
        assert AWS_SDK_V1_DYNAMODB in err.value.message and "spark.jars.packages" in err.value.message
        # What registration meets when it uses the provider: the JVM's own NoClassDefFoundError, made clear.
        provider = gateway.jvm.org.apache.spark.sql.delta.coordinatedcommits.CommitCoordinatorProvider
        with pytest.raises(Py4JJavaError) as raw:
            provider.getRegisteredCoordinatorNames()
        clear = explain_missing_classes(raw.value)
        assert clear is not None and AWS_SDK_V1_DYNAMODB in clear.message
        assert "com/amazonaws/services/dynamodbv2/AmazonDynamoDB" in clear.message
        with pytest.raises(Py4JJavaError) as again:  # the JVM remembers: "Could not initialize class ..."
            provider.getRegisteredCoordinatorNames()
        assert explain_missing_classes(again.value) is not None
    finally:
        gateway.shutdown()


def test_with_the_aws_sdk_on_the_class_path_the_provider_starts(provider_classes: Path) -> None:
    gateway = _start_jvm(provider_classes)
    try:
        check_delta_spark(gateway.jvm)
        provider = gateway.jvm.org.apache.spark.sql.delta.coordinatedcommits.CommitCoordinatorProvider
        assert "dynamodb" in set(provider.getRegisteredCoordinatorNames())
    finally:
        gateway.shutdown()


def test_other_java_failures_are_not_mistaken_for_a_missing_jar(plain_jvm: Any) -> None:
    with pytest.raises(Py4JJavaError) as raw:
        plain_jvm.java.lang.Class.forName("no.such.Thing")
    assert explain_missing_classes(raw.value) is None
