"""The real Daft 0.7 (from PyPI, in its own virtualenv .venv-daft made by `make test`: it wants pyarrow < 26) reads
the owner's tables by name and creates a MANAGED table the way its ``load_table(..., table_type="MANAGED")`` does:
``POST /tables`` without ``storage_location`` and without columns. The owner allocates the location under its
managed root, as Unity Catalog does, and the table's columns come from the log Daft then writes (decision 40)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import side_python
from tests.unity.sail import Owner, demo_owner

DRIVER = Path(__file__).with_name("drive_daft.py")


def daft_python() -> Path:
    return side_python(".venv-daft", "daft.catalog.__unity", "install-daft", "Daft")


@pytest.fixture(scope="module")
def owner(request: pytest.FixtureRequest) -> Iterator[Owner]:
    yield from demo_owner(request, "sqlite", "daft")


def test_daft_reads_owned_tables_by_name_and_creates_a_managed_table_without_a_location(owner: Owner) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from client.write import write_table

    python = daft_python()
    # owned through /api/v1 (the RFC's managed commits), named by its creator
    write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "word": ["a", "b"]}), owner.backend.new_location("own"),
                client=owner.service.client(token=owner.token), full_name="main.demo.owned")
    # EXTERNAL, registered without columns
    ext = owner.backend.new_location("ext")
    write_deltalake(ext[len("file://"):], pa.table({"n": pa.array([7], pa.int32())}))
    owner.uc("POST", "/tables", {"name": "ext", "catalog_name": "main", "schema_name": "demo",
                                 "table_type": "EXTERNAL", "data_source_format": "DELTA", "storage_location": ext})

    res = subprocess.run([str(python), str(DRIVER), owner.service.endpoint, owner.token, "main.demo.owned",
                          "main.demo.ext", "--create", "main.demo.made"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)

    assert out["read"]["main.demo.owned"] == {"type": "EXTERNAL", "rows": [{"id": 1, "word": "a"},
                                                                           {"id": 2, "word": "b"}]}
    assert out["read"]["main.demo.ext"] == {"type": "EXTERNAL", "rows": [{"n": 7}]}

    made = owner.table("demo", "made")
    managed_root = owner.backend.managed_location()
    assert out["created"]["type"] == made["table_type"] == "MANAGED"
    assert out["created"]["location"] == made["storage_location"] == f"{managed_root}/{made['table_id']}"
    assert out["created"]["columns"] == []  # Daft sent none and the location had no log yet
    assert out["created"]["rows"] == [{"id": 1, "word": "a"}, {"id": 2, "word": "b"}]
    # now the log Daft wrote gives the record its columns
    assert [(c["name"], c["type_text"], c["type_name"]) for c in made["columns"]] == [
        ("id", "bigint", "LONG"), ("word", "string", "STRING")]
