"""Table lifecycle through the commit owner: create an owned table, take over an existing one, give it back.

The commit points (docs/lifecycle.md):

* create: register at version -1, then publish ``_delta_log/<0>.json`` with put-if-absent.
* take over a filesystem table at version r: register at r, then publish ``<r+1>.json`` with put-if-absent.
  Ownership exists only once that put succeeded; if it lost, the owner is told to forget the proposal.
* release: the commit that drops the owner properties goes through the owner, which ratifies it, stops
  accepting commits for the table and publishes everything through it at once.

Which names the properties use is the ``protocol`` option (see :mod:`client.contract.delta_log`); the staged-commit
folder follows from it unless ``commit_dir`` is given: ``_commits`` for ``managedCommit`` (the RFC, and
Delta 3.3 when it reads ``-preview`` names), ``_staged_commits`` for ``coordinatedCommits-preview``
(Delta >= 4.0 accepts staged files only in that folder) and ``catalogManaged`` (tables of the owner's Unity
Catalog API: give them a ``full_name`` so engines such as Sail find them by ``catalog.schema.table``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from client.contract.delta_log import (
    CATALOG_MANAGED,
    DEFAULT_OWNER_NAME,
    ICT_ENABLE,
    ICT_ENABLEMENT_TIMESTAMP,
    ICT_ENABLEMENT_VERSION,
    ICT_FEATURE,
    ICT_PROPERTIES,
    Generation,
    check_no_secrets,
    commit_info,
    generation,
    new_metadata,
    new_table_protocol,
    now_ms,
    owner_properties,
    owner_property_keys,
    protocol_with,
    without_owner_properties,
)
from client.contract.errors import (
    CommitFailedError,
    CommitOwnerError,
    InvalidArgumentError,
    OwnershipProposalLostError,
    TableAlreadyExistsError,
    TableOwnedElsewhereError,
    UnavailableError,
    VersionMismatchError,
)
from client.contract.layout import check_commit_dir, delta_file_name
from client.http import CommitOwnerClient, encode_actions
from client.snapshot import list_log, load_snapshot
from client.storage import LogStorage

__all__ = ["OwnedTable", "create_table", "take_ownership", "release_ownership", "commit_dir_for"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OwnedTable:
    """A table this owner now owns, as returned by create_table / take_ownership."""

    location: str
    table_id: str
    table_conf: dict[str, str]
    version: int
    protocol: str
    commit_dir: str
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)


def commit_dir_for(protocol: str, commit_dir: str | None = None) -> str:
    """The staged-commit folder for a generation: ``commit_dir`` if given, else the generation's default.

    Raises InvalidArgumentError for an unknown folder or protocol.
    """
    gen = generation(protocol)
    return check_commit_dir(commit_dir or gen.default_commit_dir)


def _owner_conf(client: CommitOwnerClient, extra: Mapping[str, str] | None) -> dict[str, str]:
    conf = {"endpoint": client.endpoint, **{str(k): str(v) for k, v in (extra or {}).items()}}
    check_no_secrets(conf)
    return conf


def _check_user_properties(properties: Mapping[str, str]) -> None:
    bad = sorted(set(properties) & owner_property_keys())
    if bad:
        raise InvalidArgumentError(f"owner properties are set by the owner, not by the caller: {bad}")


def _forget(client: CommitOwnerClient, table_id: str) -> None:
    """Ask the owner to drop a registration whose first put lost. Never masks the caller's error."""
    try:
        client.forget_table(table_id)
    except CommitOwnerError as e:
        log.warning("the owner did not forget the unused registration %s: %s", table_id, e)


def _publish_first(storage: LogStorage, version: int, data: bytes) -> bool:
    """Put-if-absent of the commit that makes ownership real. True if ours landed, False if someone else's did.

    Raises UnavailableError (retryable) when the put failed and left no file: nothing was published.
    Other OSErrors (the outcome cannot be learned) propagate and the registration is kept, since it may be live.
    """
    name = delta_file_name(version)
    try:
        storage.put_if_absent(name, data)
        return True
    except FileExistsError:
        return False
    except OSError as e:
        try:
            return storage.read(name) == data  # a timed-out PUT that did land is ours
        except FileNotFoundError:
            raise UnavailableError(f"could not publish {storage.uri(name)}: {e}") from e


