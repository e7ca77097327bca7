"""A PySpark (Spark Connect) job runner for the Sail tests. Runs in .venv-sail, not in the service's .venv.

Usage: ``python sail_client.py sc://127.0.0.1:PORT < plan.json``; prints one JSON object on stdout.

The plan is a list of steps, run in order:

* ``{"sql": "..."}``: one statement; its rows come back as lists. A failed statement ends the plan.
* ``{"jobs": [["INSERT ...", ...], ...], "retries": N}``: one thread (and Spark Connect session) per job, all
  started together behind a barrier; each runs its statements in order. A statement that loses a commit
  race (Sail reports "commit conflict" when the catalog answers 409) is run again, up to N times: Sail
  itself does not retry, so a pipeline on Sail does.

Only the standard library and pyspark-client: nothing of the project is importable in that virtualenv.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from pyspark.sql import SparkSession

CONFLICT = "commit conflict"


def _session(remote: str, new: bool = False) -> SparkSession:
    builder = SparkSession.builder.remote(remote)
    return builder.create() if new else builder.getOrCreate()


def _rows(spark: SparkSession, sql: str) -> list[list[Any]]:
    return [[_plain(v) for v in row] for row in spark.sql(sql).collect()]


def _plain(v: Any) -> Any:
    return v if v is None or isinstance(v, (bool, int, float, str)) else str(v)


def _jobs(remote: str, jobs: list[list[str]], retries: int) -> dict[str, Any]:
    barrier = threading.Barrier(len(jobs))
    conflicts = [0] * len(jobs)
    errors: list[str] = []

    def run(i: int, statements: list[str]) -> None:
        try:
            spark = _session(remote, new=True)
            barrier.wait(60)
            for sql in statements:
                for attempt in range(retries + 1):
                    try:
                        spark.sql(sql).collect()
                        break
                    except Exception as e:  # noqa: BLE001 - pyspark raises its own families
                        if CONFLICT not in str(e) or attempt == retries:
                            raise
                        conflicts[i] += 1
        except Exception as e:  # noqa: BLE001
            errors.append(f"job {i}: {type(e).__name__}: {str(e)[:800]}")

    threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"conflicts": conflicts, "errors": errors}


def main() -> None:
    remote = sys.argv[1]
    plan = json.load(sys.stdin)
    spark = _session(remote)
    out: list[Any] = []
    for step in plan:
        if "sql" in step:
            try:
                out.append({"rows": _rows(spark, step["sql"])})
            except Exception as e:  # noqa: BLE001
                out.append({"error": f"{step['sql'][:200]}: {type(e).__name__}: {str(e)[:2000]}"})
                break  # later steps depend on this one
        else:
            out.append(_jobs(remote, step["jobs"], int(step.get("retries", 0))))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
