"""Read your own writes: ``write_table`` returns once its version is published, so a plain delta-rs read right
after it sees the write; ``client.read_table`` reads through the owner and sees commits not yet published.

Real parts only: a real ``commit-owner serve`` (SQLite + local disk), delta-rs as the independent reader.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import client
from client.publish import await_published
from client.snapshot import load_snapshot
from tests.support import Backend, Service

WRITES = 10


def batch(k: int, size: int = 3) -> pa.Table:
    return pa.table({
        "id": pa.array([k * 100 + i for i in range(size)], pa.int64()),
        "name": pa.array([None if i == 0 else f"r{k}-{i}" for i in range(size)], pa.string()),
        "day": pa.array([dt.date(2026, 1, 1 + k % 3)] * size, pa.date32()),
        "part": pa.array([None if k % 4 == 3 else f"p{k % 2}"] * size, pa.string()),
        "n": pa.array([k % 3] * size, pa.int32()),
    })


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def test_a_plain_delta_rs_read_right_after_write_table_sees_every_write(owner_service: Service,
                                                                       tmp_path: Path) -> None:
    """The owner backfills in the background (as under `make run`); the writer still returns only once its
    version is published, so delta-rs, which reads only the published log, never lags."""
    loc = (tmp_path / "t").as_uri()
    owner = owner_service.client()
    written: list[pa.Table] = []
    for k in range(WRITES):
        data = batch(k)
        r = client.write_table(data, loc, partition_by=["part"], client=owner)
        written.append(data)
        assert r.published_version is not None and r.published_version >= r.version, r
        seen = DeltaTable(str(tmp_path / "t"))  # a fresh, plain reader, right after the call
        assert seen.version() == r.version, f"write {k}: delta-rs at {seen.version()}, the write is {r.version}"
        assert seen.to_pyarrow_table().num_rows == sum(t.num_rows for t in written)
    assert r.version == WRITES  # version 0 is the table's creation


def test_the_writer_asks_for_publication_when_the_owner_would_not_publish_yet(owner: client.CommitOwnerClient,
                                                                             tmp_path: Path) -> None:
    """This owner backfills only every 100 commits: without the writer's wait, delta-rs would stay at version 0."""
    where = tmp_path / "idle"
    loc = where.as_uri()
    r1 = client.write_table(batch(1), loc, client=owner, wait_published=False)
    assert r1.published_version is None
    assert DeltaTable(str(where)).version() == 0  # committed, not published: a plain reader is behind
    r2 = client.write_table(batch(2), loc, client=owner)
    assert (r2.version, r2.published_version) == (2, 2)
    assert DeltaTable(str(where)).version() == 2
    assert rows(DeltaTable(str(where)).to_pyarrow_table()) == rows(pa.concat_tables([batch(1), batch(2)]))


def test_read_table_returns_the_rows_of_commits_not_yet_published(owner: client.CommitOwnerClient,
                                                                 tmp_path: Path) -> None:
    where = tmp_path / "unpublished"
    loc = where.as_uri()
    tables = [batch(k) for k in range(4)]
    for t in tables:
        client.write_table(t, loc, partition_by=["part", "n", "day"], client=owner, wait_published=False)
    snap = load_snapshot(loc, client=owner)
    assert snap.version == 4 and snap.unbackfilled_versions == [1, 2, 3, 4]
    assert DeltaTable(str(where)).to_pyarrow_table().num_rows == 0  # the published log has version 0 only

    got = client.read_table(loc, client=owner)
    assert got.schema == pa.schema([
        pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("day", pa.date32()),
        pa.field("part", pa.string()), pa.field("n", pa.int32()),
    ])
    assert rows(got) == rows(pa.concat_tables(tables))  # a null partition value and typed partitions included
    assert rows(client.read_table(loc, 2, client=owner)) == rows(pa.concat_tables(tables[:2]))
    assert client.read_table(loc, columns=["n", "id"], client=owner).column_names == ["n", "id"]
    only_partitions = client.read_table(loc, columns=["part"], client=owner)  # no data column read at all
    assert sorted(only_partitions.column("part").to_pylist(), key=str) == sorted(
        pa.concat_tables(tables).column("part").to_pylist(), key=str)
    assert client.read_table(loc, 0, client=owner).num_rows == 0

    # once published, delta-rs (the independent reader) reads the very same rows
    assert snap.owner is not None and snap.owner.table_id is not None
    owner.backfill_to_version(snap.owner.table_id, 4)
    assert rows(DeltaTable(str(where)).to_pyarrow_table()) == rows(got)


def test_read_table_refuses_an_unknown_column_and_a_table_it_cannot_read(owner: client.CommitOwnerClient,
                                                                        tmp_path: Path) -> None:
    loc = (tmp_path / "cols").as_uri()
    client.write_table(batch(0), loc, client=owner)
    with pytest.raises(ValueError, match="has no column 'nope'"):
        client.read_table(loc, columns=["id", "nope"], client=owner)
    with pytest.raises(client.NotADeltaTableError):
        client.read_table((tmp_path / "missing").as_uri(), client=owner)


