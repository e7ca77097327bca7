"""The snapshot reader over filesystem tables written by delta-rs (no owner involved)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from client.contract.errors import IncompleteLogError, NotADeltaTableError, VersionNotFoundError
from client.snapshot import latest_version, list_log, load_snapshot
from client.storage import LogStorage


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "part": [f"p{i % 2}" for i in range(start, start + n)]})


def _delta_rs_files(path: str, version: int) -> list[str]:
    dt = DeltaTable(path, version=version)
    return sorted(a["path"] for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist())


@pytest.fixture
def rs_table(tmp_path) -> str:
    """Six versions by delta-rs: create, append, overwrite, checkpoint at 2, append, delete, append."""
    path = str(tmp_path / "t")
    write_deltalake(path, _rows(4), partition_by=["part"])
    write_deltalake(path, _rows(2, 10), mode="append")
    write_deltalake(path, _rows(3, 20), mode="overwrite")
    DeltaTable(path).create_checkpoint()
    write_deltalake(path, _rows(2, 30), mode="append")
    DeltaTable(path).delete("id = 31")
    write_deltalake(path, _rows(1, 40), mode="append", configuration=None)
    return path


def test_snapshot_matches_delta_rs_at_every_version(rs_table: str) -> None:
    latest = DeltaTable(rs_table).version()
    assert latest_version(rs_table) == latest
    for v in range(latest + 1):
        snap = load_snapshot(rs_table, v)
        assert snap.version == v
        assert snap.file_paths == _delta_rs_files(rs_table, v)
        assert snap.partition_columns == ["part"]
        assert [f["name"] for f in snap.schema["fields"]] == ["id", "part"]
        assert snap.protocol["minWriterVersion"] == DeltaTable(rs_table).protocol().min_writer_version


def test_checkpoint_is_used_and_partition_values_are_maps(rs_table: str) -> None:
    listing = list_log(LogStorage(rs_table))
    assert 2 in listing.checkpoints and listing.last_checkpoint["version"] == 2
    # Remove the commits the checkpoint covers: the snapshot must come from the checkpoint alone.
    for v in (0, 1):
        os.remove(os.path.join(rs_table, "_delta_log", f"{v:020d}.json"))
    snap = load_snapshot(rs_table)
    assert snap.file_paths == _delta_rs_files(rs_table, snap.version)
    assert all(isinstance(f["partitionValues"], dict) for f in snap.files)
    with pytest.raises(IncompleteLogError):
        load_snapshot(rs_table, 1)


def test_not_a_delta_table_is_refused(tmp_path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "data.parquet").write_bytes(b"not delta")
    with pytest.raises(NotADeltaTableError):
        load_snapshot(str(tmp_path / "x"))
    with pytest.raises(NotADeltaTableError):
        latest_version(str(tmp_path / "missing"))


def test_version_beyond_latest_is_refused(rs_table: str) -> None:
    with pytest.raises(VersionNotFoundError):
        load_snapshot(rs_table, 99)


def test_multi_part_checkpoint_name_is_read(rs_table: str) -> None:
    """A checkpoint in the multi-part naming is found and read (the JSON it covers is gone)."""
    log = os.path.join(rs_table, "_delta_log")
    os.rename(os.path.join(log, "00000000000000000002.checkpoint.parquet"),
              os.path.join(log, "00000000000000000002.checkpoint.0000000001.0000000001.parquet"))
    for v in (0, 1, 2):
        os.remove(os.path.join(log, f"{v:020d}.json"))
    snap = load_snapshot(rs_table)
    assert snap.file_paths == _delta_rs_files(rs_table, snap.version)