def create_table(
    location: str,
    schema: Mapping[str, Any] | str,
    partition_columns: Iterable[str] = (),
    properties: Mapping[str, str] | None = None,
    *,
    client: CommitOwnerClient,
    protocol: str = "managedCommit",
    commit_dir: str | None = None,
    owner_name: str = DEFAULT_OWNER_NAME,
    owner_conf: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    full_name: str | None = None,
) -> OwnedTable:
    """Create a new table owned by ``client``'s owner: register, then publish version 0 put-if-absent.

    ``schema`` is a Delta struct type (dict or JSON string, e.g. Spark's ``schema.json()``). ``full_name``
    (``catalog.schema.table``, the schema must exist) also lists the table under that name in the owner's
    Unity Catalog API; ``name`` and ``description`` go into the table's ``metaData``.
    Raises InvalidArgumentError (bad schema, protocol, folder, owner properties among ``properties``, a
    secret-looking owner conf key) before anything is written; TableAlreadyExistsError when the location
    already holds a Delta log or another creator won (its registration is then forgotten); UnavailableError
    (retryable) when storage refused the put and nothing was published; the owner's errors.
    """
    gen = generation(protocol)
    folder = commit_dir_for(protocol, commit_dir)
    conf = _owner_conf(client, owner_conf)
    props = {str(k): str(v) for k, v in (properties or {}).items()}
    _check_user_properties(props)
    new_metadata(schema, partition_columns, props)  # validates before anything is registered
    storage = LogStorage(location, storage_options)
    if list_log(storage).max_version >= 0:
        raise TableAlreadyExistsError(f"{storage.location} already holds a Delta table")

    # A catalogManaged table is a MANAGED table of the owner's catalog (its commits are the catalog's); the others
    # are EXTERNAL to it.
    table_type = "MANAGED" if full_name is not None and gen is CATALOG_MANAGED else None
    info = client.register_table(storage.location, current_version=-1, commit_dir=folder, name=full_name,
                                 table_type=table_type)
    ict = now_ms()
    config = {**props, ICT_ENABLE: "true",
              **owner_properties(gen, owner_name=owner_name, owner_conf=conf, table_conf=info.table_conf)}
    actions = [
        commit_info("CREATE TABLE", in_commit_timestamp=ict, read_version=None,
                    parameters={"partitionBy": list(partition_columns), "commitOwner": owner_name}),
        {"protocol": new_table_protocol(gen)},
        new_metadata(schema, partition_columns, config, name=name, description=description, created_time=ict),
    ]
    try:
        published = _publish_first(storage, 0, encode_actions(actions))
    except UnavailableError:
        _forget(client, info.table_id)
        raise
    if not published:
        _forget(client, info.table_id)
        raise TableAlreadyExistsError(f"{storage.location}: another writer created version 0 first")
    return OwnedTable(storage.location, info.table_id, dict(info.table_conf), 0, gen.name, folder,
                      dict(storage_options or {}))


