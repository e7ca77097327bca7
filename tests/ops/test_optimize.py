"""Compaction (`commit-owner optimize`, coordinator/ops/optimize.py) of tables grown by small appends through
``client.write_table``: a real service on SQLite and on PostgreSQL (local disk), the compaction committing through
the owner's commit path in this process, delta-rs and the project's snapshot reader as judges; racing writers
are real commits through the running service."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from client import write_table
from client.contract.delta_log import commit_info, now_ms
from client.contract.errors import InvalidArgumentError, TableChangedError, TableNotFoundError
from client.contract.layout import delta_file_name
from client.read import read_table
from client.snapshot import load_snapshot
from coordinator.ops.compaction import conflict, plan
from coordinator.ops.optimize import run_optimize
from coordinator.runtime.settings import Settings
from coordinator.store import OwnershipStore, open_engine
from tests.conftest import make_backend
from tests.support import ROOT, Service, delta_rs_table

MiB = 1024 * 1024


def _settings(svc: Service) -> Settings:
    return Settings.load(environ=svc.backend.env())


def _grown(svc: Service, n: int = 12, *, partitioned: bool = True) -> tuple[str, Any]:
    """A table grown by ``n`` single-row appends through ``client.write_table`` (two partitions; unpartitioned,
    every file has the same size)."""
    client = svc.client()
    path = str(svc.backend.tmp / f"o-{uuid.uuid4().hex[:10]}")
    for i in range(n):
        name = (f"n{i}" if i % 3 else None) if partitioned else f"n{i:02d}"
        data = pa.table({"id": pa.array([i], pa.int64()), "name": pa.array([name], pa.string()),
                         "ts": pa.array([datetime.datetime(2026, 11, 29, i, tzinfo=datetime.timezone.utc)],
                                        pa.timestamp("us", tz="UTC")),
                         "p": ["a" if i % 2 else "b"]})
        write_table(data, path, client=client, partition_by=["p"] if partitioned else None)
    return path, client


def _rows(table: Any) -> list[tuple[Any, ...]]:
    d = table.to_pydict()
    return sorted(zip(*(d[c] for c in ("id", "name", "p")), strict=True), key=lambda r: r[0])


def _rows_rs(path: str) -> list[tuple[Any, ...]]:
    return _rows(DeltaTable(path).to_pyarrow_table())


def _data_files(path: str) -> set[str]:
    """Every file of the table outside ``_delta_log`` (what storage holds)."""
    out = set()
    for root, _dirs, names in os.walk(path):
        if "_delta_log" in root:
            continue
        out.update(os.path.relpath(os.path.join(root, n), path) for n in names)
    return out


def _log_actions(path: str, version: int) -> list[dict[str, Any]]:
    with open(os.path.join(path, "_delta_log", delta_file_name(version))) as f:
        return [json.loads(line) for line in f if line.strip()]


async def _db_state(svc: Service, path: str) -> tuple[Any, ...]:
    """The table's row and commit count as the database holds them."""
    async with open_engine(svc.backend.database_url, pool_size=1, timeout=10) as engine:
        store = OwnershipStore(engine)
        t = await store.find_table("file://" + path)
        return t.status, t.latest_version, t.latest_backfilled_version, len(await store.recent_commits(t.table_id, 1000))


