"""Polars (``pl.Catalog``), a client nobody here wrote, against the owner's Unity Catalog API.

Names resolve, an EXTERNAL table on local storage reads by name, and a MANAGED table created without a location
(Polars' create_table) gets one under the managed root. Reading by name also asks
``POST /temporary-table-credentials``; for a local table the owner answers ``{expiration_time, url}`` without a
cloud block and Polars reads the files itself (on S3: tests/unity/test_credentials.py). A catalog-managed table
is refused by Polars itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unity.sail import Owner, demo_owner

pl = pytest.importorskip("polars", reason="POLARS TESTS SKIPPED: polars is not installed (the test extra has it)")


@pytest.fixture(scope="module")
def owner(request: pytest.FixtureRequest) -> Iterator[Owner]:
    yield from demo_owner(request, "sqlite", "polars")


@pytest.fixture(scope="module")
def external(owner: Owner) -> dict:
    """An EXTERNAL Delta table (written by delta-rs, no owner) registered by name."""
    import pyarrow as pa
    from deltalake import write_deltalake

    location = owner.backend.new_location("ext")
    write_deltalake(location[len("file://"):], pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    return owner.uc("POST", "/tables", {"name": "ext", "catalog_name": "main", "schema_name": "demo",
                                        "table_type": "EXTERNAL", "data_source_format": "DELTA",
                                        "storage_location": location})


def catalog(owner: Owner) -> pl.Catalog:
    return pl.Catalog(owner.service.endpoint, bearer_token=owner.token, require_https=False)


def test_polars_resolves_catalogs_schemas_and_tables_by_name(owner: Owner, external: dict) -> None:
    c = catalog(owner)
    assert [x.name for x in c.list_catalogs()] == ["main"]
    assert [x.name for x in c.list_namespaces("main")] == ["demo"]
    assert [t.name for t in c.list_tables("main", "demo")] == ["ext"]
    info = c.get_table_info("main", "demo", "ext")
    assert (info.table_id, info.storage_location) == (external["table_id"], external["storage_location"])


def test_polars_reads_an_external_table_by_name(owner: Owner, external: dict) -> None:
    # scan_table also asks POST /temporary-table-credentials: a local table gets no cloud block, and Polars 2.1
    # reads the files itself.
    df = catalog(owner).scan_table("main", "demo", "ext").collect()
    assert sorted(df["id"].to_list()) == [1, 2, 3]


def test_polars_refuses_a_catalog_managed_table(owner: Owner) -> None:
    """What the client itself cannot do: its Delta reader has no catalog-managed support."""
    from client.lifecycle import create_table

    location = owner.backend.new_location("cm")
    create_table(location, {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True,
                                                          "metadata": {}}]},
                 client=owner.service.client(token=owner.token), protocol="catalogManaged",
                 full_name="main.demo.cm")
    # write_table(protocol="catalogManaged") makes a MANAGED table of the catalog, with its log's columns
    info = catalog(owner).get_table_info("main", "demo", "cm")
    assert info.table_type == "MANAGED"
    assert [(c.name, c.type_text, c.type_name, c.position) for c in info.columns or []] == [("id", "bigint", "LONG", 0)]
    # Polars 2.1: "DeltaError: Kernel error: Max catalog version error: Max catalog version is required when
    # loading a catalog-managed table. Use with_max_catalog_version()."
    with pytest.raises(Exception, match="Max catalog version is required"):
        catalog(owner).scan_table("main", "demo", "cm").collect()


def test_polars_creates_a_managed_table_without_a_location_and_reads_it_by_name(owner: Owner) -> None:
    """Polars' create_table sends MANAGED without storage_location: the owner allocates one under its managed
    root, as Unity Catalog does, and answers the whole record; Polars then writes and reads the table by name."""
    c = catalog(owner)
    schema = {"id": pl.Int64, "word": pl.String, "price": pl.Decimal(10, 2), "small": pl.Int16}
    info = c.create_table("main", "demo", "made", schema=schema, table_type="MANAGED", data_source_format="DELTA")
    assert info.table_type == "MANAGED"
    assert info.storage_location == f"{owner.backend.managed_location()}/{info.table_id}"
    assert [(col.name, col.type_text) for col in info.columns or []] == [
        ("id", "bigint"), ("word", "string"), ("price", "decimal(10,2)"), ("small", "smallint")]
    df = pl.DataFrame({"id": [1, 2], "word": ["a", "b"], "price": [1, 2], "small": [3, 4]}, schema=schema)
    c.write_table(df, "main", "demo", "made", delta_mode="append")
    assert c.scan_table("main", "demo", "made").collect().sort("id").equals(df)
