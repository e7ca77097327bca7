"""Where the Spark tests find real delta-spark jars without Maven.

Maven Central is unreachable on the development and CI machines, so real delta-spark 4.4.0 with Unity Catalog's
client and Spark connector (built from source) sits in a folder beside the repository:
``<repository root>/../shared/jars/delta-spark-4.4.0-uc`` (CI clones the repository beside ``shared/``). An
environment variable overrides it; a variable naming a folder that does not exist fails the test (someone asked
for it), a missing default folder skips with the reason.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

SHARED_JARS = ROOT.parent / "shared" / "jars" / "delta-spark-4.4.0-uc"
#: delta-spark + Unity Catalog client + UC Spark connector (tests/spark/test_uc_catalog.py).
UC_JARS_ENV = "COMMIT_OWNER_UC_SPARK_JARS"
#: delta-spark + delta-storage + the AWS SDK v1 DynamoDB classes (scripts/spark-delta-e2e, the py4j bridge).
DELTA_JARS_ENV = "COMMIT_OWNER_DELTA_SPARK_JARS"


def jar_folder(env: str) -> Path | None:
    """``$env`` when set (it must exist), else the shared folder when it exists, else None."""
    given = os.environ.get(env)
    if given:
        path = Path(given).expanduser()
        if not path.is_dir():
            pytest.fail(f"${env}={given} is not a folder of jars")
        return path
    return SHARED_JARS if SHARED_JARS.is_dir() else None


def require_jar_folder(env: str, what: str) -> Path:
    """The jar folder for ``env``, or a loud skip saying where the jars were looked for."""
    folder = jar_folder(env)
    if folder is None:
        reason = (f"SPARK TESTS SKIPPED: no {what} jars: {SHARED_JARS} does not exist and ${env} is not set "
                  "(Maven is not used here)")
        print(f"\n!!! {reason} !!!\n", file=sys.stderr)
        pytest.skip(reason)
    return folder
