"""The snapshot reader on an owned table: a delta-rs checkpoint, unbackfilled commits, and a backfill landing
between listing and asking the owner (injected through ``after_listing``)."""

from __future__ import annotations

import os

import pytest
from deltalake import DeltaTable, write_deltalake

from client.errors import VersionNotFoundError
from client.lifecycle import take_ownership
from client.snapshot import Listing, latest_version, load_snapshot

from .helpers import append_through_owner, delta_rs_files, delta_rs_ids, rows


@pytest.fixture
def owned_table(tmp_path, owner):
    """delta-rs: versions 0..2 and a checkpoint at 2; owner: ownership at 3, commits 4..7, published through 5."""
    path = str(tmp_path / "t")
    write_deltalake(path, rows([1]))
    write_deltalake(path, rows([2]), mode="append")
    write_deltalake(path, rows([3]), mode="overwrite")
    DeltaTable(path).create_checkpoint()
    for v in (0, 1):  # only the checkpoint can rebuild versions <= 2
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    owned = take_ownership(path, client=owner)
    for i in range(4, 8):
        assert append_through_owner(owner, path, [10 * i]) == i
    owner.backfill_to_version(owned.table_id, 5)
    return path, owned


def test_unbackfilled_commits_on_top_of_a_checkpoint(owned_table, owner) -> None:
    path, owned = owned_table
    page = owner.get_commits(owned.table_id)
    assert [c.version for c in page.commits] == [6, 7] and page.latest_table_version == 7
    snap = load_snapshot(path, client=owner)
    assert snap.version == 7 and snap.unbackfilled_versions == [6, 7] and snap.relists == 0
    assert load_snapshot(path, ask_owner=False).version == 5
    owner.backfill_to_version(owned.table_id, 7)
    assert snap.file_paths == delta_rs_files(path, 7)
    assert delta_rs_ids(path, 7) == [3, 40, 50, 60, 70]


@pytest.mark.parametrize("backfill_to", [6, 7])
def test_backfill_between_listing_and_asking_is_detected_and_relisted(owned_table, owner, backfill_to) -> None:
    path, owned = owned_table
    seen: list[int] = []

    def backfill_after_first_listing(attempt: int, listing: Listing) -> None:
        seen.append(listing.max_version)
        if attempt == 0:
            owner.backfill_to_version(owned.table_id, backfill_to)

    snap = load_snapshot(path, client=owner, after_listing=backfill_after_first_listing)
    assert seen == [5, backfill_to]
    assert snap.version == 7 and snap.relists == 1
    assert snap.unbackfilled_versions == ([7] if backfill_to == 6 else [])
    owner.backfill_to_version(owned.table_id, 7)
    assert snap.file_paths == delta_rs_files(path, 7)


def test_latest_version_is_exact_and_old_versions_come_from_published_files(owned_table, owner) -> None:
    path, owned = owned_table
    assert latest_version(path, client=owner) == 7
    assert load_snapshot(path, 6, client=owner).version == 6
    assert load_snapshot(path, 2, client=owner).file_paths == delta_rs_files(path, 2)
    with pytest.raises(VersionNotFoundError):
        load_snapshot(path, 8, client=owner)


def test_reader_builds_its_own_client_from_the_owner_conf(owned_table) -> None:
    path, _owned = owned_table
    assert latest_version(path) == 7
