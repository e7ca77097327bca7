"""Bad input to the lifecycle: a clear error, and nothing changed on storage or in the owner's database.

On every backend (SQLite/PostgreSQL x local disk/S3), with the owner in this process: each refusal is checked
against a picture of every row of the owner's store and every file under the table's location.
"""

from __future__ import annotations

from typing import Any

import pytest

from client import CommitOwnerClient
from client.contract.errors import (
    InvalidArgumentError,
    NotADeltaTableError,
    OwnershipProposalLostError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TableOwnedElsewhereError,
    VersionMismatchError,
)
from client.contract.layout import delta_file_name
from client.lifecycle import create_table, release_ownership, take_ownership
from client.storage import LogStorage
from tests.lifecycle.helpers import SCHEMA, rows
from tests.lifecycle.matrix import Place, in_thread


@in_thread
def test_not_a_delta_table(place: Place) -> None:
    place.write("data.parquet", b"PAR1")
    before = place.picture()
    with place.client() as owner, pytest.raises(NotADeltaTableError, match="not a Delta table") as e:
        take_ownership(place.location, client=owner, storage_options=place.options)
    assert e.value.http_status == 400
    assert place.picture() == before and place.registered() == []


@in_thread
def test_table_with_another_owner(place: Place) -> None:
    place.write_delta(rows([1]))
    with place.client() as owner:
        other = take_ownership(place.location, client=owner, storage_options=place.options)
        before = place.picture()
        with pytest.raises(TableOwnedElsewhereError, match="already owned") as e:
            take_ownership(place.location, client=owner, protocol="coordinatedCommits-preview",
                           storage_options=place.options)
    assert e.value.http_status == 409
    assert place.picture() == before and place.registered() == [other.table_id]


@in_thread
def test_current_version_not_matching_the_log(place: Place) -> None:
    place.write_delta(rows([1]))
    place.write_delta(rows([2]), mode="append")
    before = place.picture()
    with place.client() as owner, pytest.raises(VersionMismatchError, match="at version 1, not 0") as e:
        take_ownership(place.location, client=owner, current_version=0, storage_options=place.options)
    assert e.value.http_status == 400 and e.value.latest_table_version == 1
    assert place.picture() == before and place.registered() == []


@in_thread
def test_owner_conf_with_a_secret_looking_key(place: Place) -> None:
    place.write_delta(rows([1]))
    new = place.child("new")
    before = place.picture()
    with place.client() as owner:
        for conf in ({"token": "abc"}, {"db_password": "x"}, {"clientSecret": "s"},
                     {"endpoint2": "https://u:p@host/"}):
            with pytest.raises(InvalidArgumentError, match="secret|credentials") as e:
                take_ownership(place.location, client=owner, owner_conf=conf, storage_options=place.options)
            assert e.value.http_status == 400, conf
            with pytest.raises(InvalidArgumentError, match="secret|credentials"):
                create_table(new.location, SCHEMA, client=owner, owner_conf=conf, storage_options=place.options)
    assert place.picture() == before and place.registered() == []
    assert new.files() == {} and new.registered() == []


@pytest.mark.parametrize("kwargs", [
    {"schema": {"type": "array"}},
    {"partition_columns": ["nope"]},
    {"properties": {"delta.managedCommit.commitOwner": "someone"}},
    {"protocol": "managed-commit-dev"},
    {"commit_dir": "_elsewhere"},
], ids=["schema", "partition", "owner-property", "protocol", "folder"])
@in_thread
def test_bad_create_arguments(place: Place, kwargs: dict[str, Any]) -> None:
    args = {"schema": SCHEMA, **kwargs}
    before = place.picture()
    with place.client() as owner, pytest.raises(InvalidArgumentError):
        create_table(place.location, args.pop("schema"), client=owner, storage_options=place.options, **args)
    assert place.picture() == before and before[1] == {} and place.registered() == []


