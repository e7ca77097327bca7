"""One commit path for every writer of this project: two file writers (Spark's, pyarrow's), one committer.

:func:`write_and_commit` does, for any :class:`FileWriter`:

1. check the mode and the partition columns' types, load the table (or create it through
   :func:`client.lifecycle.create_table`, waiting for a concurrent creator's version 0 instead when it lost),
   and check the data's schema and partition columns against the table's: all before any file is written;
2. let the writer write its data files into a fresh ``batch-<hex>/`` folder and describe them
   (:class:`client.actions.DataFile`, statistics included);
3. commit ``commitInfo`` (in-commit timestamp first) + ``remove`` (overwrite) + ``add`` through the owner.
   A blind append that loses the race for a version is rebased onto the new latest version and sent again;
   an overwrite that loses is re-checked against the new snapshot and fails with :class:`TableChangedError`
   when the table's files or schema changed in between. The new snapshot is the old one moved forward by the
   winners' commits the refusal carried (:func:`rebase`), and the writer waits a jittered, growing moment
   (:mod:`client.backoff`) before it tries again, so that a crowd of losers does not come back at once;
4. whenever the write ends without a commit, the writer deletes its folder, so a failed write changes nothing
   (after CommitStateUnknownError the files are kept: the commit may have landed and reference them);
5. with ``wait_published`` (the default) the writer returns once its version is published as
   ``_delta_log/<v>.json`` (:func:`client.publish.await_published`), so that any Delta reader sees the write.

Standard library only at import time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

from client.actions import ENGINE_INFO, DataFile, Mode, add_action, commit_info, next_in_commit_timestamp, remove_action
from client.backoff import conflict_wait
from client.contract.errors import (
    CommitStateUnknownError,
    CommitVersionConflictError,
    NotADeltaTableError,
    TableAlreadyExistsError,
    TableChangedError,
)
from client.contract.layout import new_batch_folder, normalize_location
from client.http import CommitOwnerClient, named_endpoint
from client.models import carried_commits
from client.publish import await_published

log = logging.getLogger(__name__)

MAX_REBASES = 100
CREATE_WAIT_SECONDS = 30.0
# Partition values are written as folder names and partitionValues strings; these types round-trip exactly.
PARTITION_TYPES = {"string", "byte", "short", "integer", "long", "date", "boolean"}


@dataclass(frozen=True)
class WriteResult:
    """What one write committed."""

    location: str
    version: int
    num_files: int
    num_records: int
    rebases: int
    #: The table's published version when the write returned (>= ``version`` once the write waited for its
    #: publication: every Delta reader sees it); None when the writer did not wait (``wait_published=False``).
    published_version: int | None = None


@dataclass(frozen=True)
class WriteOptions:
    """The options of every ``write_table`` (:func:`client.write_table`, :func:`client.spark.write_table`): their
    one home, names and defaults.

    The public functions keep them as keyword arguments (documented in docs/python-writes.md, shown by
    ``help()``, checked by type checkers) and hand them on with :meth:`collect`; a test pins each public
    signature's keyword-only parameters to these fields.
    """

    mode: Mode = "append"
    partition_by: Sequence[str] | None = None
    client: CommitOwnerClient | None = None
    endpoint: str | None = None
    token: str | None = None
    protocol: str = "managedCommit"
    full_name: str | None = None
    storage_options: Mapping[str, Any] | None = None
    before_commit: Callable[[int], None] | None = None
    wait_published: bool = True

    @classmethod
    def collect(cls, arguments: Mapping[str, Any]) -> WriteOptions:
        """The options among a ``write_table``'s arguments (its ``locals()``)."""
        return cls(**{f.name: arguments[f.name] for f in fields(cls)})


class FileWriter(Protocol):
    """Writes one write's data files; the committer decides the folder and when to throw it away."""

    def write(self, folder: str, partition_by: Sequence[str]) -> list[DataFile]:
        """Write the data under ``<table>/<folder>/``, partitioned by ``partition_by``; describe every file
        (path relative to the table root, URI-encoded, starting with ``<folder>/``)."""
        ...

    def discard(self, folder: str) -> None:
        """Delete ``<table>/<folder>/`` and everything under it."""
        ...


def check_mode(mode: str) -> None:
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', got {mode!r}")


def check_partition_types(schema_json: Mapping[str, Any], partition_by: Sequence[str]) -> None:
    """Raise ValueError when a partition column is missing or of a type partition values cannot carry."""
    types = dict(field_types(schema_json))
    for c in partition_by:
        if c not in types:
            raise ValueError(f"partition column {c!r} is not a column of the data ({sorted(types)})")
        if types[c] not in PARTITION_TYPES:
            raise ValueError(f"partition column {c!r} has type {types[c]}; supported: {sorted(PARTITION_TYPES)}")


