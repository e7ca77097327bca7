"""Bad input to the lifecycle: a clear error, and nothing changed on storage or in the owner's database."""

from __future__ import annotations

from typing import Any

import pytest
from deltalake import write_deltalake

from client import CommitOwnerClient
from client.errors import (
    InvalidArgumentError,
    NotADeltaTableError,
    OwnershipProposalLostError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TableOwnedElsewhereError,
    VersionMismatchError,
)
from client.lifecycle import create_table, release_ownership, take_ownership
from client.storage import LogStorage

from .helpers import SCHEMA, rows, tree


def _registered(owner: CommitOwnerClient, path: str) -> list[str]:
    loc = f"file://{path}"
    return [t.table_id for t in owner.list_tables() if t.location == loc]


def test_not_a_delta_table(tmp_path, owner) -> None:
    path = tmp_path / "plain"
    path.mkdir()
    (path / "data.parquet").write_bytes(b"PAR1")
    before = tree(str(path))
    with pytest.raises(NotADeltaTableError, match="not a Delta table") as e:
        take_ownership(str(path), client=owner)
    assert e.value.http_status == 400
    assert tree(str(path)) == before and _registered(owner, str(path)) == []


def test_table_with_another_owner(tmp_path, owner) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([1]))
    other = take_ownership(path, client=owner)
    before = tree(path)
    with pytest.raises(TableOwnedElsewhereError, match="already owned") as e:
        take_ownership(path, client=owner, protocol="coordinatedCommits-preview")
    assert e.value.http_status == 409
    assert tree(path) == before and _registered(owner, path) == [other.table_id]


def test_current_version_not_matching_the_log(tmp_path, owner) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([1]))
    write_deltalake(path, rows([2]), mode="append")
    before = tree(path)
    with pytest.raises(VersionMismatchError, match="at version 1, not 0") as e:
        take_ownership(path, client=owner, current_version=0)
    assert e.value.http_status == 400 and e.value.latest_table_version == 1
    assert tree(path) == before and _registered(owner, path) == []


@pytest.mark.parametrize("conf", [{"token": "abc"}, {"db_password": "x"}, {"clientSecret": "s"},
                                  {"endpoint2": "https://u:p@host/"}])
def test_owner_conf_with_a_secret_looking_key(tmp_path, owner, conf: dict[str, str]) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([1]))
    before = tree(path)
    with pytest.raises(InvalidArgumentError, match="secret|credentials") as e:
        take_ownership(path, client=owner, owner_conf=conf)
    assert e.value.http_status == 400
    with pytest.raises(InvalidArgumentError):
        create_table(str(tmp_path / "new"), SCHEMA, client=owner, owner_conf=conf)
    assert tree(path) == before and _registered(owner, path) == []
    assert not (tmp_path / "new").exists() and _registered(owner, str(tmp_path / "new")) == []


@pytest.mark.parametrize("kwargs", [
    {"schema": {"type": "array"}},
    {"partition_columns": ["nope"]},
    {"properties": {"delta.managedCommit.commitOwner": "someone"}},
    {"protocol": "managed-commit-dev"},
    {"commit_dir": "_elsewhere"},
])
def test_bad_create_arguments(tmp_path, owner, kwargs: dict[str, Any]) -> None:
    path = tmp_path / "new"
    args = {"schema": SCHEMA, **kwargs}
    with pytest.raises(InvalidArgumentError):
        create_table(str(path), args.pop("schema"), client=owner, **args)
    assert not path.exists() and _registered(owner, str(path)) == []


def test_ownership_put_lost_to_a_filesystem_writer_is_retryable_and_forgotten(tmp_path, owner) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([1]))

    class Racing(CommitOwnerClient):
        """Registers, then lets delta-rs (a real filesystem writer) publish version 1 before our put."""

        def register_table(self, *args: Any, **kwargs: Any):  # type: ignore[override]
            info = super().register_table(*args, **kwargs)
            write_deltalake(path, rows([2]), mode="append")
            return info

    with Racing(owner.endpoint) as racing, pytest.raises(OwnershipProposalLostError) as e:
        take_ownership(path, client=racing)
    assert (e.value.retryable, e.value.conflict) == (True, True)
    assert "managedCommit" not in LogStorage(path).read(f"{1:020d}.json").decode()
    with pytest.raises(TableNotFoundError):
        owner.get_table(location=f"file://{path}")
    retried = take_ownership(path, client=owner)  # the retry the error asks for
    assert retried.version == 2


def test_registering_at_a_version_the_log_does_not_have_is_refused_by_the_owner(tmp_path, owner) -> None:
    """The owner itself checks currentVersion against the log (a caller that bypasses the client)."""
    path = str(tmp_path / "t")
    write_deltalake(path, rows([1]))
    before = tree(path)
    for bad in (-1, 3):
        with pytest.raises((InvalidArgumentError, TableAlreadyExistsError)) as e:
            owner.register_table(f"file://{path}", current_version=bad)
        assert 400 <= e.value.http_status < 500
    with pytest.raises(InvalidArgumentError):
        owner.register_table(f"file://{tmp_path}/nothing-here", current_version=0)
    assert tree(path) == before and _registered(owner, path) == []


def test_a_published_ownership_is_never_forgotten(tmp_path, owner) -> None:
    path = str(tmp_path / "t")
    table = create_table(path, SCHEMA, client=owner)
    with pytest.raises(InvalidArgumentError, match="published") as e:
        owner.forget_table(table.table_id)
    assert e.value.code == "OWNERSHIP_PUBLISHED"
    assert owner.get_table(table.table_id).table_id == table.table_id
    with pytest.raises(TableNotFoundError):
        owner.forget_table("00000000-0000-4000-8000-000000000000")


def test_releasing_a_table_without_owner_is_refused(tmp_path, owner) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([1]))
    before = tree(path)
    with pytest.raises(InvalidArgumentError, match="no commit owner"):
        release_ownership(path, client=owner)
    assert tree(path) == before


def test_a_dead_proposal_does_not_block_the_next_take_over(tmp_path, owner) -> None:
    """A proposer registered at 0, lost version 1 to delta-rs and died before asking to forget."""
    path = str(tmp_path / "t")
    write_deltalake(path, rows([1]))
    dead = owner.register_table(f"file://{path}", current_version=0)
    write_deltalake(path, rows([2]), mode="append")
    owned = take_ownership(path, client=owner)
    assert owned.version == 2 and owned.table_id != dead.table_id
    assert _registered(owner, path) == [owned.table_id]


def test_a_live_proposal_is_not_taken_away(tmp_path, owner) -> None:
    """A registration whose first commit is not published yet may still land: a second proposer is refused."""
    path = str(tmp_path / "t")
    write_deltalake(path, rows([1]))
    live = owner.register_table(f"file://{path}", current_version=0)
    before = tree(path)
    with pytest.raises(TableAlreadyExistsError):
        take_ownership(path, client=owner)
    assert tree(path) == before and _registered(owner, path) == [live.table_id]