def take_ownership(
    location: str,
    *,
    client: CommitOwnerClient,
    current_version: int | None = None,
    protocol: str = "managedCommit",
    commit_dir: str | None = None,
    owner_name: str = DEFAULT_OWNER_NAME,
    owner_conf: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> OwnedTable:
    """Put an existing filesystem Delta table at version r under this owner by publishing r+1.

    ``current_version``, when given, must be the table's latest version (a guard for scripts).
    Raises NotADeltaTableError, TableOwnedElsewhereError (its properties already name an owner),
    VersionMismatchError, InvalidArgumentError (protocol, a generation that cannot take over, folder, secret-looking owner conf), all before
    anything is written; OwnershipProposalLostError (retryable) when a filesystem writer published r+1
    first (the owner forgets the proposal); UnavailableError (retryable) when storage refused the put and
    nothing was published; the owner's errors (e.g. TableAlreadyExistsError for a live proposal).
    """
    gen = generation(protocol)
    if not gen.takes_over:
        raise InvalidArgumentError(f"a {gen.name} table can only be created (create_table), not taken over")
    folder = commit_dir_for(protocol, commit_dir)
    conf = _owner_conf(client, owner_conf)
    snap = load_snapshot(location, storage_options=storage_options, ask_owner=False)
    if snap.owner is not None:
        raise TableOwnedElsewhereError(
            f"{snap.location} is already owned ({snap.owner.generation.owner_key}={snap.owner.owner_name}, "
            f"endpoint {snap.owner.endpoint}); release it there first")
    if current_version is not None and current_version != snap.version:
        raise VersionMismatchError(f"{snap.location} is at version {snap.version}, not {current_version}",
                                   latest_table_version=snap.version)
    r = snap.version
    info = client.register_table(snap.location, current_version=r, commit_dir=folder)
    ict = max(now_ms(), (snap.in_commit_timestamp or snap.commit_timestamp or 0) + 1)
    config = dict(snap.properties)
    if config.get(ICT_ENABLE) != "true":
        config.update({ICT_ENABLE: "true", ICT_ENABLEMENT_VERSION: str(r + 1), ICT_ENABLEMENT_TIMESTAMP: str(ict)})
    config.update(owner_properties(gen, owner_name=owner_name, owner_conf=conf, table_conf=info.table_conf))
    actions = [
        commit_info("SET COMMIT OWNER", in_commit_timestamp=ict, read_version=r,
                    parameters={"commitOwner": owner_name}),
        {"protocol": protocol_with(snap.protocol,
                                   add_writer=(ICT_FEATURE, gen.writer_feature, *gen.extra_writer_features),
                                   add_reader=gen.reader_features)},
        {"metaData": {**snap.metadata, "configuration": config}},
    ]
    storage = LogStorage(snap.location, storage_options)
    try:
        published = _publish_first(storage, r + 1, encode_actions(actions))
    except UnavailableError:
        _forget(client, info.table_id)
        raise
    if not published:
        _forget(client, info.table_id)
        raise OwnershipProposalLostError(
            f"{snap.location}: another writer published version {r + 1} first; read the table again and retry",
            latest_table_version=r + 1)
    return OwnedTable(snap.location, info.table_id, dict(info.table_conf), r + 1, gen.name, folder,
                      dict(storage_options or {}))


def release_ownership(
    table: OwnedTable | str,
    *,
    client: CommitOwnerClient,
    keep_in_commit_timestamps: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    max_attempts: int = 5,
) -> int:
    """Hand the table back to the filesystem: commit, through the owner, a version without the owner.

    The commit drops the owner properties and the owner's table features; unless
    ``keep_in_commit_timestamps``, it also drops in-commit timestamps, so writers without that feature
    (delta-rs 1.6) can write the table again. Returns the version of that commit, which is published when
    this returns. Retries a lost race (true, true) on a fresh snapshot up to ``max_attempts`` times.
    Raises InvalidArgumentError when the table has no owner, CommitFailedError from the owner.
    """
    location = table.location if isinstance(table, OwnedTable) else table
    options = storage_options if storage_options is not None else (
        table.storage_options if isinstance(table, OwnedTable) else None)
    for attempt in range(1, max_attempts + 1):
        snap = load_snapshot(location, client=client, storage_options=options)
        ref = snap.owner
        if ref is None or ref.table_id is None:
            raise InvalidArgumentError(f"{snap.location} has no commit owner to release")
        if isinstance(table, OwnedTable) and ref.table_id != table.table_id:
            raise TableOwnedElsewhereError(f"{snap.location} is owned by table id {ref.table_id}, not {table.table_id}")
        v = snap.version + 1
        gen: Generation = ref.generation
        drop = [gen.writer_feature]
        config = without_owner_properties(snap.properties)
        if not keep_in_commit_timestamps:
            drop.append(ICT_FEATURE)
            config = {k: val for k, val in config.items() if k not in ICT_PROPERTIES}
        ict = max(now_ms(), (snap.in_commit_timestamp or 0) + 1)
        actions = [
            commit_info("UNSET COMMIT OWNER", in_commit_timestamp=ict, read_version=snap.version,
                        parameters={"commitOwner": ref.owner_name}),
            {"protocol": protocol_with(snap.protocol, drop=drop)},
            {"metaData": {**snap.metadata, "configuration": config}},
        ]
        try:
            client.commit(ref.table_id, v, actions)
        except CommitFailedError as e:
            if e.retryable and e.conflict and attempt < max_attempts:
                continue
            raise
        storage = LogStorage(snap.location, options)
        if not storage.exists(delta_file_name(v)):
            client.backfill_to_version(ref.table_id, v)
        return v
    raise AssertionError("unreachable")  # pragma: no cover
