"""Pure helpers: protocol upgrades and downgrades, owner properties, secrets, folders, put-if-absent."""

from __future__ import annotations

import json
import threading

import pytest

from client.contract.delta_log import (
    CATALOG_MANAGED,
    COORDINATED_COMMITS_PREVIEW,
    MANAGED_COMMIT,
    MANAGED_COMMITS_DEV,
    check_no_secrets,
    owner_properties,
    owner_property_keys,
    owner_ref,
    protocol_with,
    without_owner_properties,
)
from client.contract.errors import InvalidArgumentError
from client.contract.layout import normalize_location
from client.lifecycle import commit_dir_for
from client.storage import LogStorage


def test_legacy_protocol_is_upgraded_with_its_implied_features() -> None:
    p = protocol_with({"minReaderVersion": 1, "minWriterVersion": 2}, add_writer=["inCommitTimestamp", "managedCommit"])
    assert p == {"minReaderVersion": 1, "minWriterVersion": 7,
                 "writerFeatures": ["appendOnly", "inCommitTimestamp", "invariants", "managedCommit"]}


def test_preview_generation_adds_vacuum_protocol_check_as_reader_feature() -> None:
    g = COORDINATED_COMMITS_PREVIEW
    p = protocol_with({"minReaderVersion": 1, "minWriterVersion": 2},
                      add_writer=["inCommitTimestamp", g.writer_feature, *g.extra_writer_features],
                      add_reader=g.reader_features)
    assert p["minReaderVersion"] == 3 and p["readerFeatures"] == ["vacuumProtocolCheck"]
    assert {"coordinatedCommits-preview", "vacuumProtocolCheck", "inCommitTimestamp"} <= set(p["writerFeatures"])


def test_dropping_the_owner_features_returns_to_the_legacy_protocol() -> None:
    owned = protocol_with({"minReaderVersion": 1, "minWriterVersion": 2}, add_writer=["inCommitTimestamp", "managedCommit"])
    assert protocol_with(owned, drop=["managedCommit", "inCommitTimestamp"]) == {"minReaderVersion": 1, "minWriterVersion": 2}
    kept = protocol_with(owned, drop=["managedCommit"])
    assert kept["minWriterVersion"] == 7 and "inCommitTimestamp" in kept["writerFeatures"]


def test_column_mapping_reader_version_2_is_kept() -> None:
    p = protocol_with({"minReaderVersion": 2, "minWriterVersion": 5}, add_writer=["managedCommit"])
    assert p["minReaderVersion"] == 2 and "columnMapping" in p["writerFeatures"]
    assert protocol_with(p, drop=["managedCommit"]) == {"minReaderVersion": 2, "minWriterVersion": 5}


@pytest.mark.parametrize("gen", [MANAGED_COMMIT, COORDINATED_COMMITS_PREVIEW, MANAGED_COMMITS_DEV])
def test_owner_properties_of_every_generation_are_understood(gen) -> None:
    props = owner_properties(gen, owner_name="o", owner_conf={"endpoint": "http://h:1"}, table_conf={"tableId": "t1"})
    ref = owner_ref({"x": "1", **props})
    assert ref is not None and ref.generation == gen and ref.endpoint == "http://h:1" and ref.table_id == "t1"
    assert without_owner_properties({"x": "1", **props}) == {"x": "1"}


# The configuration Sail 0.7.2 writes into version 0 of a table it creates through a Unity catalog.
SAIL_CONFIGURATION = {"delta.feature.catalogManaged": "supported", "delta.enableInCommitTimestamps": "true",
                      "io.unitycatalog.tableId": "1cd9442e-bdf3-4ec5-8b75-5bff5dfc18ce"}


def test_a_catalog_managed_table_names_its_table_id_and_no_endpoint() -> None:
    ref = owner_ref(SAIL_CONFIGURATION)
    assert ref is not None and ref.generation == CATALOG_MANAGED
    assert ref.table_id == "1cd9442e-bdf3-4ec5-8b75-5bff5dfc18ce" and ref.endpoint is None
    assert without_owner_properties(SAIL_CONFIGURATION) == {"delta.enableInCommitTimestamps": "true"}
    legacy = owner_ref({"ucTableId": "t-old"})
    assert legacy is not None and legacy.generation == CATALOG_MANAGED and legacy.table_id == "t-old"
    assert {"io.unitycatalog.tableId", "ucTableId", "delta.feature.catalogManaged"} <= owner_property_keys()


def test_catalog_managed_properties_and_protocol_are_the_ones_sail_writes() -> None:
    props = owner_properties(CATALOG_MANAGED, owner_name="ignored", owner_conf={"endpoint": "http://h:1"},
                             table_conf={"tableId": "t1"})
    assert props == {"delta.feature.catalogManaged": "supported", "io.unitycatalog.tableId": "t1"}
    p = protocol_with({"minReaderVersion": 1, "minWriterVersion": 7},
                      add_writer=("inCommitTimestamp", CATALOG_MANAGED.writer_feature,
                                  *CATALOG_MANAGED.extra_writer_features),
                      add_reader=CATALOG_MANAGED.reader_features)
    assert p == {"minReaderVersion": 3, "minWriterVersion": 7,
                 "readerFeatures": ["catalogManaged", "vacuumProtocolCheck"],
                 "writerFeatures": ["catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"]}
    assert commit_dir_for("catalogManaged") == "_staged_commits"
    with pytest.raises(InvalidArgumentError, match="table id"):
        owner_properties(CATALOG_MANAGED, owner_name="o", owner_conf={}, table_conf={})


