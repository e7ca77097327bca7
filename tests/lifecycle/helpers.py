"""Test helpers: commit data through the owner the way an engine would, and read tables with delta-rs."""

from __future__ import annotations

import io
import json
import os
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from client import CommitOwnerClient
from client.contract.delta_log import commit_info, now_ms
from client.snapshot import load_snapshot
from client.storage import DataFiles


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "name", "type": "string", "nullable": True, "metadata": {}},
]}


def append_through_owner(client: CommitOwnerClient, location: str, ids: list[int], *,
                         version: int | None = None, storage_options: dict[str, Any] | None = None) -> int:
    """Write one Parquet file into the table folder (a path or any location's URI, through the client's storage) and commit
    its ``add`` through the owner; returns the version."""
    snap = load_snapshot(location, client=client, storage_options=storage_options)
    assert snap.owner is not None and snap.owner.table_id
    v = snap.version + 1 if version is None else version
    name = f"part-{uuid.uuid4()}.parquet"
    buf = io.BytesIO()
    pq.write_table(rows(ids), buf)
    DataFiles(snap.location, storage_options).put(name, buf.getvalue())
    ict = max(now_ms(), (snap.in_commit_timestamp or 0) + 1)
    actions: list[dict[str, Any]] = [
        commit_info("WRITE", in_commit_timestamp=ict, read_version=snap.version, parameters={"mode": "Append"}),
        {"add": {"path": name, "partitionValues": {}, "size": len(buf.getvalue()),
                 "modificationTime": ict, "dataChange": True, "stats": json.dumps({"numRecords": len(ids)})}},
    ]
    return client.commit(snap.owner.table_id, v, actions).version


def delta_rs_options(options: dict[str, Any]) -> dict[str, str]:
    """delta-rs's storage options for the moto server that the client's (fsspec) ``options`` name."""
    kw = options["client_kwargs"]
    return {"AWS_ENDPOINT_URL": kw["endpoint_url"], "AWS_REGION": kw["region_name"], "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def tree(path: str) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes: to assert that storage did not change."""
    out: dict[str, bytes] = {}
    for root, _dirs, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            if not os.path.isfile(full):  # a service's backfill socket (decision 66) is not storage
                continue
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = fh.read()
    return out