async def test_compaction_rewrites_small_files_one_commit_same_rows(svc: Service) -> None:
    path, client = _grown(svc, 12)
    before = load_snapshot(path, client=client)
    assert before.version == 12 and len(before.files) == 12
    rows = _rows_rs(path)
    assert len(rows) == 12

    rep = await run_optimize(_settings(svc), path, target_size=MiB)

    assert rep["version"] == 13 and rep["readVersion"] == 12 and rep["rebases"] == 0
    assert rep["filesBefore"] == 12 and rep["filesRemoved"] == 12 and rep["filesAdded"] == 2 and rep["filesAfter"] == 2
    assert rep["partitions"] == 2 and rep["publishedVersion"] == 13
    after = load_snapshot(path, client=client)
    assert after.version == 13 and len(after.files) == 2
    assert _rows_rs(path) == rows  # delta-rs reads the published log
    assert _rows(read_table(path, client=client)) == rows  # the project's reader
    dt = DeltaTable(path)
    assert dt.version() == 13 and len(dt.file_uris()) == 2

    actions = _log_actions(path, 13)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["readVersion"] == 12 and info["isBlindAppend"] is False
    assert info["operationParameters"] == {"predicate": "[]", "zOrderBy": "[]", "clusterBy": "[]", "auto": False}
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    old = {f["path"]: f for f in before.files}
    assert {r["path"] for r in removes} == set(old) and len(adds) == 2
    for r in removes:
        assert r["dataChange"] is False and r["size"] == old[r["path"]]["size"]
        assert r["partitionValues"] == old[r["path"]]["partitionValues"]
    m = info["operationMetrics"]
    assert m["numRemovedFiles"] == "12" and m["numAddedFiles"] == "2"
    assert int(m["numRemovedBytes"]) == sum(f["size"] for f in before.files)
    assert int(m["numAddedBytes"]) == sum(a["size"] for a in adds)
    assert int(m["minFileSize"]) == min(a["size"] for a in adds) and int(m["maxFileSize"]) == max(a["size"] for a in adds)
    for a in adds:
        assert a["dataChange"] is False
        assert a["size"] == os.path.getsize(os.path.join(path, a["path"]))
        stats = json.loads(a["stats"])
        ids = sorted(r[0] for r in rows if r[2] == a["partitionValues"]["p"])
        names = [r[1] for r in rows if r[2] == a["partitionValues"]["p"]]
        assert stats["numRecords"] == 6
        assert stats["minValues"]["id"] == ids[0] and stats["maxValues"]["id"] == ids[-1]
        assert stats["nullCount"] == {"id": 0, "name": names.count(None), "ts": 0}
        assert stats["minValues"]["ts"] == f"2026-11-29T{ids[0]:02d}:00:00.000Z"
        assert stats["maxValues"]["ts"] == f"2026-11-29T{ids[-1]:02d}:00:00.000Z"
        assert a["path"].split("/")[1] == f"p={a['partitionValues']['p']}"

    # Nothing left to compact: a second pass commits nothing.
    again = await run_optimize(_settings(svc), path, target_size=MiB)
    assert again["version"] is None and again["filesRemoved"] == 0 and load_snapshot(path, client=client).version == 13
    # The running owner takes the next writer's commit on top of the compaction it did not ratify itself.
    late = write_table(pa.table({"id": pa.array([12], pa.int64()), "name": pa.array(["late"], pa.string()),
                                 "ts": pa.array([None], pa.timestamp("us", tz="UTC")), "p": ["a"]}), path,
                       client=client)
    assert late.version == 14 and late.rebases <= 1
    assert _rows_rs(path) == sorted([*rows, (12, "late", "a")], key=lambda r: r[0])


async def test_dry_run_and_target_size_pack_bins(svc: Service) -> None:
    path, client = _grown(svc, 8, partitioned=False)
    sizes = sorted(f["size"] for f in load_snapshot(path, client=client).files)
    assert len(set(sizes)) == 1
    files = _data_files(path)
    dry = await run_optimize(_settings(svc), path, target_size=MiB, dry_run=True)
    assert dry["dryRun"] and dry["version"] is None and dry["filesRemoved"] == 8 and dry["filesAfter"] == 1
    assert _data_files(path) == files and load_snapshot(path, client=client).version == 8
    # a target of about three files' bytes packs them three by three (8 = 3 + 3 + 2)
    rep = await run_optimize(_settings(svc), path, target_size=sum(sizes[:3]))
    assert rep["version"] == 9 and rep["filesAdded"] == 3 and rep["filesAfter"] == 3
    assert len(_rows_rs(path)) == 8


