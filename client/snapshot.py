"""A small snapshot reader for owned (and plain filesystem) Delta tables.

How a snapshot is resolved (docs/lifecycle.md, "The snapshot reader"):

1. List ``_delta_log``: published commits ``<v>.json``, complete checkpoints, ``_last_checkpoint``.
2. Call ``after_listing(attempt, listing)`` if given. This is the place where, in tests, a backfill is made to
   land between listing and asking the owner; in production it is None.
3. Replay the published log; if its properties name an owner, ask the owner for unbackfilled commits above
   the highest listed version.
4. A gap means a backfill landed between 1 and 3: the first commit returned is above highest listed + 1, or
   the owner's latest version is above the highest version known. Then list again (up to ``max_relists``).
   Versions both listed and returned by the owner are read from the published file (it wins).
5. Apply the owner's commits, reading each staged file. A staged file that vanished (backfilled and cleaned
   up meanwhile) also means list again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from client.checkpoint import read_checkpoint_parts
from client.contract.delta_log import OwnerRef, owner_ref, parse_actions
from client.contract.errors import (
    IncompleteLogError,
    InvalidArgumentError,
    NotADeltaTableError,
    SnapshotRaceError,
    VersionNotFoundError,
)
from client.contract.layout import (
    COMMIT_DIRS,
    LAST_CHECKPOINT,
    LOG_DIR,
    checkpoint_file_names,
    delta_file_name,
    parse_checkpoint_file,
    parse_delta_file,
)
from client.http import ENDPOINT_ENV, READ_CONNECT_DEADLINE, CommitOwnerClient
from client.models import Commit, CommitsPage
from client.storage import LogStorage

__all__ = ["Listing", "advance_snapshot", "complete_checkpoints", "Snapshot", "latest_version", "load_snapshot",
           "owner_client_for", "AfterListing"]


@dataclass(frozen=True)
class Listing:
    """What one listing of ``_delta_log`` found."""

    deltas: dict[int, str]
    checkpoints: dict[int, list[str]]
    last_checkpoint: dict[str, Any] | None

    @property
    def max_version(self) -> int:
        """Highest version with a published commit or checkpoint, -1 when none."""
        return max([*self.deltas, *self.checkpoints, -1])


AfterListing = Callable[[int, Listing], None]


@dataclass
class Snapshot:
    """The state of a table at one version."""

    location: str
    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    files: list[dict[str, Any]]
    txns: dict[str, dict[str, Any]] = field(default_factory=dict)
    domain_metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    in_commit_timestamp: int | None = None
    #: ``commitInfo.timestamp`` of the snapshot's version, when it has one.
    commit_timestamp: int | None = None
    owner: OwnerRef | None = None
    #: The owner's latestTableVersion when it was asked, else None.
    owner_latest_version: int | None = None
    #: Versions read from staged files (not yet published when read).
    unbackfilled_versions: list[int] = field(default_factory=list)
    relists: int = 0

    @property
    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = json.loads(self.metadata.get("schemaString") or "{}")
        return schema

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.metadata.get("configuration") or {})

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.get("partitionColumns") or [])

    @property
    def file_paths(self) -> list[str]:
        return sorted(a["path"] for a in self.files)


@dataclass
class LogState:
    """A table's reconciled actions at ``version``: the one home of the log's replay rules (the snapshot
    reader and the checkpoint writer both replay through it). ``removes`` keeps the tombstones a checkpoint
    carries; ``ict``/``timestamp`` are those of the last version applied."""

    version: int = -1
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    adds: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    removes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    txns: dict[str, dict[str, Any]] = field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)
    ict: int | None = None
    timestamp: int | None = None

    def apply(self, version: int, actions: list[dict[str, Any]]) -> None:
        self.ict = None
        self.timestamp = None
        for action in actions:
            (kind, body), = action.items()
            if kind == "add":
                key = _file_key(body)
                self.removes.pop(key, None)
                self.adds[key] = body
            elif kind == "remove":
                key = _file_key(body)
                self.adds.pop(key, None)
                self.removes[key] = body
            elif kind == "metaData":
                self.metadata = body
            elif kind == "protocol":
                self.protocol = body
            elif kind == "txn":
                self.txns[body["appId"]] = body
            elif kind == "domainMetadata":
                if body.get("removed"):
                    self.domains.pop(body["domain"], None)
                else:
                    self.domains[body["domain"]] = body
            elif kind == "commitInfo":
                if body.get("inCommitTimestamp") is not None:
                    self.ict = int(body["inCommitTimestamp"])
                if body.get("timestamp") is not None:
                    self.timestamp = int(body["timestamp"])
        self.version = version


def _file_key(body: Mapping[str, Any]) -> tuple[str, str]:
    dv = body.get("deletionVector") or {}
    dv_id = ""
    if dv:
        dv_id = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}"
        if dv.get("offset") is not None:
            dv_id += f"@{dv['offset']}"
    return str(body["path"]), dv_id


def complete_checkpoints(names: Iterable[str]) -> dict[int, list[str]]:
    """The classic checkpoints among the file names of ``_delta_log`` that have all their parts: version -> names."""
    parts: dict[tuple[int, int], dict[int, str]] = {}
    for name in names:
        cp = parse_checkpoint_file(name)
        if cp is not None:
            parts.setdefault((cp[0], cp[2]), {})[cp[1]] = name
    checkpoints: dict[int, list[str]] = {}
    for (v, n), got in parts.items():
        if len(got) == n and v not in checkpoints:
            checkpoints[v] = [got[i] for i in sorted(got)]
    return checkpoints


def list_log(storage: LogStorage) -> Listing:
    """One listing of ``_delta_log``: published commits, complete classic checkpoints, ``_last_checkpoint``."""
    deltas: dict[int, str] = {}
    names: list[str] = []
    has_hint = False
    for entry in storage.list():
        if entry.name == LAST_CHECKPOINT:
            has_hint = True
            continue
        v = parse_delta_file(entry.name)
        if v is not None:
            deltas[v] = entry.name
        else:
            names.append(entry.name)
    checkpoints = complete_checkpoints(names)
    hint = None
    if has_hint:
        try:
            hint = json.loads(storage.read(LAST_CHECKPOINT))
        except (FileNotFoundError, ValueError):
            hint = None  # a torn or vanished hint is only a hint
    return Listing(deltas=deltas, checkpoints=checkpoints, last_checkpoint=hint)


def _checkpoint_candidates(listing: Listing, version: int) -> list[tuple[int, list[str]]]:
    """Complete checkpoints at or below ``version``, newest first; ``_last_checkpoint`` adds one the listing missed."""
    found = {v: names for v, names in listing.checkpoints.items() if v <= version}
    hint = listing.last_checkpoint or {}
    hv = hint.get("version")
    if isinstance(hv, int) and 0 <= hv <= version and hv not in found:
        n = int(hint.get("parts") or 1)
        found[hv] = checkpoint_file_names(hv, n)
    return sorted(found.items(), reverse=True)


def _replay_published(storage: LogStorage, listing: Listing, version: int) -> LogState:
    """Replay the published log up to ``version``, from the newest usable checkpoint at or below it."""
    for cp, names in _checkpoint_candidates(listing, version):
        if all(v in listing.deltas for v in range(cp + 1, version + 1)):
            try:
                actions = read_checkpoint_parts(storage.read(n) for n in names)
            except FileNotFoundError:
                continue  # a hint naming a deleted checkpoint: try an older one
            state = LogState()
            state.apply(cp, actions)
            return _replay_deltas(storage, listing, state, cp + 1, version)
    missing = [v for v in range(0, version + 1) if v not in listing.deltas]
    if missing:
        raise IncompleteLogError(f"{storage.location}: no checkpoint covers version {missing[0]} and "
                                 f"_delta_log/{delta_file_name(missing[0])} is missing")
    return _replay_deltas(storage, listing, LogState(), 0, version)


def _replay_deltas(storage: LogStorage, listing: Listing, state: LogState, start: int, end: int) -> LogState:
    for v in range(start, end + 1):
        try:
            state.apply(v, parse_actions(storage.read(listing.deltas[v])))
        except FileNotFoundError:
            raise IncompleteLogError(f"{storage.location}: _delta_log/{delta_file_name(v)} vanished while reading") from None
    return state


def _read_staged(storage: LogStorage, commit: Commit) -> bytes:
    path = commit.path
    if "://" in path or path.startswith("/"):
        return storage.read_uri(path)
    if "/" in path:
        prefix = LOG_DIR + "/"
        return storage.read(path[len(prefix):] if path.startswith(prefix) else path)
    for folder in COMMIT_DIRS:
        try:
            return storage.read(f"{folder}/{commit.file_name}")
        except FileNotFoundError:
            continue
    raise FileNotFoundError(commit.file_name)


class _Relist(Exception):
    """Internal: the listing missed a backfill; list again."""


def load_snapshot(
    location: str,
    version: int | None = None,
    *,
    client: CommitOwnerClient | None = None,
    token: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    ask_owner: bool = True,
    after_listing: AfterListing | None = None,
    max_relists: int = 10,
    owner_endpoint: str | None = None,
    connect_deadline: float = READ_CONNECT_DEADLINE,
) -> Snapshot:
    """The table at ``location`` at ``version`` (latest when None), including unbackfilled commits.

    :param client: the owner's client; when None and the table names an owner, one is built (with ``token``)
        for ``owner_endpoint``, else ``$COMMIT_OWNER_ENDPOINT``, else the endpoint in the table's owner conf.
    :param owner_endpoint: the owner's endpoint when it is not (or no longer) the one the table's properties
        name, e.g. after the owner moved.
    :param connect_deadline: seconds to keep trying to connect to that owner before UnavailableError (which
        names the endpoint and where it came from). Catalog-managed tables name no endpoint: they need
        ``client`` or ``owner_endpoint`` (else InvalidArgumentError).
    :param ask_owner: False reads only the published log (what an owner-unaware reader sees).
    :param after_listing: called with ``(attempt, listing)`` after every listing, before the owner is asked.
    Raises NotADeltaTableError, VersionNotFoundError, IncompleteLogError, SnapshotRaceError (retryable) when
    listings kept missing backfills, CheckpointUnreadableError (pyarrow missing), and the owner's errors.
    """
    storage = LogStorage(location, storage_options)
    for attempt in range(max_relists + 1):
        listing = list_log(storage)
        if after_listing is not None:
            after_listing(attempt, listing)
        top = listing.max_version
        if top < 0:
            raise NotADeltaTableError(f"{storage.location} is not a Delta table: _delta_log holds no commit")
        try:
            snap = _resolve(storage, listing, version, client, token, ask_owner, owner_endpoint, connect_deadline)
        except _Relist:
            continue
        snap.relists = attempt
        return snap
    raise SnapshotRaceError(f"{storage.location}: the log kept changing under {max_relists} listings; try again")


def owner_client_for(ref: OwnerRef, location: str, *, owner_endpoint: str | None = None, token: str | None = None,
                     connect_deadline: float = READ_CONNECT_DEADLINE) -> CommitOwnerClient:
    """A client of the owner a table names: ``owner_endpoint``, else ``$COMMIT_OWNER_ENDPOINT``, else the table's
    owner conf. Its unreachable error says which of the three the endpoint came from.

    Raises InvalidArgumentError when none of them gives an endpoint.
    """
    prop = ref.generation.owner_conf_key
    override = f"override with owner_endpoint= or ${ENDPOINT_ENV}"
    if owner_endpoint:
        endpoint, origin = owner_endpoint, "endpoint from owner_endpoint="
    elif os.environ.get(ENDPOINT_ENV):
        endpoint, origin = os.environ[ENDPOINT_ENV], f"endpoint from ${ENDPOINT_ENV}"
    elif ref.endpoint:
        endpoint, origin = ref.endpoint, f"endpoint from table property {prop} of {location}; {override}"
    else:
        raise InvalidArgumentError(f"{location} is a {ref.generation.name} table ({ref.generation.owner_key}="
                                   f"{ref.table_id}): it names no owner endpoint, so pass client= for the owner "
                                   f"that manages it, or owner_endpoint= / ${ENDPOINT_ENV}")
    return CommitOwnerClient(endpoint, token=token, connect_deadline=connect_deadline, origin=origin)


def _resolve(storage: LogStorage, listing: Listing, version: int | None, client: CommitOwnerClient | None,
             token: str | None, ask_owner: bool, owner_endpoint: str | None = None,
             connect_deadline: float = READ_CONNECT_DEADLINE) -> Snapshot:
    top = listing.max_version
    state, ref = _published(storage, listing, version)
    if ref is not None and ask_owner and (version is None or version > top):
        if ref.table_id is None:
            raise IncompleteLogError(f"{storage.location}: the owner properties carry no tableId")
        owner = client or owner_client_for(ref, storage.location, owner_endpoint=owner_endpoint, token=token,
                                           connect_deadline=connect_deadline)
        page = owner.get_commits(ref.table_id, start_version=top + 1, end_version=version)
        return _with_owner(storage, listing, state, page, version)
    if version is not None and version > top:
        raise VersionNotFoundError(f"version {version} of {storage.location} does not exist (latest published {top})")
    return _snapshot(storage.location, state, None, [])


def _published(storage: LogStorage, listing: Listing, version: int | None) -> tuple[LogState, OwnerRef | None]:
    """The table as its published log has it at ``version`` (its newest listed when None), and its owner."""
    top = listing.max_version
    state = _replay_published(storage, listing, top if version is None else min(version, top))
    if state.metadata is None or state.protocol is None:
        raise IncompleteLogError(f"{storage.location}: the log has no metaData or protocol at version {state.version}")
    return state, owner_ref(state.metadata.get("configuration") or {})


def _with_owner(storage: LogStorage, listing: Listing, state: LogState, page: CommitsPage,
                version: int | None) -> Snapshot:
    """``state`` (the published log) moved forward by the owner's unpublished commits of ``page``, up to
    ``version`` (the owner's latest when None). Raises _Relist when the listing missed a publication."""
    top = listing.max_version
    owner_latest = page.latest_table_version
    staged: list[int] = []
    expected = top + 1
    commits = [c for c in page.commits if c.version > top]  # listed (published) versions win
    for c in commits:
        if c.version != expected:
            raise _Relist()
        expected += 1
    known = expected - 1
    wanted = owner_latest if version is None else version
    if wanted > known:
        if owner_latest > known:
            raise _Relist()
        raise VersionNotFoundError(f"version {version} of {storage.location} does not exist (latest {known})")
    for c in commits:
        if c.version > wanted:
            break
        try:
            data = _read_staged(storage, c)
        except FileNotFoundError:
            raise _Relist() from None  # backfilled and cleaned up since the owner answered
        state.apply(c.version, parse_actions(data))
        staged.append(c.version)
    return _snapshot(storage.location, state, owner_latest, staged)


def load_snapshots(
    locations: Sequence[str],
    *,
    client: CommitOwnerClient | None = None,
    token: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    owner_endpoint: str | None = None,
    max_relists: int = 10,
    after_listing: Callable[[int, list[Listing]], None] | None = None,
) -> list[Snapshot]:
    """The latest snapshot of each table at ``locations``, all as of ONE instant of their owner: a multi-table
    transaction is in all of them or in none (``POST /api/v1/snapshots``; docs/transactions.md).

    The tables must share one owner (``client``; else ``owner_endpoint``, ``$COMMIT_OWNER_ENDPOINT`` or the
    endpoint the first owned table names). A table no owner manages is read from its published log alone.
    ``after_listing`` is called with ``(attempt, listings)`` after every round of listings. Raises what
    :func:`load_snapshot` raises.
    """
    storages = [LogStorage(loc, storage_options) for loc in locations]
    for attempt in range(max_relists + 1):
        listings = [list_log(s) for s in storages]
        if after_listing is not None:
            after_listing(attempt, listings)
        published = []
        for s, listing in zip(storages, listings, strict=True):
            if listing.max_version < 0:
                raise NotADeltaTableError(f"{s.location} is not a Delta table: _delta_log holds no commit")
            published.append(_published(s, listing, None))
        owned = [(i, ref) for i, (_, ref) in enumerate(published) if ref is not None]
        for i, ref in owned:
            if ref.table_id is None:
                raise IncompleteLogError(f"{storages[i].location}: the owner properties carry no tableId")
        pages: dict[str, CommitsPage] = {}
        if owned:
            first, first_ref = owned[0]
            owner = client or owner_client_for(first_ref, storages[first].location, owner_endpoint=owner_endpoint,
                                               token=token)
            pages = owner.snapshots([str(r.table_id) for _, r in owned])
        try:
            out = []
            for s, listing, (state, table_ref) in zip(storages, listings, published, strict=True):
                if table_ref is None:
                    out.append(_snapshot(s.location, state, None, []))
                else:
                    out.append(_with_owner(s, listing, state, pages[str(table_ref.table_id)], None))
        except _Relist:
            continue
        for snap in out:
            snap.relists = attempt
        return out
    raise SnapshotRaceError(f"the logs of {len(locations)} tables kept changing under {max_relists} listings; try again")


def _snapshot(location: str, state: LogState, owner_latest: int | None, staged: list[int]) -> Snapshot:
    # The properties at the resolved version decide the owner (a release commit removes it).
    final_md = state.metadata or {}
    return Snapshot(
        location=location,
        version=state.version,
        protocol=dict(state.protocol or {}),
        metadata=dict(final_md),
        files=list(state.adds.values()),
        txns=state.txns,
        domain_metadata=state.domains,
        in_commit_timestamp=state.ict,
        commit_timestamp=state.timestamp,
        owner=owner_ref(final_md.get("configuration") or {}),
        owner_latest_version=owner_latest,
        unbackfilled_versions=staged,
    )


def advance_snapshot(snap: Snapshot, commits: Sequence[Commit], *,
                     storage_options: Mapping[str, Any] | None = None) -> Snapshot | None:
    """``snap`` moved forward by ``commits`` (the versions right after ``snap.version``, ascending, e.g. those a
    version conflict carried), reading each commit's file: its staged file, else its published ``<v>.json``.

    Replays with the same rules as :func:`load_snapshot`. Returns None when the commits do not follow
    ``snap.version`` or a file cannot be read; the caller then loads the table again.
    """
    if not commits or [c.version for c in commits] != list(range(snap.version + 1, snap.version + 1 + len(commits))):
        return None
    storage = LogStorage(snap.location, storage_options)
    state = LogState(version=snap.version, protocol=dict(snap.protocol), metadata=dict(snap.metadata),
                     adds={_file_key(a): a for a in snap.files}, txns=dict(snap.txns),
                     domains=dict(snap.domain_metadata), ict=snap.in_commit_timestamp, timestamp=snap.commit_timestamp)
    for c in commits:
        try:
            data = _read_staged(storage, c)
        except FileNotFoundError:
            try:
                data = storage.read(delta_file_name(c.version))
            except FileNotFoundError:
                return None
        state.apply(c.version, parse_actions(data))
    return _snapshot(snap.location, state, commits[-1].version,
                     [*snap.unbackfilled_versions, *(c.version for c in commits)])


def latest_version(location: str, **kwargs: Any) -> int:
    """The exact latest version of the table (published or ratified by its owner).

    Takes the keyword arguments of :func:`load_snapshot` and raises what it raises.
    """
    return load_snapshot(location, None, **kwargs).version
