"""The ownership round trip on S3 (moto server): delta-rs, the client and the owner all on one bucket."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from client.delta_log import commit_info, now_ms
from client.lifecycle import release_ownership, take_ownership
from client.snapshot import load_snapshot
from client.storage import LogStorage

from .helpers import rows

pytestmark = pytest.mark.s3


def _rs_options(options: dict[str, Any]) -> dict[str, str]:
    kw = options["client_kwargs"]
    return {"AWS_ENDPOINT_URL": kw["endpoint_url"], "AWS_REGION": kw["region_name"], "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def _ids(location: str, rs: dict[str, str], version: int | None = None) -> list[int]:
    dt = DeltaTable(location, storage_options=rs, version=version)
    return sorted(pa.table(dt.to_pyarrow_table()).column("id").to_pylist())


def test_s3_table_taken_over_written_and_handed_back(owner, lifecycle_s3) -> None:
    bucket, options = lifecycle_s3
    rs = _rs_options(options)
    location = f"s3://{bucket}/sales"
    write_deltalake(location, rows([1, 2]), storage_options=rs)
    write_deltalake(location, rows([3]), mode="append", storage_options=rs)

    owned = take_ownership(location, client=owner, storage_options=options)
    assert owned.version == 2

    # An engine's write: a data file on S3, then its add committed through the owner.
    import pyarrow.parquet as pq
    storage = LogStorage(location, options)
    name = f"part-{uuid.uuid4()}.parquet"
    with storage.fs.open(f"{bucket}/sales/{name}", "wb") as f:
        pq.write_table(rows([4, 5]), f)
    size = storage.fs.size(f"{bucket}/sales/{name}")
    snap = load_snapshot(location, client=owner, storage_options=options)
    ict = max(now_ms(), snap.in_commit_timestamp + 1)
    owner.commit(owned.table_id, 3, [
        commit_info("WRITE", in_commit_timestamp=ict, read_version=2),
        {"add": {"path": name, "partitionValues": {}, "size": size, "modificationTime": ict, "dataChange": True,
                 "stats": json.dumps({"numRecords": 2})}},
    ])
    snap = load_snapshot(location, client=owner, storage_options=options)
    assert snap.version == 3 and snap.unbackfilled_versions == [3]
    assert DeltaTable(location, storage_options=rs).version() == 2  # stale, not broken

    assert release_ownership(owned, client=owner) == 4
    assert storage.exists(f"{3:020d}.json") and storage.exists(f"{4:020d}.json")
    assert _ids(location, rs, 3) == [1, 2, 3, 4, 5]
    write_deltalake(location, rows([6]), mode="append", storage_options=rs)
    assert _ids(location, rs) == [1, 2, 3, 4, 5, 6]
    assert load_snapshot(location, client=owner, storage_options=options).version == 5