def field_types(schema_json: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(f["name"], f["type"]) for f in schema_json.get("fields", [])]


def owner_client(client: CommitOwnerClient | None, endpoint: str | None, token: str | None) -> CommitOwnerClient | None:
    if client is not None:
        return client
    return CommitOwnerClient(endpoint, token=token) if named_endpoint(endpoint) else None


def load(location: str, client: CommitOwnerClient | None, storage_options: Mapping[str, Any] | None,
         version: int | None = None) -> Any:
    from client.snapshot import load_snapshot

    return load_snapshot(location, version, client=client, storage_options=storage_options)


def await_table(location: str, client: CommitOwnerClient, storage_options: Mapping[str, Any] | None,
                deadline: float = CREATE_WAIT_SECONDS) -> Any:
    """Load a table another creator registered, waiting (bounded) for its version 0 to be published.

    Raises NotADeltaTableError when version 0 did not appear within ``deadline`` seconds.
    """
    started = time.monotonic()
    delay = 0.02
    while True:
        try:
            return load(location, client, storage_options)
        except NotADeltaTableError as e:
            if time.monotonic() - started > deadline:
                raise NotADeltaTableError(
                    f"{location}: another writer registered this table but its version 0 did not appear within "
                    f"{deadline:.0f}s; check that creator, or forget the registration"
                ) from e
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def check_compatible(snap: Any, schema_json: Mapping[str, Any], partition_by: Sequence[str] | None,
                     *, during_race: bool = False) -> None:
    """Raise ValueError (TableChangedError during a race) when the data does not fit the table.

    Columns must match by name, order and type (nullability is not compared); ``partition_by``, when given,
    must be the table's partition columns.
    """
    table_fields = field_types(snap.schema)
    mine = field_types(schema_json)
    problem = None
    if table_fields != mine:
        problem = f"DataFrame columns {mine} differ from the table's {table_fields}"
    elif partition_by is not None and list(partition_by) != snap.partition_columns:
        problem = f"partition_by {list(partition_by)} differs from the table's {snap.partition_columns}"
    if problem is None:
        return
    if during_race:
        raise TableChangedError(f"{snap.location} changed during the write: {problem}; nothing was committed",
                                latest_table_version=snap.version)
    raise ValueError(f"{snap.location}: {problem} (schema changes are not supported by write_table)")


def rebase(snap: Any, conflict: CommitVersionConflictError, version: int, owner: CommitOwnerClient,
           storage_options: Mapping[str, Any] | None) -> Any:
    """The table after the commits that beat ``version``: ``snap`` moved forward by the commits the refusal
    carried (their files read from storage, no question to the owner), else the table loaded again."""
    from client.snapshot import advance_snapshot

    carried = carried_commits(conflict, version)
    if carried is not None:
        moved = advance_snapshot(snap, carried, storage_options=storage_options)
        if moved is not None:
            return moved
    return load(snap.location, owner, storage_options)


@dataclass(frozen=True)
class Target:
    """An owned table opened for a write: its snapshot, the owner's client and the table's id at that owner."""

    snap: Any
    owner: CommitOwnerClient
    table_id: str


def open_target(location: str, schema_json: Mapping[str, Any], options: WriteOptions) -> Target:
    """Load the owned table at ``location`` (creating it when it is not a Delta table yet, or waiting for a
    concurrent creator's version 0) and check the data's schema and partition columns against it: step 1 of
    :func:`write_and_commit`, before any file is written. Raises ValueError."""
    from client.lifecycle import create_table
    from client.snapshot import owner_client_for

    partition_by = list(options.partition_by or [])
    check_partition_types(schema_json, partition_by)
    location = normalize_location(location)
    storage_options = options.storage_options
    owner = owner_client(options.client, options.endpoint, options.token)
    try:
        snap = load(location, owner, storage_options)
    except NotADeltaTableError:
        if owner is None:  # nothing named an owner: the one rule's default (client.http.resolve_endpoint)
            owner = CommitOwnerClient(token=options.token)
        try:
            create_table(location, schema_json, partition_by, client=owner, protocol=options.protocol,
                         storage_options=storage_options, full_name=options.full_name)
            snap = load(location, owner, storage_options)
        except TableAlreadyExistsError:
            # A concurrent writer registered first; write into its table once its version 0 is visible.
            snap = await_table(location, owner, storage_options)
    check_compatible(snap, schema_json, partition_by if partition_by else None)
    if snap.owner is None or snap.owner.table_id is None:
        raise ValueError(f"{location} is not owned by a commit owner; take ownership first (client.lifecycle)")
    if owner is None:
        owner = owner_client_for(snap.owner, snap.location, token=options.token)
    return Target(snap, owner, snap.owner.table_id)