def test_bad_owner_conf_json_is_a_clear_error() -> None:
    with pytest.raises(InvalidArgumentError, match="not JSON"):
        owner_ref({MANAGED_COMMIT.owner_key: "o", MANAGED_COMMIT.owner_conf_key: "{nope"})


@pytest.mark.parametrize("key", ["token", "authToken", "password", "db_passwd", "clientSecret", "aws-secret-access-key",
                                 "credentials", "api_key", "accessKey", "sessionToken"])
def test_secret_looking_owner_conf_keys_are_refused(key: str) -> None:
    with pytest.raises(InvalidArgumentError, match=key):
        check_no_secrets({"endpoint": "http://h", key: "x"})


def test_ordinary_owner_conf_and_credential_urls() -> None:
    check_no_secrets({"endpoint": "http://h:8080", "authenticationMode": "oauth2", "region": "eu"})
    with pytest.raises(InvalidArgumentError, match="credentials in a URL"):
        check_no_secrets({"endpoint": "http://user:pw@h:8080"})


def test_folder_follows_the_generation_unless_given() -> None:
    assert commit_dir_for("managedCommit") == "_commits"
    assert commit_dir_for("coordinatedCommits-preview") == "_staged_commits"
    assert commit_dir_for("coordinatedCommits-preview", "_commits") == "_commits"
    with pytest.raises(InvalidArgumentError):
        commit_dir_for("managedCommit", "_other")
    with pytest.raises(InvalidArgumentError):
        commit_dir_for("managed-commit-dev")


def test_locations_are_normalized() -> None:
    assert normalize_location("/tmp/a/") == "file:///tmp/a"
    assert normalize_location("s3a://Bkt/k/") == "s3://bkt/k"
    for bad in ("relative/path", "hdfs://x/y", "s3://bucket-only"):
        with pytest.raises(InvalidArgumentError):
            normalize_location(bad)


@pytest.mark.parametrize("spelling", [
    "abfss://ct1@acct1.dfs.core.windows.net/t/x",
    "abfs://ct1@acct1.dfs.core.windows.net/t/x/",
    "ABFSS://CT1@ACCT1.DFS.CORE.WINDOWS.NET/t/./x",
    "az://ct1@acct1.blob.core.windows.net/t/y/../x",
    "wasbs://ct1@acct1.blob.core.windows.net/t/x",
    "https://acct1.blob.core.windows.net/ct1/t/x",
    "https://acct1.dfs.core.windows.net/ct1/t/x",
])
def test_every_azure_spelling_is_one_table(spelling: str) -> None:
    assert normalize_location(spelling) == "abfss://ct1@acct1.dfs.core.windows.net/t/x"


def test_gcs_spellings_are_one_table() -> None:
    assert normalize_location("gcs://Bkt_1/t/x/") == normalize_location("gs://bkt_1/t/x") == "gs://bkt_1/t/x"


@pytest.mark.parametrize(("bad", "why"), [
    ("az://ct1/t/x", "must name the storage account"),  # delta-rs's account-less spelling: name the account
    ("abfss://ct1@acct1.example.com/t/x", "is not <account>.dfs.core.windows.net"),
    ("abfss://c@acct1.dfs.core.windows.net/t", "container name 'c' is not valid"),
    ("abfss://c--t@acct1.dfs.core.windows.net/t", "container name 'c--t' is not valid"),
    ("abfss://ct1@acct1.dfs.core.windows.net/", "need a prefix below the container"),
    ("gs://bk/t", "bucket name 'bk' is not valid"),
    ("gs://bucket-only", "need a prefix below the bucket"),
])
def test_bad_cloud_locations_name_what_is_wrong(bad: str, why: str) -> None:
    with pytest.raises(InvalidArgumentError, match=why):
        normalize_location(bad)


def _race(storage: LogStorage, n: int = 8) -> list[int]:
    winners: list[int] = []
    barrier = threading.Barrier(n)

    def put(i: int) -> None:
        barrier.wait()
        try:
            storage.put_if_absent("00000000000000000000.json", json.dumps({"i": i}).encode())
            winners.append(i)
        except FileExistsError:
            pass

    threads = [threading.Thread(target=put, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return winners


def test_put_if_absent_has_one_winner_on_local_disk(tmp_path) -> None:
    storage = LogStorage(str(tmp_path / "t"))
    winners = _race(storage)
    assert len(winners) == 1
    assert json.loads(storage.read("00000000000000000000.json")) == {"i": winners[0]}
    assert [e.name for e in storage.list()] == ["00000000000000000000.json"]  # no temporary file left


@pytest.mark.s3
def test_put_if_absent_has_one_winner_on_s3(lifecycle_s3) -> None:
    bucket, options = lifecycle_s3
    storage = LogStorage(f"s3://{bucket}/t", options)
    winners = _race(storage)
    assert len(winners) == 1
    assert json.loads(storage.read("00000000000000000000.json")) == {"i": winners[0]}
