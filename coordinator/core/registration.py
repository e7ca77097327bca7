"""Registration guards and "forget a proposal": the owner's side of creating and taking over tables.

* Registration at ``currentVersion`` r is checked against the log: r = -1 needs a location without
  published commits; r >= 0 needs ``<r>.json`` (or a checkpoint of r) to be the newest version.
* A registration whose first commit (``<r+1>.json``) never landed may be forgotten, so that the next
  attempt can register again. Once that file is published naming this table id, the owner never
  forgets (or refuses) the table: it is owned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.contract.delta_log import owner_ref, parse_actions
from client.contract.errors import (
    CommitOwnerError,
    InvalidArgumentError,
    NotADeltaTableError,
    TableAlreadyExistsError,
    VersionMismatchError,
)
from client.contract.layout import delta_file, log_dir, parse_versioned_file
from coordinator.storage import StorageBackend

if TYPE_CHECKING:
    from coordinator.store import OwnershipStore

async def newest_version(storage: StorageBackend, location: str) -> tuple[int, set[int]]:
    """The newest version of the log at ``location`` (-1 when it has none) and every version seen.

    Raises UnavailableError when storage cannot be read.
    """
    names = await storage.list_names(log_dir(location))
    versions = {v for v in map(parse_versioned_file, names) if v is not None}
    return max(versions, default=-1), versions


async def check_log_matches(storage: StorageBackend, location: str, current_version: int) -> None:
    """Raise unless ``current_version`` is the newest version of the log at ``location``.

    Raises TableAlreadyExistsError (-1 but the log has commits), NotADeltaTableError (no log),
    VersionMismatchError, UnavailableError when storage cannot be read.
    """
    newest, versions = await newest_version(storage, location)
    if current_version == -1:
        if newest >= 0:
            raise TableAlreadyExistsError(f"{location} already holds a Delta table at version {newest}")
        return
    if newest < 0:
        raise NotADeltaTableError(f"{location} is not a Delta table: _delta_log holds no commit")
    if newest != current_version or current_version not in versions:
        raise VersionMismatchError(
            f"currentVersion {current_version} does not match the log of {location}: its newest version is {newest}",
            latest_table_version=newest)


async def first_commit_names(storage: StorageBackend, location: str, version: int, table_id: str) -> bool:
    """Whether ``<version>.json`` is published and its metaData names ``table_id`` as owned by us.

    Raises UnavailableError when storage cannot be read.
    """
    try:
        data = await storage.read(delta_file(location, version))
    except FileNotFoundError:
        return False
    try:
        actions = parse_actions(data)
    except CommitOwnerError:
        return False
    for action in actions:
        md = action.get("metaData")
        if isinstance(md, dict):
            try:
                ref = owner_ref(md.get("configuration") or {})
            except InvalidArgumentError:
                return False
            return ref is not None and ref.table_id == table_id
    return False


async def log_used_as_owned(storage: StorageBackend, location: str, base_version: int, latest_backfilled: int,
                            table_id: str) -> bool:
    """Whether readers use the log at ``location`` as owned by table ``table_id``: ``<base>.json`` names it, or
    (once log cleanup removed ``<base>.json``) a complete checkpoint of a version ``base < c <= latest_backfilled``
    is published: cleanup only removes files below such a checkpoint and never the checkpoint, and one is
    only ever written by replaying the log from ``<base>.json`` on, so a log whose ``<base>.json`` was never
    written has none (docs/decisions.md, "Log cleanup").

    Raises UnavailableError when storage cannot be read.
    """
    from client.snapshot import complete_checkpoints

    if await first_commit_names(storage, location, base_version, table_id):
        return True
    if latest_backfilled <= base_version:
        return False
    names = await storage.list_names(log_dir(location))
    return any(base_version < v <= latest_backfilled for v in complete_checkpoints(names))


async def clear_dead_proposal(store: OwnershipStore, storage: StorageBackend, location: str) -> bool:
    """Forget the registration holding ``location`` if its first commit can never land. Returns whether it did.

    Dead means: no commit was ratified through the owner and ``<base>.json`` is published by someone
    else (a proposer lost its put-if-absent and stopped before asking to forget). A registration whose
    first commit is not published yet may be live (its put may still come) and is kept.
    Raises UnavailableError when storage cannot be read.
    """
    from client.contract.errors import TableNotFoundError

    try:
        held = await store.find_table(location)
    except TableNotFoundError:
        return True  # forgotten meanwhile: registering again may succeed
    if held.latest_version != held.base_version:
        return False
    published = await storage.exists(delta_file(location, held.base_version))
    if not published or await first_commit_names(storage, location, held.base_version, held.table_id):
        return False
    return await store.forget_registration(held.table_id)
