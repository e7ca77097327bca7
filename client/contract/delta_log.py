"""Delta log facts the lifecycle and the snapshot reader share: property generations and actions.

File names, commit folders and locations live in :mod:`client.layout`.

Standard library only. Nothing here touches storage or the network.

Property generations (which names a table carries, see docs/lifecycle.md):

* ``managedCommit`` (the default): the RFC's names, writer feature ``managedCommit``, folder ``_commits``.
* ``coordinatedCommits-preview``: delta-spark 3.3 / 4.x names, writer features ``coordinatedCommits-preview`` and
  ``vacuumProtocolCheck`` (also a reader feature, reader version 3); folder ``_staged_commits`` for Delta >= 4.0.
* ``managed-commit-dev``: delta-spark 3.2's test-only names; recognised when reading, never written.
* ``catalogManaged``: catalog-managed tables (Unity Catalog's API, Sail, delta-spark >= 4.0.1): reader+writer
  feature ``catalogManaged`` (reader 3 / writer 7, with ``inCommitTimestamp`` and ``vacuumProtocolCheck``),
  property ``delta.feature.catalogManaged=supported`` and the table id in ``io.unitycatalog.tableId``
  (``ucTableId`` before); folder ``_staged_commits``. The table names no endpoint: the engine finds its
  catalog by its own configuration, so readers and writers are handed the owner's client. Created, never
  taken over (Delta enables the feature only when a table is created).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from client.contract.delta_schema import SchemaError, parse_schema, top_level_types
from client.contract.errors import InvalidArgumentError
from client.contract.layout import COMMITS_DIR, STAGED_COMMITS_DIR

ProtocolName = Literal["managedCommit", "coordinatedCommits-preview", "catalogManaged"]

ICT_FEATURE = "inCommitTimestamp"
ICT_ENABLE = "delta.enableInCommitTimestamps"
ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"
ICT_PROPERTIES = (ICT_ENABLE, ICT_ENABLEMENT_VERSION, ICT_ENABLEMENT_TIMESTAMP)

#: The value written in the owner property: the name Delta clients look a commit-owner builder up by.
DEFAULT_OWNER_NAME = "commit-owner"


@dataclass(frozen=True)
class Generation:
    """One generation of owner property names and the table features that go with it."""

    name: str
    writer_feature: str
    #: The property whose presence names the owner. Its value is the owner's name, or, for a generation
    #: without owner conf (catalogManaged), the table id itself.
    owner_key: str
    owner_conf_key: str | None
    table_conf_key: str | None
    extra_writer_features: tuple[str, ...] = ()
    reader_features: tuple[str, ...] = ()
    default_commit_dir: str = COMMITS_DIR
    writable: bool = True
    #: Older names of ``owner_key``, recognised when reading.
    legacy_owner_keys: tuple[str, ...] = ()
    #: Properties written beside the owner key (feature switches).
    feature_properties: tuple[tuple[str, str], ...] = ()
    #: Whether take_ownership may move an existing table into this generation.
    takes_over: bool = True

    @property
    def property_keys(self) -> tuple[str, ...]:
        """Every table property this generation owns (removed on release, refused from callers)."""
        keys = (self.owner_key, *self.legacy_owner_keys, self.owner_conf_key, self.table_conf_key,
                *(k for k, _ in self.feature_properties))
        return tuple(k for k in keys if k)


MANAGED_COMMIT = Generation(
    name="managedCommit",
    writer_feature="managedCommit",
    owner_key="delta.managedCommit.commitOwner",
    owner_conf_key="delta.managedCommit.commitOwnerConf",
    table_conf_key="delta.managedCommit.tableConf",
)
COORDINATED_COMMITS_PREVIEW = Generation(
    name="coordinatedCommits-preview",
    writer_feature="coordinatedCommits-preview",
    owner_key="delta.coordinatedCommits.commitCoordinator-preview",
    owner_conf_key="delta.coordinatedCommits.commitCoordinatorConf-preview",
    table_conf_key="delta.coordinatedCommits.tableConf-preview",
    extra_writer_features=("vacuumProtocolCheck",),
    reader_features=("vacuumProtocolCheck",),
    default_commit_dir=STAGED_COMMITS_DIR,
)
MANAGED_COMMITS_DEV = Generation(
    name="managed-commit-dev",
    writer_feature="managed-commit-dev",
    owner_key="delta.managedCommits.commitOwner-dev",
    owner_conf_key="delta.managedCommits.commitOwnerConf-dev",
    table_conf_key="delta.managedCommits.tableConf-dev",
    writable=False,
)
CATALOG_MANAGED = Generation(
    name="catalogManaged",
    writer_feature="catalogManaged",
    owner_key="io.unitycatalog.tableId",
    owner_conf_key=None,
    table_conf_key=None,
    extra_writer_features=("vacuumProtocolCheck",),
    reader_features=("catalogManaged", "vacuumProtocolCheck"),
    default_commit_dir=STAGED_COMMITS_DIR,
    legacy_owner_keys=("ucTableId",),
    feature_properties=(("delta.feature.catalogManaged", "supported"),),
    takes_over=False,
)
GENERATIONS: tuple[Generation, ...] = (MANAGED_COMMIT, COORDINATED_COMMITS_PREVIEW, MANAGED_COMMITS_DEV,
                                       CATALOG_MANAGED)
#: The table property holding a catalog-managed table's id (the Unity Catalog API's name for it).
TABLE_ID_PROPERTY = CATALOG_MANAGED.owner_key
#: Every name of that property, the older ``ucTableId`` included.
TABLE_ID_PROPERTIES = (CATALOG_MANAGED.owner_key, *CATALOG_MANAGED.legacy_owner_keys)

# Legacy protocol versions imply these features; a writer-version-7 protocol must list them explicitly.
_LEGACY_WRITER_FEATURES = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}


def generation(protocol: str) -> Generation:
    """The writable generation called ``protocol``. Raises InvalidArgumentError for other names."""
    for g in GENERATIONS:
        if g.name == protocol and g.writable:
            return g
    names = ", ".join(g.name for g in GENERATIONS if g.writable)
    raise InvalidArgumentError(f"unknown protocol {protocol!r}: use one of {names}")


def _owner_value(g: Generation, configuration: Mapping[str, str]) -> str | None:
    for key in (g.owner_key, *g.legacy_owner_keys):
        if configuration.get(key):
            return configuration[key]
    return None


def owner_generation(configuration: Mapping[str, str]) -> Generation | None:
    """The generation whose owner property a table's configuration carries, or None for a filesystem table."""
    for g in GENERATIONS:
        if _owner_value(g, configuration):
            return g
    return None