def commit_actions(snap: Any, mode: Mode, files: Sequence[DataFile], adds: list[dict[str, Any]], *,
                   engine_info: str) -> list[dict[str, Any]]:
    """The actions of a write's commit on top of ``snap``: commitInfo (the next in-commit timestamp first),
    a ``remove`` of every file of ``snap`` for an overwrite, then ``adds``."""
    ict = next_in_commit_timestamp(snap.in_commit_timestamp)
    removes = [
        remove_action(a["path"], partition_values=a.get("partitionValues") or {}, size=a.get("size"),
                      deletion_timestamp=ict)
        for a in snap.files
    ] if mode == "overwrite" else []
    num_records = sum(int(f.stats.get("numRecords", 0)) for f in files)
    return [
        commit_info(in_commit_timestamp=ict, mode=mode, read_version=snap.version,
                    partition_by=snap.partition_columns, num_files=len(files), num_records=num_records,
                    engine_info=engine_info),
        *removes,
        *adds,
    ]


def rebased(snap: Any, conflict: CommitVersionConflictError, version: int, owner: CommitOwnerClient,
            options: WriteOptions, schema_json: Mapping[str, Any], planned_removes: set[str]) -> Any:
    """The table after the commits that beat this write's ``version``, checked: raises TableChangedError when
    the data no longer fits it or when an overwrite would now remove other files than it planned."""
    location, partition_by = snap.location, snap.partition_columns
    snap = rebase(snap, conflict, version, owner, options.storage_options)
    check_compatible(snap, schema_json, partition_by, during_race=True)
    if options.mode == "overwrite" and {a["path"] for a in snap.files} != planned_removes:
        raise TableChangedError(
            f"overwrite of {location} lost the race for version {version} to a commit that changed the "
            f"table's files (now at version {snap.version}); nothing was committed, re-run the overwrite",
            latest_table_version=snap.version,
        ) from None
    return snap


def write_and_commit(
    writer: FileWriter,
    location: str,
    schema_json: Mapping[str, Any],
    options: WriteOptions,
    *,
    engine_info: str = ENGINE_INFO,
) -> WriteResult:
    """Check, write (through ``writer``) and commit one write to the owned table at ``location``.

    ``writer`` writes the data files (nothing is written before the checks passed). ``schema_json`` is the
    data's Delta struct type. ``options`` are the public ``write_table``'s
    (see :func:`client.write.write_table`). Raises ValueError for a bad mode, partition column, or a schema
    that differs from the table's (nothing written); TableChangedError when an overwrite lost to a commit that
    changed the table; the owner's errors (CommitFailedError and family); CommitStateUnknownError.
    """
    mode = options.mode
    check_mode(mode)
    target = open_target(location, schema_json, options)
    snap, owner, table_id = target.snap, target.owner, target.table_id
    location = snap.location

    folder = new_batch_folder()
    committed = False
    try:
        files = writer.write(folder, list(snap.partition_columns))
        adds = [add_action(f) for f in files]
        num_records = sum(int(f.stats.get("numRecords", 0)) for f in files)
        planned_removes = {a["path"] for a in snap.files} if mode == "overwrite" else set()
        rebases = 0
        while True:
            actions = commit_actions(snap, mode, files, adds, engine_info=engine_info)
            version = snap.version + 1
            if options.before_commit is not None:
                options.before_commit(version)
            try:
                owner.commit(table_id, version, actions)
            except CommitVersionConflictError as e:
                rebases += 1
                if rebases > MAX_REBASES:
                    raise
                snap = rebased(snap, e, version, owner, options, schema_json, planned_removes)
                time.sleep(conflict_wait(rebases, e.retry_slot))
                continue
            except CommitStateUnknownError:
                committed = True  # it may have landed: keep the files it would reference
                raise
            committed = True
            published = await_published(owner, table_id, version, location=location) if options.wait_published \
                else None
            return WriteResult(location, version, len(files), num_records, rebases, published)
    finally:
        if not committed:
            try:
                writer.discard(folder)
            except Exception:  # noqa: BLE001 - never hide the error that ended the write
                log.warning("could not delete the uncommitted files under %s/%s", location, folder, exc_info=True)


__all__ = [
    "FileWriter",
    "Target",
    "commit_actions",
    "open_target",
    "rebased",
    "PARTITION_TYPES",
    "WriteOptions",
    "WriteResult",
    "check_compatible",
    "check_mode",
    "check_partition_types",
    "rebase",
    "write_and_commit",
]
