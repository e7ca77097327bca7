"""Which jars delta-spark needs in the driver JVM, and where they come from.

delta-spark's Python package does not contain its jars: its ``configure_spark_with_delta_pip`` asks Spark
to fetch ``io.delta:delta-spark_<spark major.minor>_2.13:<delta version>`` from Maven (``spark.jars.packages``).
Since 4.x, initializing Delta's ``CommitCoordinatorProvider`` also loads the AWS SDK v1 DynamoDB classes,
which delta-spark declares as a "provided" dependency: Maven resolution of delta-spark does not bring them.
"""

from __future__ import annotations

from importlib import metadata

SCALA_VERSION = "2.13"
#: The AWS SDK v1 DynamoDB client, at the version delta-spark 4.x compiles against.
AWS_SDK_V1_DYNAMODB = "com.amazonaws:aws-java-sdk-dynamodb:1.12.262"
#: The class whose absence makes Delta's CommitCoordinatorProvider fail to initialize.
AWS_SDK_V1_PROBE_CLASS = "com.amazonaws.services.dynamodbv2.AmazonDynamoDB"


def delta_spark_artifact(spark_version: str) -> str:
    """delta-spark's Maven artifact id for a Spark version, as delta-spark's pip package names it."""
    major_minor = ".".join(spark_version.split(".")[:2])
    return f"delta-spark_{major_minor}_{SCALA_VERSION}"


def delta_spark_package(spark_version: str, delta_version: str) -> str:
    """``io.delta:delta-spark_<x.y>_2.13:<delta version>``: what delta-spark's pip package asks Maven for."""
    return f"io.delta:{delta_spark_artifact(spark_version)}:{delta_version}"


def installed_versions() -> tuple[str | None, str | None]:
    """(pyspark version, delta-spark pip package version), None for what is not installed."""
    found: list[str | None] = []
    for dist in ("pyspark", "delta-spark"):
        try:
            found.append(metadata.version(dist))
        except metadata.PackageNotFoundError:
            found.append(None)
    return found[0], found[1]


def how_to_get_delta_spark() -> str:
    """One sentence: what to install or put on the class path for this pyspark, with the exact coordinates."""
    spark, delta = installed_versions()
    package = delta_spark_package(spark or "4.2.0", delta or "<delta version>")
    if delta is None:
        pip = ("pip install the delta-spark version that matches pyspark "
               f"{spark or '(not installed)'} (delta-spark 4.4.1 for pyspark 4.2), which makes Spark fetch {package}")
    else:
        pip = f"delta-spark {delta} is pip-installed, so Spark fetches {package}"
    return (
        f"{pip} and {AWS_SDK_V1_DYNAMODB} from Maven through spark.jars.packages (spark_session_with_commit_owner "
        "requests both; Maven must be reachable), or, without Maven, put delta-spark's jars (delta-spark, "
        "delta-storage) and the AWS SDK v1 DynamoDB and core jars on spark.jars and spark.driver.extraClassPath "
        "before the session starts (spark_session_with_commit_owner(..., fetch_jars=False))"
    )


HOW_TO_CHECK = (
    "check a session with client.spark.check_delta_spark(spark) and look at spark.conf.get('spark.jars.packages') "
    "and spark.conf.get('spark.jars')"
)

__all__ = [
    "AWS_SDK_V1_DYNAMODB",
    "AWS_SDK_V1_PROBE_CLASS",
    "HOW_TO_CHECK",
    "delta_spark_artifact",
    "delta_spark_package",
    "how_to_get_delta_spark",
    "installed_versions",
]