@dataclass(frozen=True)
class OwnerRef:
    """Who owns a table, as its properties say."""

    generation: Generation
    owner_name: str
    owner_conf: dict[str, str]
    table_conf: dict[str, str]

    @property
    def endpoint(self) -> str | None:
        """The owner's endpoint the table names; None for catalog-managed tables (they name none)."""
        return self.owner_conf.get("endpoint")

    @property
    def table_id(self) -> str | None:
        return self.table_conf.get("tableId")


def owner_ref(configuration: Mapping[str, str]) -> OwnerRef | None:
    """Parse the owner properties of a table, or None when it has none. Raises InvalidArgumentError on bad JSON."""
    g = owner_generation(configuration)
    if g is None:
        return None
    value = _owner_value(g, configuration) or ""
    if g.owner_conf_key is None or g.table_conf_key is None:
        return OwnerRef(generation=g, owner_name=value, owner_conf={}, table_conf={"tableId": value})
    return OwnerRef(
        generation=g,
        owner_name=value,
        owner_conf=_json_map(configuration.get(g.owner_conf_key), g.owner_conf_key),
        table_conf=_json_map(configuration.get(g.table_conf_key), g.table_conf_key),
    )


def _json_map(raw: str | None, key: str) -> dict[str, str]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise InvalidArgumentError(f"table property {key} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"table property {key} must be a JSON object")
    return {str(k): str(v) for k, v in value.items()}


# -- secrets never go into table properties ------------------------------------------------------------

_SECRET_KEY = re.compile(r"token|passw|pwd|secret|credential|apikey|accesskey|privatekey|bearer|session", re.I)


def check_no_secrets(conf: Mapping[str, str]) -> None:
    """Refuse owner conf that looks like it carries a secret (anyone who reads the table sees it).

    Raises InvalidArgumentError naming the offending key (never its value).
    """
    for key, value in conf.items():
        flat = re.sub(r"[^a-z0-9]", "", str(key).lower())
        if _SECRET_KEY.search(flat):
            raise InvalidArgumentError(
                f"owner conf key {key!r} looks like a secret; table properties are readable by anyone "
                "who can read the table, pass credentials to the client instead"
            )
        if re.match(r"^[a-z][a-z0-9+.-]*://[^/@\s]+:[^/@\s]*@", str(value), re.I):
            raise InvalidArgumentError(f"owner conf value of {key!r} embeds credentials in a URL")


# -- actions -----------------------------------------------------------------------------------------------


def parse_actions(data: bytes) -> list[dict[str, Any]]:
    """Parse an NDJSON commit file into its actions. Raises InvalidArgumentError on a malformed line."""
    actions = []
    for n, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as e:
            raise InvalidArgumentError(f"line {n} of a commit file is not JSON: {e}") from None
        if not isinstance(action, dict) or len(action) != 1:
            raise InvalidArgumentError(f"line {n} of a commit file is not one action")
        actions.append(action)
    return actions


def now_ms() -> int:
    return int(time.time() * 1000)


def commit_info(operation: str, *, in_commit_timestamp: int, read_version: int | None,
                parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A first-line ``commitInfo`` carrying ``inCommitTimestamp``."""
    info: dict[str, Any] = {
        "inCommitTimestamp": in_commit_timestamp,
        "timestamp": in_commit_timestamp,
        "operation": operation,
        "operationParameters": dict(parameters or {}),
        "isBlindAppend": False,
        "txnId": str(uuid.uuid4()),
        "engineInfo": "delta-commit-owner-client",
    }
    if read_version is not None:
        info["readVersion"] = read_version
    return {"commitInfo": info}


def table_features(protocol: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """``(reader_features, writer_features)`` a protocol supports, legacy versions expanded to feature names."""
    writer = set(protocol.get("writerFeatures") or ())
    reader = set(protocol.get("readerFeatures") or ())
    wv = int(protocol.get("minWriterVersion", 1))
    rv = int(protocol.get("minReaderVersion", 1))
    if wv < 7:
        for v, feats in _LEGACY_WRITER_FEATURES.items():
            if wv >= v:
                writer.update(feats)
    if rv == 2:
        reader.add("columnMapping")
    return reader, writer


def protocol_with(protocol: Mapping[str, Any], *, add_writer: Iterable[str] = (), add_reader: Iterable[str] = (),
                  drop: Iterable[str] = ()) -> dict[str, Any]:
    """A table-features protocol (writer version 7) with features added or dropped.

    Reader features are only listed (reader version 3) when the table needs any; otherwise the reader version
    stays what it was (1, or 2 for column mapping without reader features).
    """
    reader, writer = table_features(protocol)
    add_reader = set(add_reader)
    writer |= set(add_writer) | add_reader
    reader |= add_reader
    for f in drop:
        writer.discard(f)
        reader.discard(f)
    rv = int(protocol.get("minReaderVersion", 1))
    out: dict[str, Any] = {"minReaderVersion": rv, "minWriterVersion": 7}
    if rv == 3 or (reader - {"columnMapping"}):
        out["minReaderVersion"] = 3
        out["readerFeatures"] = sorted(reader)
    elif rv == 2 and "columnMapping" not in reader:
        out["minReaderVersion"] = 1
    out["writerFeatures"] = sorted(writer)
    return _legacy_form(out)


def _legacy_form(protocol: dict[str, Any]) -> dict[str, Any]:
    """Write a features protocol as a legacy (reader <= 2, writer <= 6) one when it means exactly that.

    Readers that predate table features (and delta-rs writers) are happiest with the legacy form; a table
    handed back by release_ownership returns to the protocol it had before ownership.
    """
    if protocol.get("readerFeatures"):
        return protocol
    writer = set(protocol.get("writerFeatures") or ())
    implied: set[str] = set()
    if not writer:
        return {"minReaderVersion": protocol["minReaderVersion"], "minWriterVersion": 1}
    for v in sorted(_LEGACY_WRITER_FEATURES):
        implied |= set(_LEGACY_WRITER_FEATURES[v])
        if implied == writer:
            return {"minReaderVersion": protocol["minReaderVersion"], "minWriterVersion": v}
    return protocol


def new_table_protocol(gen: Generation) -> dict[str, Any]:
    """The protocol version 0 of a new table of ``gen`` carries: table features (writer 7), in-commit timestamps,
    the generation's own features (catalogManaged: reader 3 / writer 7 with ``vacuumProtocolCheck``)."""
    return protocol_with({"minReaderVersion": 1, "minWriterVersion": 7},
                         add_writer=(ICT_FEATURE, gen.writer_feature, *gen.extra_writer_features),
                         add_reader=gen.reader_features)


def owner_properties(gen: Generation, *, owner_name: str, owner_conf: Mapping[str, str],
                     table_conf: Mapping[str, str]) -> dict[str, str]:
    """The table properties that name the owner, in ``gen``'s names (for catalogManaged: the feature switch and
    the table id from ``table_conf``; the endpoint is not written)."""
    if gen.owner_conf_key is None or gen.table_conf_key is None:
        if not table_conf.get("tableId"):
            raise InvalidArgumentError(f"a {gen.name} table needs its table id (table_conf tableId)")
        return {**dict(gen.feature_properties), gen.owner_key: str(table_conf["tableId"])}
    return {
        gen.owner_key: owner_name,
        gen.owner_conf_key: json.dumps(dict(owner_conf), separators=(",", ":"), sort_keys=True),
        gen.table_conf_key: json.dumps(dict(table_conf), separators=(",", ":"), sort_keys=True),
    }


def without_owner_properties(configuration: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``configuration`` without the owner properties of any generation."""
    keys = owner_property_keys()
    return {k: v for k, v in configuration.items() if k not in keys}


def owner_property_keys() -> frozenset[str]:
    """Every property any generation uses to name an owner: set by the owner's lifecycle, never by callers."""
    return frozenset(k for g in GENERATIONS for k in g.property_keys)


def new_metadata(schema: Mapping[str, Any] | str, partition_columns: Iterable[str],
                 configuration: Mapping[str, str], *, name: str | None = None,
                 description: str | None = None, created_time: int | None = None) -> dict[str, Any]:
    """A ``metaData`` action for a new table. ``schema`` is a Delta struct type (dict or its JSON string).

    Raises InvalidArgumentError when the schema does not follow Delta's format (the owner would refuse it) or a
    partition column is not in it.
    """
    try:
        schema_obj = parse_schema(schema)
    except SchemaError as e:
        raise InvalidArgumentError(f"schema {e}") from None
    names = set(top_level_types(schema_obj))
    parts = list(partition_columns)
    missing = [c for c in parts if c not in names]
    if missing:
        raise InvalidArgumentError(f"partition columns not in the schema: {missing}")
    md: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "name": name,
        "description": description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema_obj, separators=(",", ":")),
        "partitionColumns": parts,
        "configuration": {str(k): str(v) for k, v in configuration.items()},
        "createdTime": created_time if created_time is not None else now_ms(),
    }
    return {"metaData": md}
