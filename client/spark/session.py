"""Build a SparkSession with Delta's extension and this owner registered as a commit coordinator."""

from __future__ import annotations

import json
from typing import Any

from client.spark.bridge import use_commit_owner
from client.spark.jars import AWS_SDK_V1_DYNAMODB

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# Session defaults Delta copies into the properties of every table it creates (spark.databricks.delta.
# properties.defaults.<key without "delta.">). Only the owner's name and endpoint: never a secret.
_DEFAULTS = "spark.databricks.delta.properties.defaults."
OWNER_NAME_DEFAULT = _DEFAULTS + "coordinatedCommits.commitCoordinator-preview"
OWNER_CONF_DEFAULT = _DEFAULTS + "coordinatedCommits.commitCoordinatorConf-preview"
ICT_DEFAULT = _DEFAULTS + "enableInCommitTimestamps"


def spark_session_with_commit_owner(
    builder: Any = None,
    *,
    endpoint: str,
    name: str = "commit-owner",
    token: str | None = None,
    owned_by_default: bool = True,
    extra_packages: list[str] | None = None,
    fetch_jars: bool = True,
) -> Any:
    """Create (or get) a SparkSession with delta-spark and this owner registered as coordinator ``name``.

    With ``fetch_jars``, the jars come from Maven (``spark.jars.packages``, fetched on first use): when the
    ``delta-spark`` Python package is installed, the delta-spark coordinates it names (through its
    ``configure_spark_with_delta_pip``, e.g. ``io.delta:delta-spark_4.2_2.13:4.4.1`` for pyspark 4.2), and
    always the AWS SDK v1 DynamoDB client that delta-spark's coordinator provider loads but does not depend on.
    With ``fetch_jars=False`` nothing is fetched: the builder must already put delta-spark's jars and the AWS
    SDK v1 on ``spark.jars`` and ``spark.driver.extraClassPath``. ``extra_packages`` are added either way.
    With ``owned_by_default`` every table the session creates names this owner in its properties; otherwise
    set ``delta.coordinatedCommits.commitCoordinator-preview`` per table.

    Raises ValueError when a SparkSession is already running in this process (Delta's extension and catalog
    must be set before the session starts; call :func:`use_commit_owner` on that session instead) and
    DeltaSparkUnavailableError when the new session ends up without delta-spark's classes.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        raise ValueError(
            "a SparkSession is already running in this process; Delta's extension and catalog can only be set "
            "before it starts: stop it first, or call use_commit_owner(spark, endpoint=...) on it"
        )
    if builder is None:
        builder = SparkSession.builder
    builder = builder.config("spark.sql.extensions", DELTA_EXTENSION).config(
        "spark.sql.catalog.spark_catalog", DELTA_CATALOG
    )
    if owned_by_default:
        builder = (
            builder.config(OWNER_NAME_DEFAULT, name)
            .config(OWNER_CONF_DEFAULT, json.dumps({"endpoint": endpoint.rstrip("/")}))
            .config(ICT_DEFAULT, "true")
        )
    builder = with_delta_jars(builder, fetch_jars=fetch_jars, extra_packages=extra_packages)
    spark = builder.getOrCreate()
    use_commit_owner(spark, endpoint=endpoint, name=name, token=token)
    return spark


def with_delta_jars(builder: Any, *, fetch_jars: bool = True, extra_packages: list[str] | None = None) -> Any:
    """``builder`` with the Maven packages :func:`spark_session_with_commit_owner` requests (see there)."""
    packages = list(extra_packages or [])
    if not fetch_jars:
        return builder.config("spark.jars.packages", ",".join(packages)) if packages else builder
    packages.insert(0, AWS_SDK_V1_DYNAMODB)
    try:
        from delta import configure_spark_with_delta_pip
    except ImportError:
        return builder.config("spark.jars.packages", ",".join(packages))
    return configure_spark_with_delta_pip(builder, extra_packages=packages)


__all__ = ["spark_session_with_commit_owner", "with_delta_jars"]
