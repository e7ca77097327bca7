"""The real `unitycatalog-client` 0.7 (from PyPI, in its own virtualenv .venv-uc made by `make test`) drives
names, a staging table, a managed table and commits; every refusal arrives as ApiException with UC's
status and error_code. Its `get_commits` sends GET without the body (a client bug), so that endpoint is
called here with raw HTTP and a JSON body."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_backend
from tests.security.conftest import store_token
from tests.support import Service, db_commit_files, side_python
from tests.unity.conftest import ok

DRIVER = Path(__file__).with_name("drive_uc_client.py")


def uc_client_python() -> Path:
    return side_python(".venv-uc", "unitycatalog.client", "install-uc-client", "unitycatalog-client")


@pytest.fixture(scope="module")
def client_service(request: pytest.FixtureRequest) -> Iterator[Service]:
    """Tokens on, SQLite + local disk, no background backfill, a backlog cap of 2."""
    b = make_backend(request, "sqlite", "local", "uc-client")
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens", "COMMIT_OWNER_BACKFILL": "false",
                                "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": "2"}).start()
    yield svc
    svc.stop()


def test_unitycatalog_client_drives_names_tables_and_commits(client_service: Service) -> None:
    python = uc_client_python()
    svc = client_service
    token = store_token(svc.backend, "*:admin")
    catalog = f"uc_{uuid.uuid4().hex[:8]}"
    res = subprocess.run([str(python), str(DRIVER), svc.endpoint, token, catalog], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)

    assert out["catalog"] == catalog
    assert out["catalog_again"] == {"status": 409, "error_code": "ALREADY_EXISTS"}
    assert out["schemas"] == [f"{catalog}.s"]
    assert out["schema_missing"] == {"status": 404, "error_code": "NOT_FOUND"}
    table_id = out["staging"]["id"]
    assert out["table"]["created_id"] == out["table"]["table_id"] == out["table"]["property_id"] == table_id
    assert out["table"]["type"] == "MANAGED" and out["table"]["columns"] == ["id"]
    assert out["table"]["created_at"] > 0 and out["table"]["updated_at"] > 0
    assert out["table_missing"] == {"status": 404, "error_code": "TABLE_NOT_FOUND"}

    assert out["commit_1"] == {"status": 200, "error_code": None}
    assert out["commit_1_retry"] == {"status": 200, "error_code": None}
    assert out["commit_1_other_file"] == {"status": 409, "error_code": "COMMIT_VERSION_CONFLICT"}
    assert out["commit_3_gap"] == {"status": 400, "error_code": "INVALID_ARGUMENT"}
    assert out["wrong_uri"] == {"status": 400, "error_code": "INVALID_ARGUMENT"}
    assert out["missing_staged_file"] == {"status": 400, "error_code": "INVALID_ARGUMENT"}
    assert out["wrong_size"] == {"status": 400, "error_code": "INVALID_ARGUMENT"}
    assert out["commit_2"] == {"status": 200, "error_code": None}
    assert out["commit_3_backlog"] == {"status": 429, "error_code": "RESOURCE_EXHAUSTED"}
    assert out["unknown_table"] == {"status": 404, "error_code": "TABLE_NOT_FOUND"}

    # the owner's record: versions 1 and 2, version 1 under the file the client retried
    files = db_commit_files(svc.backend.database_url, table_id)
    assert sorted(files) == [1, 2] and files[1] == out["first_file"]
    assert set(files.values()) <= set(out["staged_files"])

    # getCommits with its JSON body on GET, as real writers send it
    page = ok(svc, "GET", "/delta/preview/commits",
              {"table_id": table_id, "table_uri": out["staging"]["location"], "start_version": 0}, token)
    assert [(c["version"], c["file_name"]) for c in page["commits"]] == sorted(files.items())
    assert page["latest_table_version"] == 2