async def test_append_racing_the_compaction_lands_and_the_compaction_rebases(svc: Service) -> None:
    path, client = _grown(svc, 6)
    rows = _rows_rs(path)
    raced: list[int] = []

    def append(version: int) -> None:
        if not raced:  # the first proposal's version is taken by a writer through the running owner
            r = write_table(pa.table({"id": pa.array([100], pa.int64()), "name": ["late"],
                                      "ts": pa.array([None], pa.timestamp("us", tz="UTC")), "p": ["a"]}), path,
                            client=client)
            raced.append(r.version)
            assert r.version == version

    rep = await run_optimize(_settings(svc), path, target_size=MiB, before_commit=append)
    assert raced == [7] and rep["version"] == 8 and rep["rebases"] == 1 and rep["readVersion"] == 6
    snap = load_snapshot(path, client=client)
    assert snap.version == 8 and len(snap.files) == 3  # two compacted files and the racing append's
    assert _rows_rs(path) == sorted([*rows, (100, "late", "a")], key=lambda r: r[0])
    info = _log_actions(path, 8)[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["readVersion"] == 7  # moved onto the append
    assert {a["remove"]["path"] for a in _log_actions(path, 8) if "remove" in a}.isdisjoint(
        a["add"]["path"] for a in _log_actions(path, 7) if "add" in a)


async def test_delete_racing_the_compaction_makes_it_give_up(svc: Service) -> None:
    path, client = _grown(svc, 6)
    snap = load_snapshot(path, client=client)
    assert snap.owner is not None
    table_id = snap.owner.table_id
    victim = snap.files[0]

    def delete(version: int) -> None:  # a DELETE of one file the compaction rewrites lands first
        ict = max(now_ms(), (snap.in_commit_timestamp or 0) + 1)
        acts = [commit_info("DELETE", in_commit_timestamp=ict, read_version=snap.version, parameters={}),
                {"remove": {"path": victim["path"], "deletionTimestamp": ict, "dataChange": True,
                            "size": victim["size"], "partitionValues": victim["partitionValues"]}}]
        assert client.commit(table_id, version, acts).version == version
        client.backfill_to_version(table_id, version)

    files_before = _data_files(path)
    prom = svc.backend.tmp / f"optimize-{uuid.uuid4().hex[:6]}.prom"
    with pytest.raises(TableChangedError, match="gave up: version 7 removed"):
        await run_optimize(_settings(svc), path, target_size=MiB, before_commit=delete, metrics_file=str(prom))
    assert "commit_owner_compaction_gave_up_total 1.0" in prom.read_text()
    after = load_snapshot(path, client=client)
    assert after.version == 7 and len(after.files) == 5  # the DELETE, nothing of the compaction
    assert _data_files(path) == files_before  # its new files (and their folder) are gone again
    assert await _db_state(svc, path) == ("ACTIVE", 7, 7, 7)
    assert len(_rows_rs(path)) == 5


async def test_bad_input_changes_nothing(svc: Service) -> None:
    path, client = _grown(svc, 4)
    files, db = _data_files(path), await _db_state(svc, path)
    for bad in (0, -1):
        with pytest.raises(InvalidArgumentError, match="target file size must be a number of bytes above 0"):
            await run_optimize(_settings(svc), path, target_size=bad)
    with pytest.raises(InvalidArgumentError, match="minimum number of small files"):
        await run_optimize(_settings(svc), path, min_files=1)
    with pytest.raises((TableNotFoundError, InvalidArgumentError)):
        await run_optimize(_settings(svc), str(svc.backend.tmp / "nobody-owns-this"))
    assert _data_files(path) == files and await _db_state(svc, path) == db

    # a dropped table: the owner takes no commits for it any more
    snap = load_snapshot(path, client=client)
    assert snap.owner is not None
    async with open_engine(svc.backend.database_url, pool_size=1, timeout=10) as engine:
        assert await OwnershipStore(engine).drop_table(str(snap.owner.table_id), None, "test")
    db = await _db_state(svc, path)
    assert db[0] == "DROPPED"
    with pytest.raises(InvalidArgumentError, match="is DROPPED"):
        await run_optimize(_settings(svc), path, target_size=MiB)
    assert _data_files(path) == files and await _db_state(svc, path) == db


async def test_a_table_handed_back_is_not_compacted(svc: Service) -> None:
    from client.lifecycle import release_ownership

    if "sqlite" not in svc.backend.database_url:
        pytest.skip("one database is enough")
    path, client = _grown(svc, 3)
    release_ownership(path, client=client)
    files, db, version = _data_files(path), await _db_state(svc, path), DeltaTable(path).version()
    assert db[0] == "RELEASED"
    with pytest.raises(InvalidArgumentError, match="is RELEASED"):
        await run_optimize(_settings(svc), path, target_size=MiB)
    assert _data_files(path) == files and await _db_state(svc, path) == db and DeltaTable(path).version() == version


def test_cli_optimize(svc: Service) -> None:
    if "sqlite" not in svc.backend.database_url:
        pytest.skip("the command line once is enough")
    path, client = _grown(svc, 4)
    env = {**os.environ, **svc.backend.env()}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "coordinator", "optimize", *args], cwd=str(ROOT), env=env,
                              capture_output=True, text=True, timeout=120)

    r = cli(path, "--target-size", "0")
    assert r.returncode == 1 and "target file size must be a number of bytes above 0, got 0" in r.stderr
    r = cli(path, "--dry-run")
    assert r.returncode == 0 and "would rewrite 4 file(s)" in r.stdout and "files 4 -> 2" in r.stdout, r.stderr
    assert load_snapshot(path, client=client).version == 4
    prom = svc.backend.tmp / f"optimize-{uuid.uuid4().hex[:6]}.prom"
    r = cli(path, "--metrics-file", str(prom))
    assert r.returncode == 0 and "rewrote 4 file(s)" in r.stdout and "committed as version 5" in r.stdout, r.stderr
    figures = dict(line.rsplit(" ", 1) for line in prom.read_text().splitlines() if not line.startswith("#"))
    snap = load_snapshot(path, client=client)
    assert float(figures["commit_owner_compaction_removed_files_total"]) == 4
    assert float(figures["commit_owner_compaction_added_files_total"]) == len(snap.files) == 2
    assert float(figures["commit_owner_compaction_added_bytes_total"]) == sum(f["size"] for f in snap.files)
    assert float(figures["commit_owner_compaction_gave_up_total"]) == 0
    r = cli(path, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["version"] is None
    assert asyncio.run(_db_state(svc, path))[1] == 5


@pytest.mark.s3
async def test_compaction_on_s3(request: pytest.FixtureRequest) -> None:
    """The same compaction on S3 (moto): the owner's storage reads and writes the data files."""
    backend = make_backend(request, "sqlite", "s3", "optimize-s3")
    s = Service(backend).start()
    try:
        client, options = s.client(), backend.storage_options()
        location = backend.new_location()
        for i in range(6):
            write_table(pa.table({"id": pa.array([i], pa.int64()), "p": ["a" if i % 2 else "b"]}), location,
                        client=client, partition_by=["p"], storage_options=options)
        before = sorted(delta_rs_table(backend, location).to_pyarrow_table().column("id").to_pylist())
        rep = await run_optimize(Settings.load(environ=backend.env()), location, target_size=MiB)
        assert rep["version"] == 7 and rep["filesRemoved"] == 6 and rep["filesAdded"] == 2
        snap = load_snapshot(location, client=client, storage_options=options)
        assert snap.version == 7 and len(snap.files) == 2
        dt = delta_rs_table(backend, location)
        assert dt.version() == 7 and sorted(dt.to_pyarrow_table().column("id").to_pylist()) == before == list(range(6))
        assert sorted(read_table(location, client=client, storage_options=options).column("id").to_pylist()) == before
    finally:
        s.stop()


def _add(path: str, size: int, p: str | None = "a", **extra: Any) -> dict[str, Any]:
    return {"path": path, "size": size, "partitionValues": {"p": p}, "dataChange": True, **extra}


def test_the_plan_packs_small_files_per_partition_and_leaves_the_rest() -> None:
    def dv(cardinality: int) -> dict[str, Any]:
        return {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1, "sizeInBytes": 36,
                "cardinality": cardinality}

    def stats(n: int) -> str:
        return json.dumps({"numRecords": n})

    adds = [_add("a1", 10), _add("a2", 20), _add("a3", 30), _add("a4", 95),  # a: 10+20+30 then 95 alone
            _add("big", 100), _add("b1", 5, "b"), _add("n1", 5, None), _add("n2", 6, None),
            _add("d1", 5, "d", deletionVector=dv(1)),  # alone in its partition, but its DV is purged
            _add("e1", 500, "e", deletionVector=dv(5), stats=stats(100)),  # big, 5 % deleted: purged
            _add("f1", 500, "f", deletionVector=dv(4), stats=stats(100))]  # big, 4 % deleted: left alone
    p = plan(adds, target=100, min_files=2)
    assert sorted([f["path"] for f in b.files] for b in p.bins) == [["a1", "a2", "a3"], ["d1"], ["e1"], ["n1", "n2"]]
    assert p.deletion_vectors == 2 and p.considered == 11
    three = plan(adds, target=100, min_files=3)
    assert sorted([f["path"] for f in b.files] for b in three.bins) == [["a1", "a2", "a3"], ["d1"], ["e1"]]
    assert three.bins[0].partition_values == {"p": "a"}


def test_the_conflict_rule_is_deltas() -> None:
    loc = "file:///t"
    mine = [_add("batch-1/p=a/x.parquet", 1), _add("batch-2/p=a/y%20z.parquet", 1)]
    append = [{"commitInfo": {}}, {"add": _add("batch-3/p=a/new.parquet", 1)}]
    other_remove = [{"remove": {"path": "batch-9/p=b/other.parquet"}}]
    assert conflict(loc, [(5, append), (6, other_remove)], mine) is None
    why = conflict(loc, [(5, append), (6, [{"remove": {"path": "file:///t/batch-2/p=a/y%20z.parquet"}}])], mine)
    assert why is not None and why.startswith("version 6 removed")
    assert conflict(loc, [(5, [{"metaData": {}}])], mine) == "version 5 changed the table's metadata"
    assert conflict(loc, [(5, [{"protocol": {}}])], mine) == "version 5 changed the table's protocol"


async def test_compaction_of_a_catalog_managed_table(svc: Service) -> None:
    """A table of the catalogManaged generation (Unity Catalog's MANAGED kind): the same compaction, staged in
    its ``_staged_commits`` folder, read back by the project's reader."""
    if "sqlite" not in svc.backend.database_url:
        pytest.skip("one database is enough for the table kind")
    client = svc.client()
    path = str(svc.backend.tmp / f"cm-{uuid.uuid4().hex[:10]}")
    for i in range(5):
        write_table(pa.table({"id": pa.array([i], pa.int64())}), path, client=client, protocol="catalogManaged")
    rep = await run_optimize(_settings(svc), path, target_size=MiB)
    assert rep["version"] == 6 and rep["filesRemoved"] == 5 and rep["filesAdded"] == 1
    snap = load_snapshot(path, client=client)
    assert snap.version == 6 and len(snap.files) == 1 and "catalogManaged" in snap.protocol.get("writerFeatures", [])
    assert sorted(read_table(path, client=client).column("id").to_pylist()) == list(range(5))
    assert _log_actions(path, 6)[0]["commitInfo"]["operation"] == "OPTIMIZE"


def _roaring32(values: list[int], *, runs: bool) -> bytes:
    """A portable 32-bit Roaring bitmap as the RoaringFormatSpec lays it out (array and bitmap containers, or one
    run container per key with ``runs``), written here from the spec for the reader's test."""
    import struct

    keys: dict[int, list[int]] = {}
    for v in sorted(set(values)):
        keys.setdefault(v >> 16, []).append(v & 0xFFFF)
    header, bodies = b"", []
    for k, lows in keys.items():
        header += struct.pack("<HH", k, len(lows) - 1)
        if runs:
            assert lows == list(range(lows[0], lows[-1] + 1))
            bodies.append(struct.pack("<HHH", 1, lows[0], len(lows) - 1))
        elif len(lows) <= 4096:
            bodies.append(struct.pack(f"<{len(lows)}H", *lows))
        else:
            words = [0] * 1024
            for low in lows:
                words[low // 64] |= 1 << (low % 64)
            bodies.append(struct.pack("<1024Q", *words))
    n = len(keys)
    if runs:
        out = struct.pack("<I", 12347 | ((n - 1) << 16)) + bytes([0xFF] * ((n + 7) // 8)) + header
    else:
        out = struct.pack("<II", 12346, n) + header
    if not runs or n >= 4:
        offset = len(out) + 4 * n
        for body in bodies:
            out += struct.pack("<I", offset)
            offset += len(body)
    return out + b"".join(bodies)


def test_a_deletion_vector_reads_as_its_row_indexes(tmp_path: Any) -> None:
    import struct
    import zlib

    from coordinator.ops.deletion_vectors import DeletionVectorError, deleted_rows, read_deletion_vector
    from coordinator.storage.local import LocalStorage

    sparse = [0, 7, 65_535, 65_536, 70_000]  # array containers under keys 0 and 1
    dense = list(range(100_000, 106_000))  # 6,000 values under key 1: a bitmap container
    high = [(1 << 32) + 3, (1 << 32) + 4]  # a second 32-bit bitmap (key 1 of the array)
    data = (struct.pack("<Iq", 1681511377, 2) + struct.pack("<I", 0) + _roaring32(sparse + dense, runs=False)
            + struct.pack("<I", 1) + _roaring32([3, 4], runs=False))
    assert deleted_rows(data) == sorted(sparse + dense + high)
    runs = struct.pack("<Iq", 1681511377, 1) + struct.pack("<I", 0) + _roaring32(list(range(10, 20)), runs=True)
    assert deleted_rows(runs) == list(range(10, 20))
    with pytest.raises(DeletionVectorError, match="magic"):
        deleted_rows(b"\0" * 16)

    # stored in a file at an offset: length (big-endian), the bitmap, its CRC-32
    small = struct.pack("<Iq", 1681511377, 1) + struct.pack("<I", 0) + _roaring32([1, 5], runs=False)
    blob = b"\x01" + struct.pack(">I", len(small)) + small + struct.pack(">I", zlib.crc32(small))
    (tmp_path / "deletion_vector_00000000-0000-0000-0000-000000000000.bin").write_bytes(blob)
    dv = {"storageType": "p", "pathOrInlineDv": f"file://{tmp_path}/deletion_vector_00000000-0000-0000-0000-000000000000.bin",
          "offset": 1, "sizeInBytes": len(small), "cardinality": 2}
    storage = LocalStorage()
    assert asyncio.run(read_deletion_vector(storage, f"file://{tmp_path}", dv)) == [1, 5]
    with pytest.raises(DeletionVectorError, match="cardinality"):
        asyncio.run(read_deletion_vector(storage, f"file://{tmp_path}", {**dv, "cardinality": 3}))
    (tmp_path / "deletion_vector_00000000-0000-0000-0000-000000000000.bin").write_bytes(blob[:-1] + b"\0")
    with pytest.raises(DeletionVectorError, match="checksum"):
        asyncio.run(read_deletion_vector(storage, f"file://{tmp_path}", dv))


async def test_compaction_reads_the_table_from_its_newest_checkpoint(svc: Service) -> None:
    from coordinator.ops.maintain import run_maintain

    if "sqlite" not in svc.backend.database_url:
        pytest.skip("one database is enough for the checkpoint's path")
    path, client = _grown(svc, 11)
    out = await run_maintain(_settings(svc), (path,), cleanup=False)
    assert out["tables"][0]["written"] == [10]
    os.remove(os.path.join(path, "_delta_log", delta_file_name(3)))  # replay from version 0 is impossible now
    rows = _rows(read_table(path, client=client))
    rep = await run_optimize(_settings(svc), path, target_size=MiB)
    assert rep["readVersion"] == 11 and rep["version"] == 12 and rep["filesRemoved"] == 11 and rep["filesAfter"] == 2
    assert _rows(read_table(path, client=client)) == rows
    removed = {a["remove"]["path"]: a["remove"] for a in _log_actions(path, 12) if "remove" in a}
    assert len(removed) == 11 and all(json.loads(r["stats"])["numRecords"] == 1 for r in removed.values())


# -- row tracking (Delta's PROTOCOL.md, "Row Tracking"; coordinator/ops/row_tracking.py) ---------------------

ROW_ID, ROW_VERSION = "_row-id-col-test", "_row-commit-version-col-test"


def _dv_file(folder: str, rows: list[int]) -> dict[str, Any]:
    """A deletion vector of ``rows`` stored in a file of ``folder`` (absolute path), as Delta lays it out."""
    import struct
    import zlib

    bitmap = struct.pack("<Iq", 1681511377, 1) + struct.pack("<I", 0) + _roaring32(rows, runs=False)
    name = f"deletion_vector_{uuid.uuid4()}.bin"
    with open(os.path.join(folder, name), "wb") as f:
        f.write(b"\x01" + struct.pack(">I", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap)))
    return {"storageType": "p", "pathOrInlineDv": f"file://{folder}/{name}", "offset": 1, "sizeInBytes": len(bitmap),
            "cardinality": len(rows)}


def _tracked_table(svc: Service) -> tuple[str, Any, str]:
    """A filesystem table with row tracking enabled, laid out by hand as delta-spark leaves one, then taken under
    the owner (version 5). Versions 1, 2 and 4 INSERT; version 3 is an UPDATE of the row id=1 (deleted from its
    file by a deletion vector, written again with its stable row id materialized and the new commit version)
    beside a fresh row. Stable (row id, row commit version) per ``id``: 0-3 -> (0-3, 1) less 1; 10-12 -> (4-6, 2);
    101 -> (1, 3), 13 -> (8, 3); 20, 21 -> (9, 4), (10, 4). High-water mark 10."""
    import pyarrow.parquet as pq

    from client.lifecycle import take_ownership

    path = str(svc.backend.tmp / f"rt-{uuid.uuid4().hex[:10]}")
    os.makedirs(os.path.join(path, "_delta_log"))
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "p", "type": "string", "nullable": True, "metadata": {}}]}
    conf = {"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true",
            "delta.rowTracking.materializedRowIdColumnName": ROW_ID,
            "delta.rowTracking.materializedRowCommitVersionColumnName": ROW_VERSION}

    def file(name: str, p: str, ids: list[int], base: int, version: int, **materialized: list[Any]) -> dict[str, Any]:
        os.makedirs(os.path.join(path, f"p={p}"), exist_ok=True)
        cols = {"id": pa.array(ids, pa.int64()), **{k: pa.array(v, pa.int64()) for k, v in materialized.items()}}
        rel = f"p={p}/{name}.parquet"
        pq.write_table(pa.table(cols), os.path.join(path, rel))
        return {"path": rel, "partitionValues": {"p": p}, "size": os.path.getsize(os.path.join(path, rel)),
                "modificationTime": now_ms(), "dataChange": True, "stats": json.dumps({"numRecords": len(ids)}),
                "baseRowId": base, "defaultRowCommitVersion": version}

    def mark(n: int) -> dict[str, Any]:
        return {"domainMetadata": {"domain": "delta.rowTracking", "configuration": json.dumps({"rowIdHighWaterMark": n}),
                                   "removed": False}}

    f1 = file("f1", "a", [0, 1, 2, 3], 0, 1)
    f3 = file("f3", "a", [101, 13], 7, 3, **{ROW_ID: [1, None], ROW_VERSION: [None, None]})
    versions = [
        [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                       "writerFeatures": ["deletionVectors", "domainMetadata", "rowTracking"]}},
         {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                       "schemaString": json.dumps(schema), "partitionColumns": ["p"], "configuration": conf,
                       "createdTime": now_ms()}}],
        [{"add": f1}, mark(3)],
        [{"add": file("f2", "b", [10, 11, 12], 4, 2)}, mark(6)],
        [{"remove": {"path": f1["path"], "deletionTimestamp": now_ms(), "dataChange": True, "baseRowId": 0,
                     "defaultRowCommitVersion": 1}},
         {"add": {**f1, "deletionVector": _dv_file(path, [1])}}, {"add": f3}, mark(8)],
        [{"add": file("f4", "b", [20, 21], 9, 4)}, mark(10)],
    ]
    for v, actions in enumerate(versions):
        info = {"commitInfo": {"timestamp": now_ms(), "operation": "WRITE"}}
        with open(os.path.join(path, "_delta_log", delta_file_name(v)), "w") as f:
            f.write("".join(json.dumps(a) + "\n" for a in [info, *actions]))
    client = svc.client()
    owned = take_ownership(path, client=client)
    assert owned.version == 5
    return path, client, owned.table_id


