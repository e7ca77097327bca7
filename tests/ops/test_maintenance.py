"""Checkpoints (`commit-owner maintain`) and vacuum (`commit-owner vacuum`) on real owned tables: a real service
(SQLite + local disk), the commands as subprocesses, delta-rs and the project's snapshot reader as judges."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from client.contract.delta_log import commit_info, now_ms
from client.contract.layout import checkpoint_file_names, delta_file_name
from client.lifecycle import create_table
from client.snapshot import load_snapshot
from harness.storage_faults import STORAGE_FAULTS
from tests.lifecycle.helpers import SCHEMA, append_through_owner, rows, tree
from tests.support import ROOT


def _cli(backend: Any, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, **backend.env(), "COMMIT_OWNER_LOG_FORMAT": "json", **(env or {})}
    return subprocess.run([sys.executable, "-m", "coordinator", *args], cwd=str(ROOT), env=e, capture_output=True,
                          text=True, timeout=120)


def _new_table(owner_service: Any) -> tuple[str, str, Any]:
    b = owner_service.backend
    path = str(b.tmp / f"m-{uuid.uuid4().hex[:10]}")
    client = owner_service.client()
    t = create_table(path, SCHEMA, client=client)  # the managedCommit generation: delta-rs reads it
    return path, t.table_id, client


def _log(path: str) -> str:
    return os.path.join(path, "_delta_log")


def _ids_rs(path: str, version: int | None = None) -> list[int]:
    dt = DeltaTable(path, version=version) if version is not None else DeltaTable(path)
    return sorted(dt.to_pyarrow_table().column("id").to_pylist())


@pytest.fixture
def table25(owner_service: Any) -> tuple[str, str, Any]:
    """An owned table with versions 0..25: appends, and at version 12 an overwrite (so there are tombstones)."""
    path, table_id, client = _new_table(owner_service)
    for i in range(1, 26):
        if i == 12:
            assert _overwrite(client, path, [1200]) == 12
        else:
            assert append_through_owner(client, path, [i]) == i
    assert client.backfill_to_version(table_id, 25).latest_backfilled_version == 25
    return path, table_id, client


def _overwrite(client: Any, path: str, ids: list[int]) -> int:
    """Replace every file of the table by one new file, through the owner; returns the version."""
    snap = load_snapshot(path, client=client)
    assert snap.owner is not None and snap.owner.table_id
    name = f"part-{uuid.uuid4()}.parquet"
    pq.write_table(rows(ids), os.path.join(path, name))
    ict = max(now_ms(), (snap.in_commit_timestamp or 0) + 1)
    acts: list[dict[str, Any]] = [commit_info("WRITE", in_commit_timestamp=ict, read_version=snap.version,
                                              parameters={"mode": "Overwrite"})]
    acts += [{"remove": {"path": f["path"], "deletionTimestamp": ict, "dataChange": True, "size": f.get("size"),
                         "partitionValues": f.get("partitionValues") or {}}} for f in snap.files]
    acts.append({"add": {"path": name, "partitionValues": {}, "size": os.path.getsize(os.path.join(path, name)),
                         "modificationTime": ict, "dataChange": True, "stats": json.dumps({"numRecords": len(ids)})}})
    return int(client.commit(snap.owner.table_id, snap.version + 1, acts).version)


def _prom(path: Any) -> dict[str, float]:
    """The samples of a Prometheus text file: ``name{labels}`` -> value."""
    out = {}
    for line in open(path).read().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def _expected_ids() -> list[int]:
    return sorted([1200, *range(13, 26)])


def test_checkpoints_every_interval_readers_need_only_the_newest(owner_service: Any, table25, tmp_path) -> None:
    path, _table_id, _client = table25
    prom = tmp_path / "maintain.prom"
    r = _cli(owner_service.backend, "maintain", path, "--json", "--metrics-file", str(prom))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    figures = _prom(prom)
    assert figures["commit_owner_checkpoints_written_total"] == 2
    assert figures[f'commit_owner_checkpoint_lag_versions{{table_id="{_table_id}"}}'] == 5
    assert out["checkpointsWritten"] == 2 and out["failures"] == []
    (rep,) = out["tables"]
    assert rep["written"] == [10, 20] and rep["lastCheckpoint"] == 20 and rep["lag"] == 5
    names = set(os.listdir(_log(path)))
    for v in (10, 20):
        assert checkpoint_file_names(v)[0] in names
    assert not any(checkpoint_file_names(v)[0] in names for v in (5, 15, 25))
    hint = json.loads(open(os.path.join(_log(path), "_last_checkpoint")).read())
    assert hint["version"] == 20 and hint["size"] == pq.read_metadata(
        os.path.join(_log(path), checkpoint_file_names(20)[0])).num_rows
    # Checkpoint 20 holds the 14 live files and the tombstones of the overwrite at 12 (11 files).
    cp = pq.read_table(os.path.join(_log(path), checkpoint_file_names(20)[0])).to_pylist()
    assert sum(1 for row in cp if row["add"]) == 9  # 1200 and 13..20
    assert sum(1 for row in cp if row["remove"]) == 11  # versions 1..11
    assert sum(1 for row in cp if row["protocol"]) == 1 and sum(1 for row in cp if row["metaData"]) == 1

    # A copy holding only checkpoint 20 and versions 21..25: both readers load version 25 from it.
    full = load_snapshot(path, ask_owner=False)
    copy = str(tmp_path / "copy")
    shutil.copytree(path, copy)
    for v in range(0, 21):
        os.remove(os.path.join(_log(copy), delta_file_name(v)))
    os.remove(os.path.join(_log(copy), checkpoint_file_names(10)[0]))
    snap = load_snapshot(copy, ask_owner=False)
    assert snap.version == 25 and snap.file_paths == full.file_paths and len(snap.file_paths) == 14
    assert snap.metadata["id"] == full.metadata["id"] and snap.protocol == full.protocol
    dt = DeltaTable(copy)
    assert dt.version() == 25
    assert _ids_rs(copy) == _ids_rs(path) == _expected_ids()

    # A second pass starts from checkpoint 20 and writes nothing new.
    again = json.loads(_cli(owner_service.backend, "maintain", path, "--json").stdout)
    assert again["checkpointsWritten"] == 0 and again["tables"][0]["lastCheckpoint"] == 20
    assert set(os.listdir(_log(path))) == names


def test_sigkill_mid_checkpoint_leaves_the_table_readable_and_the_next_run_completes(owner_service: Any,
                                                                                     table25) -> None:
    path, _table_id, _client = table25
    before = tree(_log(path))
    # Storage faults (harness/storage_faults.py): every storage call on a checkpoint file waits 30 s, so the process is
    # killed while it is storing checkpoint 10 (its bytes built, the put under way).
    e = {**os.environ, **owner_service.backend.env(), "COMMIT_OWNER_LOG_FORMAT": "json",
         STORAGE_FAULTS: "latency_ms=30000;match=.checkpoint.parquet"}
    proc = subprocess.Popen([sys.executable, "-m", "harness.with_faults", "maintain", path], cwd=str(ROOT), env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        seen = ""
        assert proc.stderr is not None
        while "writing version 10" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen
            seen += proc.stderr.readline()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert tree(_log(path)) == before  # nothing half-written is visible
    assert load_snapshot(path, ask_owner=False).version == 25
    assert _ids_rs(path) == _expected_ids()
    r = _cli(owner_service.backend, "maintain", path, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tables"][0]["written"] == [10, 20]
    assert json.loads(open(os.path.join(_log(path), "_last_checkpoint")).read())["version"] == 20
    assert DeltaTable(path).version() == 25


# -- vacuum -----------------------------------------------------------------------------------------------------

def _age(path: str, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_vacuum_dry_run_then_real_run(owner_service: Any, tmp_path) -> None:
    path, _table_id, client = _new_table(owner_service)
    assert append_through_owner(client, path, [1]) == 1
    assert append_through_owner(client, path, [2]) == 2
    removed = sorted(f["path"] for f in load_snapshot(path, client=client).files)
    assert _overwrite(client, path, [3]) == 3
    # A failed write's abandoned folder, and a file just being written (young): only the old one goes.
    os.makedirs(os.path.join(path, "batch-dead"))
    pq.write_table(rows([99]), os.path.join(path, "batch-dead", "part-0.parquet"))
    for rel in [*removed, "batch-dead/part-0.parquet"]:
        _age(os.path.join(path, rel), 3600)
    time.sleep(10.5)  # version 3 is now older than the 10 s retention below
    in_flight = os.path.join(path, "part-in-flight.parquet")
    pq.write_table(rows([98]), in_flight)
    assert append_through_owner(client, path, [4]) == 4
    client.backfill_to_version(_table_id, 4)
    log_before = tree(_log(path))
    all_before = tree(path)
    expected = sorted([*removed, "batch-dead/part-0.parquet"])

    os.utime(in_flight)  # still being written: young at each run, however slowly the CLI starts
    dry = _cli(owner_service.backend, "vacuum", path, "--retention", "10s", "--force", "--json")
    assert dry.returncode == 0, dry.stderr
    rep = json.loads(dry.stdout)
    assert rep["dryRun"] is True and sorted(f["path"] for f in rep["files"]) == expected
    assert rep["oldestKeptVersion"] == 3 and rep["latestVersion"] == 4 and rep["deleted"] == 0
    assert rep["bytes"] == sum(len(all_before[p]) for p in expected)
    assert tree(path) == all_before  # a dry run deletes nothing

    prom = tmp_path / "vacuum.prom"
    os.utime(in_flight)
    real = _cli(owner_service.backend, "vacuum", path, "--retention", "10s", "--force", "--no-dry-run", "--json",
                "--metrics-file", str(prom))
    assert real.returncode == 0, real.stderr
    assert json.loads(real.stdout)["deleted"] == len(expected)
    figures = _prom(prom)
    assert figures["commit_owner_vacuum_deleted_files_total"] == len(expected)
    assert figures["commit_owner_vacuum_freed_bytes_total"] == rep["bytes"] > 0
    after = tree(path)
    assert set(all_before) - set(after) == set(expected)  # those and nothing else
    assert all(after[p] == all_before[p] for p in after)
    assert tree(_log(path)) == log_before
    assert not os.path.exists(os.path.join(path, "batch-dead"))
    # Time travel inside the retention window still works; the in-flight file stayed (too young).
    assert _ids_rs(path, 3) == [3] and _ids_rs(path, 4) == [3, 4] and _ids_rs(path) == [3, 4]
    assert os.path.exists(os.path.join(path, "part-in-flight.parquet"))

    # Below the table's deletedFileRetentionDuration (7 days) without --force: refused, nothing deleted.
    r = _cli(owner_service.backend, "vacuum", path, "--retention", "10s", "--no-dry-run")
    assert r.returncode != 0 and "delta.deletedFileRetentionDuration" in r.stderr and "--force" in r.stderr
    assert tree(path) == after


def test_vacuum_starts_from_a_checkpoint_when_early_commits_are_gone(owner_service: Any, table25) -> None:
    path, _table_id, _client = table25
    assert _cli(owner_service.backend, "maintain", path).returncode == 0
    for v in range(0, 10):  # what log cleanup does below a checkpoint
        os.remove(os.path.join(_log(path), delta_file_name(v)))
    before = tree(path)
    r = _cli(owner_service.backend, "vacuum", path, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    # Every version is younger than 7 days: replay starts at checkpoint 10, which stays the oldest readable one,
    # and the files only versions 1..9 knew (removed at 12, still referenced by 10 and 11) are all kept.
    assert rep["oldestKeptVersion"] == 10 and rep["latestVersion"] == 25 and rep["files"] == []
    assert tree(path) == before
    os.remove(os.path.join(_log(path), checkpoint_file_names(10)[0]))  # versions 10..19 cannot be rebuilt now
    rep = json.loads(_cli(owner_service.backend, "vacuum", path, "--json").stdout)
    assert rep["oldestKeptVersion"] == 20 and rep["files"] == []
    os.remove(os.path.join(_log(path), checkpoint_file_names(20)[0]))  # nor can any version
    r = _cli(owner_service.backend, "vacuum", path, "--json")
    assert r.returncode != 0 and "the published log is incomplete" in r.stderr
    assert tree(path) == {k: v for k, v in before.items() if "checkpoint.parquet" not in k}


def test_vacuum_refuses_a_bad_retention(owner_service: Any) -> None:
    path, _table_id, _client = _new_table(owner_service)
    before = tree(path)
    r = _cli(owner_service.backend, "vacuum", path, "--retention", "soon")
    assert r.returncode != 0 and "'soon' is not a duration" in r.stderr
    assert tree(path) == before


def test_vacuum_keeps_the_deletion_vector_files_an_add_needs() -> None:
    from coordinator.ops.maintenance import _files_of

    loc = "s3://bucket/t"
    add = {"path": "p%3D1/part-0.parquet", "deletionVector": {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
                                                               "offset": 4, "sizeInBytes": 40, "cardinality": 6}}
    assert _files_of(loc, add) == ["p=1/part-0.parquet", "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"]
    absolute = {"path": f"{loc}/part-1.parquet", "deletionVector": {"storageType": "p", "pathOrInlineDv": f"{loc}/dv.bin"}}
    assert _files_of(loc, absolute) == ["part-1.parquet", "dv.bin"]
    inline = {"path": "part-2.parquet", "deletionVector": {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0"}}
    assert _files_of(loc, inline) == ["part-2.parquet"]


# -- the same on S3 (the moto server) -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def s3_service(request: pytest.FixtureRequest):
    from tests.conftest import make_backend
    from tests.support import Service

    svc = Service(make_backend(request, "sqlite", "s3", "maint-s3")).start()
    yield svc
    svc.stop()


def test_checkpoint_and_vacuum_on_s3(s3_service: Any) -> None:
    from tests.support import S3_KEY, S3_SECRET, data_commit, delta_rs_table

    b = s3_service.backend
    loc = b.new_location()
    client = s3_service.client()
    options = {"key": S3_KEY, "secret": S3_SECRET, "client_kwargs": {"endpoint_url": b.s3_endpoint,
                                                                     "region_name": "us-east-1"}}
    t = create_table(loc, {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True,
                                                          "metadata": {}}]}, client=client, storage_options=options)
    for v in range(1, 13):
        assert client.commit(t.table_id, v, data_commit(b, loc, [v])).version == v
    client.backfill_to_version(t.table_id, 12)
    r = _cli(b, "maintain", loc, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tables"][0]["written"] == [10]
    names = b.list(f"{loc}/_delta_log")
    assert checkpoint_file_names(10)[0] in names
    assert json.loads(b.read(f"{loc}/_delta_log/_last_checkpoint"))["version"] == 10
    dt = delta_rs_table(b, loc)
    assert dt.version() == 12 and sorted(dt.to_pyarrow_table().column("id").to_pylist()) == list(range(1, 13))
    assert load_snapshot(loc, ask_owner=False, storage_options=options).version == 12

    b.write(f"{loc}/batch-abandoned/part-0.parquet", b"not committed")
    time.sleep(1.5)
    dry = json.loads(_cli(b, "vacuum", loc, "--retention", "1s", "--force", "--json").stdout)
    assert [f["path"] for f in dry["files"]] == ["batch-abandoned/part-0.parquet"] and dry["oldestKeptVersion"] == 12
    before = b.snapshot(loc)
    real = _cli(b, "vacuum", loc, "--retention", "1s", "--force", "--no-dry-run", "--json")
    assert real.returncode == 0, real.stderr
    after = b.snapshot(loc)
    assert set(before) - set(after) == {"/batch-abandoned/part-0.parquet"} and set(after) <= set(before)
    assert sorted(delta_rs_table(b, loc).to_pyarrow_table().column("id").to_pylist()) == list(range(1, 13))


def test_interval_from_the_table_property_and_released_tables_are_left_alone(owner_service: Any) -> None:
    from client.lifecycle import release_ownership

    b = owner_service.backend
    path = str(b.tmp / f"m-{uuid.uuid4().hex[:10]}")
    client = owner_service.client()
    t = create_table(path, SCHEMA, properties={"delta.checkpointInterval": "3"}, client=client)
    for i in range(1, 8):
        assert append_through_owner(client, path, [i]) == i
    client.backfill_to_version(t.table_id, 7)
    out = json.loads(_cli(b, "maintain", path, "--json").stdout)
    assert out["tables"][0]["written"] == [3, 6] and out["tables"][0]["lag"] == 1
    assert DeltaTable(path).version() == 7
    release_ownership(path, client=client)
    before = tree(path)
    out = json.loads(_cli(b, "maintain", path, "--json").stdout)
    assert out["tables"] == [] and out["skipped"] == [{"table": "file://" + path, "reason": "RELEASED"}]
    r = _cli(b, "vacuum", path)
    assert r.returncode != 0 and "is RELEASED" in r.stderr
    assert tree(path) == before


def test_checkpoint_of_a_partitioned_table_with_nulls_stats_and_txn(owner_service: Any, tmp_path) -> None:
    """Partition values (a map, one of them null), stats, tags and txn survive the checkpoint for both readers."""
    import pyarrow as pa

    b = owner_service.backend
    path = str(b.tmp / f"m-{uuid.uuid4().hex[:10]}")
    client = owner_service.client()
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "p", "type": "string", "nullable": True, "metadata": {}}]}
    t = create_table(path, schema, ["p"], client=client)
    ict = now_ms()
    for v in range(1, 11):
        part = None if v % 3 == 0 else f"k{v % 2}"
        folder = "p=__HIVE_DEFAULT_PARTITION__" if part is None else f"p={part}"
        name = f"{folder}/part-{uuid.uuid4()}.parquet"
        os.makedirs(os.path.join(path, folder), exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([v], pa.int64())}), os.path.join(path, name))
        ict += 1
        stats = {"numRecords": 1, "minValues": {"id": v}, "maxValues": {"id": v}, "nullCount": {"id": 0}}
        acts = [commit_info("WRITE", in_commit_timestamp=ict, read_version=v - 1),
                {"txn": {"appId": "stream-1", "version": v, "lastUpdated": ict}},
                {"add": {"path": name, "partitionValues": {"p": part}, "size": os.path.getsize(os.path.join(path, name)),
                         "modificationTime": ict, "dataChange": True, "stats": json.dumps(stats),
                         "tags": {"origin": "test"}}}]
        assert client.commit(t.table_id, v, acts).version == v
    client.backfill_to_version(t.table_id, 10)
    full = load_snapshot(path, ask_owner=False)  # replayed from the JSON commits: the judge of the checkpoint
    assert json.loads(_cli(b, "maintain", path, "--json").stdout)["tables"][0]["written"] == [10]
    copy = str(tmp_path / "copy")
    shutil.copytree(path, copy)
    for v in range(0, 11):
        os.remove(os.path.join(_log(copy), delta_file_name(v)))
    snap = load_snapshot(copy, ask_owner=False)
    assert snap.version == 10 and snap.txns["stream-1"]["version"] == 10
    by_path = {f["path"]: f for f in snap.files}
    assert sorted(by_path) == sorted(f["path"] for f in full.files)
    for f in full.files:
        assert by_path[f["path"]] == f  # every field, the null partition value and the tags map included
    assert snap.protocol == full.protocol
    # a null field of the JSON metaData (name, description) is an absent one in the checkpoint's struct
    assert snap.metadata == {k: v for k, v in full.metadata.items() if v is not None}
    assert sum(1 for f in snap.files if f["partitionValues"]["p"] is None) == 3
    dt = DeltaTable(copy)
    assert dt.version() == 10
    got = dt.to_pyarrow_table()
    assert sorted(zip(got.column("id").to_pylist(), got.column("p").to_pylist(), strict=True)) == \
        [(v, None if v % 3 == 0 else f"k{v % 2}") for v in range(1, 11)]
    assert DeltaTable(copy).to_pyarrow_table(filters=[("p", "=", "k1")]).num_rows == 3


def test_maintain_every_is_a_worker_that_follows_new_versions(owner_service: Any, table25) -> None:
    from tests.support import wait_until

    path, table_id, client = table25
    e = {**os.environ, **owner_service.backend.env(), "COMMIT_OWNER_LOG_FORMAT": "json"}
    proc = subprocess.Popen([sys.executable, "-m", "coordinator", "maintain", path, "--every", "0.3"], cwd=str(ROOT),
                            env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        cp = lambda v: os.path.exists(os.path.join(_log(path), checkpoint_file_names(v)[0]))  # noqa: E731
        wait_until(lambda: cp(20), timeout=60, what="checkpoint 20")
        for i in range(26, 31):
            assert append_through_owner(client, path, [i]) == i
        client.backfill_to_version(table_id, 30)
        wait_until(lambda: cp(30), timeout=60, what="checkpoint 30")
        wait_until(lambda: json.loads(open(os.path.join(_log(path), "_last_checkpoint")).read())["version"] == 30,
                   timeout=30, what="_last_checkpoint at 30")
        assert proc.poll() is None  # still running
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    assert DeltaTable(path).version() == 30


def test_tables_with_v2_checkpoints_get_a_classic_named_v2_checkpoint(owner_service: Any, tmp_path) -> None:
    path, table_id, client = _new_table(owner_service)
    snap = load_snapshot(path, client=client)
    protocol = dict(snap.protocol)
    protocol["readerFeatures"] = [*(protocol.get("readerFeatures") or []), "v2Checkpoint"]
    protocol["writerFeatures"] = [*(protocol.get("writerFeatures") or []), "v2Checkpoint"]
    protocol["minReaderVersion"] = 3
    ict = max(now_ms(), (snap.in_commit_timestamp or 0) + 1)
    assert client.commit(table_id, 1, [commit_info("SET TBLPROPERTIES", in_commit_timestamp=ict, read_version=0),
                                       {"protocol": protocol}]).version == 1
    for i in range(2, 13):
        assert append_through_owner(client, path, [i]) == i
    client.backfill_to_version(table_id, 12)
    out = json.loads(_cli(owner_service.backend, "maintain", path, "--json").stdout)
    assert out["tables"][0]["written"] == [10] and "skipped" not in out["tables"][0]
    # The V2 spec in a classic-named file: exactly one checkpointMetadata action, naming the version.
    cp = pq.read_table(os.path.join(_log(path), checkpoint_file_names(10)[0])).to_pylist()
    meta = [row["checkpointMetadata"] for row in cp if row["checkpointMetadata"]]
    assert meta == [{"version": 10, "tags": None}]
    assert sum(1 for row in cp if row["add"]) == 9 and sum(1 for row in cp if row["protocol"]) == 1
    assert json.loads(open(os.path.join(_log(path), "_last_checkpoint")).read())["version"] == 10

    # A copy holding only checkpoint 10 and versions 11..12: both readers load version 12 from it.
    full = load_snapshot(path, ask_owner=False)
    copy = str(tmp_path / "copy")
    shutil.copytree(path, copy)
    for v in range(0, 11):
        os.remove(os.path.join(_log(copy), delta_file_name(v)))
    again = load_snapshot(copy, ask_owner=False)
    assert again.version == 12 and again.file_paths == full.file_paths and again.protocol == full.protocol
    # delta-rs 1.6's pyarrow reader refuses the v2Checkpoint feature; its DataFusion reader reads the table.
    import pyarrow as pa
    from deltalake import QueryBuilder

    dt = DeltaTable(copy)
    assert dt.version() == 12
    ids = pa.table(QueryBuilder().register("t", dt).execute("SELECT id FROM t ORDER BY id").read_all())
    assert ids.column("id").to_pylist() == list(range(2, 13))


def test_a_checkpoint_whose_files_live_in_sidecars_is_refused_not_read_in_part() -> None:
    import io

    import pyarrow as pa

    from client.checkpoint import read_checkpoint_parts
    from client.contract.errors import CheckpointUnreadableError

    buf = io.BytesIO()
    pq.write_table(pa.table({
        "checkpointMetadata": [{"version": 10}, None],
        "sidecar": [None, {"path": "0000.parquet", "sizeInBytes": 10, "modificationTime": 1}],
    }), buf)
    with pytest.raises(CheckpointUnreadableError, match="sidecar"):
        read_checkpoint_parts([buf.getvalue()])