@in_thread
def test_ownership_put_lost_to_a_filesystem_writer_is_retryable_and_forgotten(place: Place) -> None:
    place.write_delta(rows([1]))
    before = place.picture()

    class Racing(CommitOwnerClient):
        """Registers, then lets delta-rs (a real filesystem writer) publish version 1 before our put."""

        def register_table(self, *args: Any, **kwargs: Any):  # type: ignore[override]
            info = super().register_table(*args, **kwargs)
            place.write_delta(rows([2]), mode="append")
            return info

    with Racing(place.app.endpoint) as racing, pytest.raises(OwnershipProposalLostError) as e:
        take_ownership(place.location, client=racing, storage_options=place.options)
    assert (e.value.retryable, e.value.conflict) == (True, True)
    log = LogStorage(place.location, place.options)
    assert "managedCommit" not in log.read(delta_file_name(1)).decode()
    with place.client() as owner:
        with pytest.raises(TableNotFoundError):
            owner.get_table(location=place.location)
        assert place.picture()[0] == before[0]  # the proposal is forgotten: the store is as it was
        retried = take_ownership(place.location, client=owner, storage_options=place.options)  # the retry asked for
    assert retried.version == 2


@in_thread
def test_registering_at_a_version_the_log_does_not_have_is_refused_by_the_owner(place: Place) -> None:
    """The owner itself checks currentVersion against the log (a caller that bypasses the client)."""
    place.write_delta(rows([1]))
    empty = place.child("nothing-here")
    before = place.picture()
    with place.client() as owner:
        for bad in (-1, 3):
            with pytest.raises((InvalidArgumentError, TableAlreadyExistsError)) as e:
                owner.register_table(place.location, current_version=bad)
            assert 400 <= e.value.http_status < 500
        with pytest.raises(InvalidArgumentError):
            owner.register_table(empty.location, current_version=0)
    assert place.picture() == before and place.registered() == [] and empty.registered() == []


@in_thread
def test_a_published_ownership_is_never_forgotten(place: Place) -> None:
    with place.client() as owner:
        table = create_table(place.location, SCHEMA, client=owner, storage_options=place.options)
        before = place.picture()
        with pytest.raises(InvalidArgumentError, match="published") as e:
            owner.forget_table(table.table_id)
        assert e.value.code == "OWNERSHIP_PUBLISHED"
        assert owner.get_table(table.table_id).table_id == table.table_id
        with pytest.raises(TableNotFoundError):
            owner.forget_table("00000000-0000-4000-8000-000000000000")
    assert place.picture() == before


@in_thread
def test_releasing_a_table_without_owner_is_refused(place: Place) -> None:
    place.write_delta(rows([1]))
    before = place.picture()
    with place.client() as owner, pytest.raises(InvalidArgumentError, match="no commit owner"):
        release_ownership(place.location, client=owner, storage_options=place.options)
    assert place.picture() == before


@in_thread
def test_a_dead_proposal_does_not_block_the_next_take_over(place: Place) -> None:
    """A proposer registered at 0, lost version 1 to delta-rs and died before asking to forget."""
    place.write_delta(rows([1]))
    with place.client() as owner:
        dead = owner.register_table(place.location, current_version=0)
        place.write_delta(rows([2]), mode="append")
        owned = take_ownership(place.location, client=owner, storage_options=place.options)
    assert owned.version == 2 and owned.table_id != dead.table_id
    assert place.registered() == [owned.table_id]


@in_thread
def test_a_live_proposal_is_not_taken_away(place: Place) -> None:
    """A registration whose first commit is not published yet may still land: a second proposer is refused."""
    place.write_delta(rows([1]))
    with place.client() as owner:
        live = owner.register_table(place.location, current_version=0)
        before = place.picture()
        with pytest.raises(TableAlreadyExistsError):
            take_ownership(place.location, client=owner, storage_options=place.options)
    assert place.picture() == before and place.registered() == [live.table_id]
