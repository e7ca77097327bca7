"""Creating owned tables: version 0's content, and 8 creators racing on one location (local disk and S3)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from deltalake import DeltaTable, write_deltalake

from client import CommitOwnerClient
from client.delta_log import commit_info, now_ms
from client.errors import InvalidArgumentError, TableAlreadyExistsError, TableNotFoundError
from client.lifecycle import OwnedTable, create_table, take_ownership
from client.snapshot import load_snapshot
from client.storage import LogStorage

from .helpers import SCHEMA, append_through_owner, delta_rs_ids, rows


def test_version_zero_carries_protocol_ict_owner_and_table_conf(tmp_path, owner) -> None:
    path = str(tmp_path / "t")
    table = create_table(path, SCHEMA, properties={"delta.appendOnly": "false"}, client=owner)
    lines = [json.loads(line) for line in LogStorage(path).read(f"{0:020d}.json").splitlines()]
    first = lines[0]["commitInfo"]
    assert isinstance(first["inCommitTimestamp"], int)
    proto = next(a["protocol"] for a in lines if "protocol" in a)
    assert proto["minWriterVersion"] == 7 and set(proto["writerFeatures"]) == {"inCommitTimestamp", "managedCommit"}
    conf = next(a["metaData"] for a in lines if "metaData" in a)["configuration"]
    assert conf["delta.enableInCommitTimestamps"] == "true"
    assert conf["delta.managedCommit.commitOwner"] == "commit-owner"
    assert json.loads(conf["delta.managedCommit.commitOwnerConf"]) == {"endpoint": owner.endpoint}
    assert json.loads(conf["delta.managedCommit.tableConf"]) == {"tableId": table.table_id}
    assert conf["delta.appendOnly"] == "false"

    page = owner.get_commits(table.table_id)
    assert (page.commits, page.latest_table_version) == ([], -1)
    assert append_through_owner(owner, path, [1, 2]) == 1
    owner.backfill_to_version(table.table_id, 1)
    assert delta_rs_ids(path) == [1, 2]
    assert DeltaTable(path).version() == 1


def test_a_catalog_managed_table_is_created_read_and_appended_with_the_owners_client(tmp_path, owner) -> None:
    path = str(tmp_path / "cm")
    table = create_table(path, SCHEMA, client=owner, protocol="catalogManaged")
    assert table.commit_dir == "_staged_commits"
    lines = [json.loads(line) for line in LogStorage(path).read(f"{0:020d}.json").splitlines()]
    assert lines[0]["commitInfo"]["txnId"] and isinstance(lines[0]["commitInfo"]["inCommitTimestamp"], int)
    proto = next(a["protocol"] for a in lines if "protocol" in a)
    assert (proto["minReaderVersion"], proto["minWriterVersion"]) == (3, 7)
    assert set(proto["readerFeatures"]) == {"catalogManaged", "vacuumProtocolCheck"}
    assert set(proto["writerFeatures"]) == {"catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"}
    conf = next(a["metaData"] for a in lines if "metaData" in a)["configuration"]
    assert conf == {"delta.enableInCommitTimestamps": "true", "delta.feature.catalogManaged": "supported",
                    "io.unitycatalog.tableId": table.table_id}

    # the table names no endpoint: a reader without the owner's client gets a clear error
    with pytest.raises(InvalidArgumentError, match="pass client="):
        load_snapshot(path)
    assert append_through_owner(owner, path, [1, 2]) == 1
    staged = LogStorage(path).list("_staged_commits")
    assert [e.name.split(".")[0] for e in staged] == [f"{1:020d}"]
    snap = load_snapshot(path, client=owner)
    assert (snap.version, snap.unbackfilled_versions) == (1, [1])

    # a metaData that keeps io.unitycatalog.tableId is an ordinary commit, not a release
    md = {**snap.metadata, "configuration": {**snap.properties, "delta.appendOnly": "false"}}
    owner.commit(table.table_id, 2, [commit_info("SET TBLPROPERTIES", in_commit_timestamp=now_ms(), read_version=1),
                                     {"metaData": md}])
    info = owner.get_table(table.table_id)
    assert info.accepting_commits and info.status == "ACTIVE"
    assert append_through_owner(owner, path, [3]) == 3


def test_a_filesystem_table_is_not_taken_over_as_catalog_managed(tmp_path, owner) -> None:
    path = str(tmp_path / "fs")
    write_deltalake(path, rows([1]))
    before = sorted(p.name for p in (tmp_path / "fs" / "_delta_log").iterdir())
    with pytest.raises(InvalidArgumentError, match="only be created"):
        take_ownership(path, client=owner, protocol="catalogManaged")
    assert sorted(p.name for p in (tmp_path / "fs" / "_delta_log").iterdir()) == before


def _race(location: str, client: CommitOwnerClient, storage_options: dict[str, Any] | None, n: int = 8
          ) -> tuple[list[OwnedTable], list[BaseException]]:
    won: list[OwnedTable] = []
    lost: list[BaseException] = []
    barrier = threading.Barrier(n)

    def create(i: int) -> None:
        c = CommitOwnerClient(client.endpoint)
        barrier.wait()
        try:
            won.append(create_table(location, SCHEMA, client=c, storage_options=storage_options,
                                    description=f"creator {i}"))
        except TableAlreadyExistsError as e:
            lost.append(e)
        except BaseException as e:  # anything else is a failure of the test
            lost.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, lost


def _assert_one_winner(location: str, owner: CommitOwnerClient, won: list[OwnedTable], lost: list[BaseException],
                       storage_options: dict[str, Any] | None) -> None:
    assert len(won) == 1, lost
    assert len(lost) == 7 and all(isinstance(e, TableAlreadyExistsError) for e in lost), lost
    winner = won[0]
    snap = load_snapshot(location, client=owner, storage_options=storage_options)
    assert snap.version == 0 and snap.owner is not None and snap.owner.table_id == winner.table_id
    assert owner.get_table(location=winner.location).table_id == winner.table_id
    assert [t.table_id for t in owner.list_tables() if t.location == winner.location] == [winner.table_id]
    # Nothing the losers did blocks the winner: its first commit through the owner goes in.
    owner.commit(winner.table_id, 1, [{"commitInfo": {"inCommitTimestamp": snap.in_commit_timestamp + 1,
                                                        "operation": "NOOP"}}])
    assert load_snapshot(location, client=owner, storage_options=storage_options).version == 1


def test_eight_concurrent_creators_on_local_disk_one_wins(tmp_path, owner) -> None:
    location = f"file://{tmp_path}/race"
    won, lost = _race(location, owner, None)
    _assert_one_winner(location, owner, won, lost, None)


@pytest.mark.s3
def test_eight_concurrent_creators_on_s3_one_wins(owner, lifecycle_s3) -> None:
    bucket, options = lifecycle_s3
    location = f"s3://{bucket}/race"
    won, lost = _race(location, owner, options)
    _assert_one_winner(location, owner, won, lost, options)


def test_creating_over_an_existing_table_changes_nothing(tmp_path, owner) -> None:
    path = str(tmp_path / "t")
    first = create_table(path, SCHEMA, client=owner)
    before = LogStorage(path).read(f"{0:020d}.json")
    with pytest.raises(TableAlreadyExistsError):
        create_table(path, SCHEMA, client=owner)
    assert LogStorage(path).read(f"{0:020d}.json") == before
    assert [t.table_id for t in owner.list_tables() if t.location == first.location] == [first.table_id]


def test_lost_first_put_forgets_the_registration(tmp_path, owner) -> None:
    """A filesystem writer publishes version 0 between registration and the put: the creator's proposal is dropped."""
    path = str(tmp_path / "t")
    rival = b'{"commitInfo":{"timestamp":1}}\n'

    class Racing(CommitOwnerClient):
        def register_table(self, *args: Any, **kwargs: Any):  # type: ignore[override]
            info = super().register_table(*args, **kwargs)
            LogStorage(path).put_if_absent(f"{0:020d}.json", rival)
            return info

    with Racing(owner.endpoint) as racing, pytest.raises(TableAlreadyExistsError):
        create_table(path, SCHEMA, client=racing)
    assert LogStorage(path).read(f"{0:020d}.json") == rival
    with pytest.raises(TableNotFoundError):
        owner.get_table(location=f"file://{path}")
