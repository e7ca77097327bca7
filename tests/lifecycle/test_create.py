"""Creating owned tables: version 0's content, and 8 creators racing on one location.

On every backend (SQLite/PostgreSQL x local disk/S3), with the owner in this process.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from client import CommitOwnerClient
from client.contract.delta_log import commit_info, now_ms
from client.contract.errors import InvalidArgumentError, TableAlreadyExistsError, TableNotFoundError
from client.contract.layout import delta_file_name
from client.lifecycle import OwnedTable, create_table, take_ownership
from client.snapshot import load_snapshot
from tests.lifecycle.helpers import SCHEMA, rows
from tests.lifecycle.matrix import Place, in_thread


@in_thread
def test_version_zero_carries_protocol_ict_owner_and_table_conf(place: Place) -> None:
    with place.client() as owner:
        table = create_table(place.location, SCHEMA, properties={"delta.appendOnly": "false"}, client=owner,
                             storage_options=place.options)
        lines = [json.loads(line) for line in place.log.read(delta_file_name(0)).splitlines()]
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
        assert place.append(owner, [1, 2]) == 1
        owner.backfill_to_version(table.table_id, 1)
    assert place.ids() == [1, 2]
    assert place.delta_table().version() == 1


@pytest.mark.slow_on_s3  # 9-15 s on S3
@in_thread
def test_a_catalog_managed_table_is_created_read_and_appended_with_the_owners_client(place: Place) -> None:
    opts = place.options
    with place.client() as owner:
        table = create_table(place.location, SCHEMA, client=owner, protocol="catalogManaged", storage_options=opts)
        assert table.commit_dir == "_staged_commits"
        lines = [json.loads(line) for line in place.log.read(delta_file_name(0)).splitlines()]
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
            load_snapshot(place.location, storage_options=opts)
        assert place.append(owner, [1, 2]) == 1
        staged = place.log.list("_staged_commits")
        assert [e.name.split(".")[0] for e in staged] == [f"{1:020d}"]
        snap = load_snapshot(place.location, client=owner, storage_options=opts)
        assert (snap.version, snap.unbackfilled_versions) == (1, [1])

        # a metaData that keeps io.unitycatalog.tableId is an ordinary commit, not a release
        md = {**snap.metadata, "configuration": {**snap.properties, "delta.appendOnly": "false"}}
        owner.commit(table.table_id, 2, [commit_info("SET TBLPROPERTIES", in_commit_timestamp=now_ms(),
                                                     read_version=1), {"metaData": md}])
        info = owner.get_table(table.table_id)
        assert info.accepting_commits and info.status == "ACTIVE"
        assert place.append(owner, [3]) == 3


@in_thread
def test_a_filesystem_table_is_not_taken_over_as_catalog_managed(place: Place) -> None:
    place.write_delta(rows([1]))
    before = place.picture()
    with place.client() as owner, pytest.raises(InvalidArgumentError, match="only be created"):
        take_ownership(place.location, client=owner, protocol="catalogManaged", storage_options=place.options)
    assert place.picture() == before


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


@pytest.mark.slow_on_s3  # 9-15 s on S3
@in_thread
def test_eight_concurrent_creators_one_wins(place: Place) -> None:
    with place.client() as owner:
        won, lost = _race(place.location, owner, place.options)
        _assert_one_winner(place.location, owner, won, lost, place.options)


@in_thread
def test_creating_over_an_existing_table_changes_nothing(place: Place) -> None:
    with place.client() as owner:
        first = create_table(place.location, SCHEMA, client=owner, storage_options=place.options)
        before = place.picture()
        with pytest.raises(TableAlreadyExistsError):
            create_table(place.location, SCHEMA, client=owner, storage_options=place.options)
    assert place.picture() == before
    assert place.registered() == [first.table_id]


@in_thread
def test_lost_first_put_forgets_the_registration(place: Place) -> None:
    """A filesystem writer publishes version 0 between registration and the put: the creator's proposal is dropped."""
    rival = b'{"commitInfo":{"timestamp":1}}\n'
    before = place.picture()

    class Racing(CommitOwnerClient):
        def register_table(self, *args: Any, **kwargs: Any):  # type: ignore[override]
            info = super().register_table(*args, **kwargs)
            place.log.put_if_absent(delta_file_name(0), rival)
            return info

    with Racing(place.app.endpoint) as racing, pytest.raises(TableAlreadyExistsError):
        create_table(place.location, SCHEMA, client=racing, storage_options=place.options)
    assert place.log.read(delta_file_name(0)) == rival
    assert place.picture()[0] == before[0]  # the registration is forgotten: the store is as it was
    with place.client() as owner, pytest.raises(TableNotFoundError):
        owner.get_table(location=place.location)
