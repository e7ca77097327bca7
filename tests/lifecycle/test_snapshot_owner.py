"""The snapshot reader on an owned table: a delta-rs checkpoint, unbackfilled commits, and a backfill landing
between listing and asking the owner (injected through ``after_listing``).

On every backend (SQLite/PostgreSQL x local disk/S3), with the owner in this process.
"""

from __future__ import annotations

import pytest

from client.contract.errors import VersionNotFoundError
from client.contract.layout import delta_file_name
from client.lifecycle import OwnedTable, take_ownership
from client.snapshot import Listing, latest_version, load_snapshot
from tests.lifecycle.helpers import rows
from tests.lifecycle.matrix import Place, in_thread


def _owned_table(place: Place) -> OwnedTable:
    """delta-rs: versions 0..2 and a checkpoint at 2; owner: ownership at 3, commits 4..7, published through 5."""
    place.write_delta(rows([1]))
    place.write_delta(rows([2]), mode="append")
    place.write_delta(rows([3]), mode="overwrite")
    place.delta_table().create_checkpoint()
    for v in (0, 1):  # only the checkpoint can rebuild versions <= 2
        place.backend.remove(f"{place.location}/_delta_log/{delta_file_name(v)}")
    with place.client() as owner:
        owned = take_ownership(place.location, client=owner, storage_options=place.options)
        for i in range(4, 8):
            assert place.append(owner, [10 * i]) == i
        owner.backfill_to_version(owned.table_id, 5)
    return owned


@pytest.mark.slow_on_s3
@in_thread
def test_unbackfilled_commits_on_top_of_a_checkpoint(place: Place) -> None:
    owned = _owned_table(place)
    opts = place.options
    with place.client() as owner:
        page = owner.get_commits(owned.table_id)
        assert [c.version for c in page.commits] == [6, 7] and page.latest_table_version == 7
        snap = load_snapshot(place.location, client=owner, storage_options=opts)
        assert snap.version == 7 and snap.unbackfilled_versions == [6, 7] and snap.relists == 0
        assert load_snapshot(place.location, ask_owner=False, storage_options=opts).version == 5
        owner.backfill_to_version(owned.table_id, 7)
    assert snap.file_paths == place.delta_rs_files(7)
    assert place.ids(7) == [3, 40, 50, 60, 70]


@pytest.mark.slow_on_s3
@pytest.mark.parametrize("backfill_to", [6, 7])
@in_thread
def test_backfill_between_listing_and_asking_is_detected_and_relisted(place: Place, backfill_to: int) -> None:
    owned = _owned_table(place)
    seen: list[int] = []
    with place.client() as owner:

        def backfill_after_first_listing(attempt: int, listing: Listing) -> None:
            seen.append(listing.max_version)
            if attempt == 0:
                owner.backfill_to_version(owned.table_id, backfill_to)

        snap = load_snapshot(place.location, client=owner, storage_options=place.options,
                             after_listing=backfill_after_first_listing)
        assert seen == [5, backfill_to]
        assert snap.version == 7 and snap.relists == 1
        assert snap.unbackfilled_versions == ([7] if backfill_to == 6 else [])
        owner.backfill_to_version(owned.table_id, 7)
    assert snap.file_paths == place.delta_rs_files(7)


@pytest.mark.slow_on_s3
@in_thread
def test_latest_version_is_exact_and_old_versions_come_from_published_files(place: Place) -> None:
    _owned_table(place)
    opts = place.options
    with place.client() as owner:
        assert latest_version(place.location, client=owner, storage_options=opts) == 7
        assert load_snapshot(place.location, 6, client=owner, storage_options=opts).version == 6
        assert load_snapshot(place.location, 2, client=owner, storage_options=opts).file_paths == \
            place.delta_rs_files(2)
        with pytest.raises(VersionNotFoundError):
            load_snapshot(place.location, 8, client=owner, storage_options=opts)


@pytest.mark.slow_on_s3
@in_thread
def test_reader_builds_its_own_client_from_the_owner_conf(place: Place) -> None:
    _owned_table(place)
    assert latest_version(place.location, storage_options=place.options) == 7