TRACKED = {0: (0, 1), 2: (2, 1), 3: (3, 1), 10: (4, 2), 11: (5, 2), 12: (6, 2), 101: (1, 3), 13: (8, 3),
           20: (9, 4), 21: (10, 4)}


async def _stable_ids(path: str, client: Any) -> dict[int, tuple[int, int]]:
    """Each live row's stable (row id, row commit version) by ``id``, read as the protocol's reader rule says:
    the materialized value when the column is there and not null, else the add's baseRowId + the row's
    physical index, resp. its defaultRowCommitVersion."""
    import pyarrow.parquet as pq

    from coordinator.ops.deletion_vectors import read_deletion_vector
    from coordinator.storage.local import LocalStorage

    out: dict[int, tuple[int, int]] = {}
    for f in load_snapshot(path, client=client).files:
        t = pq.read_table(os.path.join(path, f["path"]))
        dv = f.get("deletionVector")
        deleted = set(await read_deletion_vector(LocalStorage(), f"file://{path}", dv)) if dv else set()
        none = [None] * t.num_rows
        ids = t.column(ROW_ID).to_pylist() if ROW_ID in t.column_names else none
        versions = t.column(ROW_VERSION).to_pylist() if ROW_VERSION in t.column_names else none
        for i, key in enumerate(t.column("id").to_pylist()):
            if i not in deleted:
                assert key not in out
                out[key] = (f["baseRowId"] + i if ids[i] is None else ids[i],
                            f["defaultRowCommitVersion"] if versions[i] is None else versions[i])
    return out