def _token_service(request: pytest.FixtureRequest, name: str, env: dict[str, str]) -> tuple[Service, Backend]:
    from tests.conftest import make_backend

    b = make_backend(request, "sqlite", "local", name)
    return Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens", **env}).start(), b


def test_a_writer_without_the_backfill_right_waits_for_the_owners_own_publication(request: pytest.FixtureRequest,
                                                                                 tmp_path: Path) -> None:
    """A commit-only token may not ask for a backfill (403): the writer watches the published version instead,
    here while the owner backfills on a timer only."""
    from tests.security.conftest import store_token

    svc, b = _token_service(request, "ryw-commit-only", {"COMMIT_OWNER_BACKFILL_BATCH_SIZE": "100",
                                                        "COMMIT_OWNER_BACKFILL_INTERVAL_MS": "300"})
    try:
        loc = b.new_location()
        admin = svc.client(token=store_token(b, f"file://{b.tmp}:admin"))
        client.write_table(batch(0), loc, client=admin)  # creates the table (admin's right)
        writer = svc.client(token=store_token(b, f"file://{b.tmp}:commit"))
        with pytest.raises(client.PermissionDeniedError):
            writer.backfill_to_version(snap_table_id(loc, admin), 1)
        for k in (1, 2):
            r = client.write_table(batch(k), loc, client=writer)
            assert r.published_version is not None and r.published_version >= r.version == k + 1
            assert DeltaTable(loc[len("file://"):]).version() == r.version
    finally:
        svc.stop()


def test_a_write_not_published_in_time_is_a_warning_not_an_error(request: pytest.FixtureRequest,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """No right to ask for a backfill and an owner that does not publish on its own (--no-backfill, e.g. its
    backfill-worker is down): the commit landed, so nothing is raised; the writer is warned and told how far the
    table is published, and read_table still reads the write."""
    from tests.security.conftest import store_token

    svc, b = _token_service(request, "ryw-late", {"COMMIT_OWNER_BACKFILL": "false"})
    try:
        loc = b.new_location()
        admin = svc.client(token=store_token(b, f"file://{b.tmp}:admin"))
        client.write_table(batch(0), loc, client=admin)
        writer = svc.client(token=store_token(b, f"file://{b.tmp}:commit"))
        r = client.write_table(batch(1), loc, client=writer, wait_published=False)
        with caplog.at_level(logging.WARNING, logger="client.publish"):
            published = await_published(writer, snap_table_id(loc, admin), r.version, location=loc, timeout=1.0)
        assert published == 1 < r.version == 2
        warned = [m.getMessage() for m in caplog.records if m.name == "client.publish"]
        assert len(warned) == 1 and f"version {r.version} is committed but not yet published" in warned[0]
        assert "client.read_table" in warned[0] and "not published within 1 s" in warned[0]
        assert DeltaTable(loc[len("file://"):]).version() == 1
        assert rows(client.read_table(loc, client=writer)) == rows(pa.concat_tables([batch(0), batch(1)]))
    finally:
        svc.stop()


def snap_table_id(loc: str, owner: client.CommitOwnerClient) -> str:
    ref = load_snapshot(loc, client=owner).owner
    assert ref is not None and ref.table_id is not None
    return ref.table_id


def test_read_table_reads_a_column_added_after_a_file_was_written_as_nulls(owner: client.CommitOwnerClient,
                                                                          tmp_path: Path) -> None:
    """A metaData commit through the owner adds a column (as a schema-evolving engine would): the older file
    has no such column, and read_table gives it nulls, as delta-rs does once the commit is published."""
    import json

    from client.actions import next_in_commit_timestamp

    where = tmp_path / "evolved"
    loc = where.as_uri()
    client.write_table(batch(0), loc, client=owner, wait_published=False)
    snap = load_snapshot(loc, client=owner)
    schema = snap.schema
    schema["fields"].append({"name": "extra", "type": "string", "nullable": True, "metadata": {}})
    ict = next_in_commit_timestamp(snap.in_commit_timestamp)
    table_id = snap_table_id(loc, owner)
    owner.commit(table_id, snap.version + 1, [
        {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "SET TBLPROPERTIES"}},
        {"metaData": {**snap.metadata, "schemaString": json.dumps(schema)}},
    ])
    got = client.read_table(loc, client=owner)
    assert got.column_names == ["id", "name", "day", "part", "n", "extra"]
    assert got.column("extra").null_count == got.num_rows == 3
    owner.backfill_to_version(table_id, snap.version + 1)
    assert rows(DeltaTable(str(where)).to_pyarrow_table()) == rows(got)
