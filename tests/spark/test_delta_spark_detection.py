"""The bridge says clearly when delta-spark is missing or too old.

Each case starts a plain JVM through py4j (no Spark session) with a chosen classpath: nothing Delta-like
at all, or only a stand-in for delta-spark 3.2's preview class (a contract fixture, not delta-spark).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("pyspark", reason="SPARK TESTS SKIPPED: pyspark is not installed")

from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway  # noqa: E402

from client.spark import DeltaSparkUnavailableError  # noqa: E402
from client.spark.bridge import check_delta_spark, staged_commit_dir  # noqa: E402

pytestmark = pytest.mark.spark

OLD_FIXTURE = Path(__file__).parent / "java-old"


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
    with pytest.raises(DeltaSparkUnavailableError, match="delta-spark is not on the driver classpath"):
        check_delta_spark(plain_jvm)
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