def _high_water_mark(path: str, client: Any) -> int:
    return json.loads(load_snapshot(path, client=client).domain_metadata["delta.rowTracking"]["configuration"])[
        "rowIdHighWaterMark"]


async def test_compaction_keeps_row_ids_and_row_commit_versions(svc: Service) -> None:
    import pyarrow.parquet as pq

    if "sqlite" not in svc.backend.database_url:
        pytest.skip("one database is enough for the row tracking rules")
    path, client, _ = _tracked_table(svc)
    assert await _stable_ids(path, client) == TRACKED and _high_water_mark(path, client) == 10

    rep = await run_optimize(_settings(svc), path, target_size=MiB)

    assert rep["version"] == 6 and rep["filesRemoved"] == 4 and rep["filesAdded"] == 2
    assert rep["deletionVectorsPurged"] == 1
    assert await _stable_ids(path, client) == TRACKED  # every row keeps its ids, the deleted one stays deleted
    actions = _log_actions(path, 6)
    assert actions[0]["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "true"}
    adds = [a["add"] for a in actions if "add" in a]
    # fresh row ids above the mark, bin by bin (partition a: 5 rows, then b: 5 rows), the committed version
    assert [(a["partitionValues"]["p"], a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds] == [
        ("a", 11, 6), ("b", 16, 6)]
    assert [a["domainMetadata"] for a in actions if "domainMetadata" in a] == [
        {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":20}', "removed": False}]
    assert _high_water_mark(path, client) == 20
    removes = {a["remove"]["path"]: a["remove"] for a in actions if "remove" in a}
    assert {p: (r["baseRowId"], r["defaultRowCommitVersion"]) for p, r in removes.items()} == {
        "p=a/f1.parquet": (0, 1), "p=a/f3.parquet": (7, 3), "p=b/f2.parquet": (4, 2), "p=b/f4.parquet": (9, 4)}
    for a in adds:  # the materialized columns hold the stable values of every row; no statistics for them
        t = pq.read_table(os.path.join(path, a["path"]))
        assert t.column_names == ["id", ROW_ID, ROW_VERSION] and t.column(ROW_ID).null_count == 0
        assert {k: (r, v) for k, r, v in zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True)} == {
            k: TRACKED[k] for k in t.column("id").to_pylist()}
        assert set(json.loads(a["stats"])["nullCount"]) == {"id"}


async def test_row_ids_are_assigned_again_when_the_compaction_moves_onto_an_append(svc: Service) -> None:
    import pyarrow.parquet as pq

    if "sqlite" not in svc.backend.database_url:
        pytest.skip("one database is enough for the row tracking rules")
    path, client, table_id = _tracked_table(svc)
    raced: list[int] = []

    def append(version: int) -> None:  # an INSERT of two rows through the owner takes the first proposal's version
        if raced:
            return
        rel = f"p=a/late-{uuid.uuid4().hex[:6]}.parquet"
        pq.write_table(pa.table({"id": pa.array([30, 31], pa.int64())}), os.path.join(path, rel))
        snap = load_snapshot(path, client=client)
        ict = max(now_ms(), (snap.in_commit_timestamp or 0) + 1)
        acts = [commit_info("WRITE", in_commit_timestamp=ict, read_version=snap.version, parameters={}),
                {"add": {"path": rel, "partitionValues": {"p": "a"}, "size": os.path.getsize(os.path.join(path, rel)),
                         "modificationTime": ict, "dataChange": True, "stats": json.dumps({"numRecords": 2}),
                         "baseRowId": 11, "defaultRowCommitVersion": version}},
                {"domainMetadata": {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":12}',
                                    "removed": False}}]
        assert client.commit(table_id, version, acts).version == version
        client.backfill_to_version(table_id, version)
        raced.append(version)

    rep = await run_optimize(_settings(svc), path, target_size=MiB, before_commit=append)

    assert raced == [6] and rep["version"] == 7 and rep["rebases"] == 1
    actions = _log_actions(path, 7)
    adds = [a["add"] for a in actions if "add" in a]
    # over the mark the append left (12), in the version committed (7); the append's file is not rewritten
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds] == [(13, 7), (18, 7)]
    assert [a["domainMetadata"]["configuration"] for a in actions if "domainMetadata" in a] == [
        '{"rowIdHighWaterMark":22}']
    assert _high_water_mark(path, client) == 22
    assert await _stable_ids(path, client) == {**TRACKED, 30: (11, 6), 31: (12, 6)}


def test_row_tracking_the_compaction_cannot_keep_is_refused() -> None:
    from coordinator.ops.compaction import unsupported

    features = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [],
                "writerFeatures": ["domainMetadata", "rowTracking"]}
    names = {"delta.rowTracking.materializedRowIdColumnName": "r",
             "delta.rowTracking.materializedRowCommitVersionColumnName": "v"}

    def why(conf: dict[str, str], protocol: dict[str, Any] = features) -> str | None:
        return unsupported(protocol, {"configuration": conf})

    assert why({"delta.enableRowTracking": "true", **names}) is None
    assert why({}) is None  # supported, not enabled: fresh ids only
    assert "lacks delta.rowTracking.materializedRowIdColumnName" in str(why({"delta.enableRowTracking": "true"}))
    assert "both enabled and suspended" in str(why({"delta.enableRowTracking": "true", "delta.rowTrackingSuspended":
                                                    "true", **names}))
    assert "without domainMetadata" in str(why({}, {**features, "writerFeatures": ["rowTracking"]}))
    assert "lacks the rowTracking feature" in str(why({"delta.enableRowTracking": "true", **names},
                                                      {**features, "writerFeatures": []}))
    assert "column mapping" in str(why({"delta.columnMapping.mode": "name"},
                                       {**features, "writerFeatures": ["columnMapping"]}))


def test_fresh_row_ids_only_when_row_tracking_is_supported_but_not_enabled() -> None:
    from coordinator.ops.row_tracking import RowTracking, assign, with_stable_columns

    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["domainMetadata", "rowTracking"]}
    conf = {"delta.rowTracking.materializedRowIdColumnName": "r",
            "delta.rowTracking.materializedRowCommitVersionColumnName": "v"}
    tracking = RowTracking.of(protocol, {"configuration": conf})
    assert tracking.assigns and not tracking.preserves
    # the source's materialized columns are left out (nothing is preserved), no others
    source = pa.table({"id": [1, 2], "r": [5, None], "v": [3, 3]})
    assert with_stable_columns(source, {"path": "x"}, tracking).column_names == ["id"]
    added = [{"path": "n1", "stats": '{"numRecords":3}'}, {"path": "n2", "stats": '{"numRecords":0}'}]
    adds, marks = assign(added, tracking, version=9, domains={})  # no domain yet: the mark starts at -1
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds] == [(0, 9), (3, 9)]
    assert marks == [{"domainMetadata": {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":2}',
                                         "removed": False}}]
    suspended = RowTracking.of(protocol, {"configuration": {**conf, "delta.rowTrackingSuspended": "true"}})
    assert assign(added, suspended, version=9, domains={}) == (added, [])
    # enabled: a row with no materialized value and no baseRowId in its add cannot be told
    enabled = RowTracking.of(protocol, {"configuration": {**conf, "delta.enableRowTracking": "true"}})
    with pytest.raises(ValueError, match="has rows without a materialized r and its add has no baseRowId"):
        with_stable_columns(source, {"path": "x", "defaultRowCommitVersion": 1}, enabled)
    kept = with_stable_columns(source, {"path": "x", "baseRowId": 40, "defaultRowCommitVersion": 1}, enabled)
    assert kept.to_pydict() == {"id": [1, 2], "r": [5, 41], "v": [3, 3]}


async def test_compaction_beside_a_steady_writer_commits_and_loses_no_row(svc: Service) -> None:
    """A writer appending and publishing all along: the compaction reads the table once (versions published while
    it read are taken from their <v>.json, not by starting over), moves onto the appends that win, and commits."""
    import threading

    path, client = _grown(svc, 10)
    stop, written = threading.Event(), []

    def writer() -> None:
        i = 1000
        while not stop.is_set() and i < 1060:
            write_table(pa.table({"id": pa.array([i], pa.int64()), "name": pa.array(["w"], pa.string()),
                                  "ts": pa.array([datetime.datetime(2026, 11, 29, tzinfo=datetime.timezone.utc)],
                                                 pa.timestamp("us", tz="UTC")), "p": ["a"]}),
                        path, client=client, partition_by=["p"])
            written.append(i)
            i += 1

    th = threading.Thread(target=writer)
    th.start()
    try:
        await asyncio.sleep(0.3)
        rep = await run_optimize(_settings(svc), path, target_size=MiB)
    finally:
        stop.set()
        th.join(60)
    assert rep["version"] is not None and rep["filesRemoved"] >= 10
    rows = _rows(read_table(path, client=client))
    assert [r[0] for r in rows] == list(range(10)) + written  # every row, once
