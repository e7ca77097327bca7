"""Run SQL statements in one fresh SparkSession (stock delta-spark + UCSingleCatalog), one JSON line each.

A test process can hold one JVM only, and a scenario needs several independent writers and readers, so each
Spark "process" of tests/spark/test_uc_catalog.py is this script. Usage:

    python tests/spark/uc_sql.py '<json plan>'

The plan: ``{"uri", "token", "catalog", "delta_rest_api", "jars", "steps"}``; a step is an SQL string or
``{"wait": "<path>"}``: create ``<path>.ready-<pid>`` and wait (up to 10 minutes) until ``<path>`` exists, so
that the test can line writers up and release them together, or look at the table between two statements.
Output, one line per SQL step: ``{"sql", "ok": true, "rows": [...]}`` or ``{"sql", "ok": false, "error"}``;
the first failure ends the run (exit status 1).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def wait_for(path: Path) -> None:
    Path(f"{path}.ready-{os.getpid()}").touch()
    deadline = time.monotonic() + 600
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"uc_sql: {path} did not appear within 10 minutes")
        time.sleep(0.02)


def main() -> int:
    from pyspark.sql import SparkSession

    from client.spark.unity_catalog import spark_session_with_unity_catalog, unity_catalog_jars

    plan = json.loads(sys.argv[1])
    builder = (SparkSession.builder.master("local[2]").appName(f"uc-sql-{os.getpid()}")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.session.timeZone", "UTC")
               # Test speed only: short-lived JVMs on a busy 2-core machine. Delta rebuilds table state with 50
               # tasks by default; C1-only JIT and the serial collector spend less CPU on start-up.
               .config("spark.databricks.delta.snapshotPartitions", "2")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"))
    spark = spark_session_with_unity_catalog(plan["uri"], token=plan["token"], catalog=plan["catalog"],
                                             jars=unity_catalog_jars(plan["jars"]),
                                             delta_rest_api=plan["delta_rest_api"], builder=builder)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for step in plan["steps"]:
            if isinstance(step, dict):
                wait_for(Path(step["wait"]))
                continue
            started = time.monotonic()
            try:
                df = spark.sql(step)
                rows = [r.asDict(recursive=True) for r in df.collect()]
            except Exception as e:  # noqa: BLE001 - what Spark said is the result
                print(json.dumps({"sql": step, "ok": False, "error": str(e)[:6000]}), flush=True)
                return 1
            print(json.dumps({"sql": step, "ok": True, "rows": rows, "seconds": round(time.monotonic() - started, 2)},
                             default=str), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
