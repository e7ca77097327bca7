"""A SparkSession with stock delta-spark and Unity Catalog's Spark connector pointed at the owner's UC API.

No bridge and no project code in the JVM: Unity Catalog's ``io.unitycatalog.spark.UCSingleCatalog`` finds
tables by name through ``/api/2.1/unity-catalog``, and delta-spark (4.4+) commits catalog-managed tables through
Unity Catalog itself. ``delta_rest_api`` sets ``spark.sql.catalog.<catalog>.deltaRestApi.enabled``, read by
both the connector and delta-spark:

* ``True`` (the default of both): tables are staged, created, loaded and committed through the Delta REST
  Catalog API (``/delta/v1/catalogs/{c}/schemas/{s}/...``);
* ``False``: the older API: ``POST /staging-tables`` and ``POST /tables`` to create, ``GET /tables/{full name}``
  to load, ``POST`` / ``GET /delta/preview/commits`` to commit and list commits.

The jars are local files (a folder of them): delta-spark, delta-storage, ``unitycatalog-client``,
``unitycatalog-hadoop`` and ``unitycatalog-spark_<spark x.y>_2.13``, all on ``spark.jars`` AND
``spark.driver.extraClassPath`` (the driver loads the catalog class at start-up).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from client.spark.session import DELTA_CATALOG, DELTA_EXTENSION

UC_SINGLE_CATALOG = "io.unitycatalog.spark.UCSingleCatalog"
#: File-name prefixes a jar folder must hold for UCSingleCatalog with delta-spark.
REQUIRED_JAR_PREFIXES = ("delta-spark_", "delta-storage-", "unitycatalog-client-", "unitycatalog-hadoop-",
                         "unitycatalog-spark_")


def unity_catalog_jars(folder: str | os.PathLike[str]) -> list[str]:
    """Every ``*.jar`` in ``folder`` (sorted); FileNotFoundError naming what is missing."""
    d = Path(folder)
    jars = sorted(str(p) for p in d.glob("*.jar"))
    missing = [p for p in REQUIRED_JAR_PREFIXES if not any(Path(j).name.startswith(p) for j in jars)]
    if missing:
        raise FileNotFoundError(f"{d}: no jar named {', '.join(p + '*' for p in missing)} (delta-spark 4.4+ and "
                                "Unity Catalog's client, hadoop glue and Spark connector are needed)")
    return jars


def unity_catalog_conf(uri: str, *, token: str, catalog: str, jars: list[str], delta_rest_api: bool = True,
                       default_catalog: bool = True) -> dict[str, str]:
    """The Spark settings of a session whose catalog ``catalog`` is the UC server at ``uri`` (the server root:
    the connector appends ``/api/2.1/unity-catalog``). The UC catalog of that name must exist on the server."""
    c = f"spark.sql.catalog.{catalog}"
    conf = {
        "spark.jars": ",".join(jars),
        "spark.driver.extraClassPath": os.pathsep.join(jars),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        c: UC_SINGLE_CATALOG,
        f"{c}.uri": uri.rstrip("/"),
        f"{c}.token": token,
        f"{c}.deltaRestApi.enabled": "true" if delta_rest_api else "false",
    }
    if default_catalog:
        conf["spark.sql.defaultCatalog"] = catalog
    return conf


def spark_session_with_unity_catalog(uri: str, *, token: str, catalog: str, jars: list[str],
                                     delta_rest_api: bool = True, builder: Any = None) -> Any:
    """Create (or get) a SparkSession with :func:`unity_catalog_conf` applied to ``builder``.

    Raises ValueError when a SparkSession already runs in this process: the class path and the catalog are
    fixed when the JVM starts."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        raise ValueError("a SparkSession is already running in this process; the jars and the catalog can only be "
                         "set before it starts")
    if builder is None:
        builder = SparkSession.builder
    for key, value in unity_catalog_conf(uri, token=token, catalog=catalog, jars=jars,
                                         delta_rest_api=delta_rest_api).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


__all__ = ["REQUIRED_JAR_PREFIXES", "UC_SINGLE_CATALOG", "spark_session_with_unity_catalog", "unity_catalog_conf",
           "unity_catalog_jars"]
