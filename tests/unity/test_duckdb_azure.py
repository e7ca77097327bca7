"""DuckDB 1.5 (``unity_catalog``, ``delta``, ``httpfs`` and ``azure`` extensions, from their PyPI wheels) and a
table at an ``abfss://`` location on azurite, the owner vending container SAS tokens (``azure_vend_scope=container``:
azurite refuses the default directory SAS).

What DuckDB 1.5.5 cannot do: read such a table by name with the Unity Catalog token alone. Its ``unity_catalog``
extension asks the owner for the table's credential (``POST /temporary-table-credentials``), gets the
``azure_user_delegation_sas`` reply, and makes no secret of it: it reads only ``aws_temp_credentials`` (the wheel's
binary holds that field name and no ``azure_user_delegation_sas``, ``sas_token`` or ``SharedAccessSignature``).
The delta extension then reaches Azure with no credential at all: object_store's default chain asks the instance
metadata service (169.254.169.254), which fails at once where that address is refused (as here) and may take its
retries' time elsewhere. The first test pins that down; if it starts failing because a secret appears, DuckDB
learned Azure vending and the second test's hand-over can go.

What it can do: read the table by name through the Unity Catalog API with nothing but the SAS the owner vended,
once the client hands that SAS to DuckDB as an Azure secret (a connection string naming azurite's endpoint, no
account key). Two emulator details: the delta extension turns on object_store's emulator mode for the account
``devstoreaccount1`` and then takes the endpoint from ``AZURITE_BLOB_STORAGE_URL`` only (default
``http://127.0.0.1:10000``); the azure extension reads ``abfss://`` through the Data Lake client, which takes its
endpoint from the connection string's ``DfsEndpoint``.
"""

from __future__ import annotations

import importlib
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.unity.sail import Owner, start_owner
from tests.unity.test_duckdb import EXTENSIONS as BASE_EXTENSIONS

duckdb = pytest.importorskip("duckdb", reason="DUCKDB TESTS SKIPPED: duckdb is not installed (the engines extra has it)")

EXTENSIONS = (*BASE_EXTENSIONS, ("duckdb_extension_azure", "azure"))
ROWS = [(1, "a"), (2, "b"), (3, "c")]


@dataclass
class Table:
    owner: Owner
    table_id: str
    location: str


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def table(request: pytest.FixtureRequest) -> Iterator[Table]:
    """An owner on azurite vending container SAS tokens, and ``main.demo.events`` written through it."""
    import pyarrow as pa

    from client.write import write_table
    from tests.conftest import make_backend

    backend = make_backend(request, request.param, "azure", f"duckdb-az-{request.param}")
    owner = start_owner(backend, "main", COMMIT_OWNER_AZURE_VEND_SCOPE="container")
    try:
        owner.uc("POST", "/schemas", {"catalog_name": "main", "name": "demo"})
        location = backend.new_location("events")
        write_table(pa.table({"id": pa.array([r[0] for r in ROWS], pa.int64()), "word": [r[1] for r in ROWS]}),
                    location, client=owner.service.client(token=owner.token), full_name="main.demo.events",
                    storage_options=backend.storage_options())
        yield Table(owner, owner.table("demo", "events")["table_id"], location)
    finally:
        owner.service.stop()


@pytest.fixture
def emulator_url(table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the delta extension's object_store finds azurite in emulator mode (it ignores the secret's endpoint)."""
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", table.owner.backend.azure_endpoint.rsplit("/", 1)[0])


def connect(owner: Owner) -> Any:
    """DuckDB with the four extensions loaded from their wheels, given the owner's Unity Catalog token and nothing
    else, the catalog attached read-only as ``uc``."""
    con = duckdb.connect()
    for module, name in EXTENSIONS:
        folder = Path(importlib.import_module(module).__file__).parent  # type: ignore[arg-type]
        con.execute(f"LOAD '{next(folder.rglob(f'{name}.duckdb_extension'))}'")
    con.execute(f"CREATE SECRET (TYPE UNITY_CATALOG, TOKEN '{owner.token}', ENDPOINT '{owner.service.endpoint}')")
    con.execute("ATTACH 'main' AS uc (TYPE UNITY_CATALOG, READ_ONLY)")
    return con


def secrets(con: Any) -> list[tuple[str, str]]:
    return sorted((str(n), str(t)) for n, t in con.execute("SELECT name, type FROM duckdb_secrets()").fetchall())


def vended(t: Table) -> list[tuple[str, str]]:
    """(operation, kind) of each credential the owner's ledger holds for the table's location."""
    return sorted((str(o), str(k)) for o, k in t.owner.db(
        "SELECT operation, kind FROM vended_credentials WHERE location = :l", l=t.location))


def hand_over(con: Any, t: Table, sas: str) -> None:
    """The client's part: the SAS as DuckDB's Azure secret for the table's location, no account key."""
    b = t.owner.backend
    assert b.azure_key not in sas
    con.execute(f"CREATE SECRET vended (TYPE AZURE, CONNECTION_STRING 'AccountName={b.azure_account};"
                f"SharedAccessSignature={sas};BlobEndpoint={b.azure_endpoint};DfsEndpoint={b.azure_endpoint}', "
                f"SCOPE '{t.location}')")


def test_duckdb_asks_the_owner_for_the_azure_sas_and_drops_it_so_the_token_alone_reads_nothing(
        table: Table, emulator_url: None) -> None:
    con = connect(table.owner)
    before = vended(table)
    with pytest.raises(duckdb.IOException, match="MicrosoftAzure") as refused:
        con.execute("SELECT * FROM uc.demo.events").fetchall()
    # DuckDB asked for a read credential, and the owner vended one (the ledger's new row) ...
    assert vended(table) == sorted([*before, ("READ", "azure")])
    # ... which became no secret: the delta extension went to Azure with none (object_store's credential chain).
    assert secrets(con) == [("__default_unity_catalog", "unity_catalog")]
    assert "token request" in str(refused.value)


def test_duckdb_reads_by_name_with_only_the_sas_the_owner_vended_handed_over_as_an_azure_secret(
        table: Table, emulator_url: None) -> None:
    reply = table.owner.uc("POST", "/temporary-table-credentials", {"table_id": table.table_id, "operation": "READ"})
    assert reply["url"] == table.location
    sas = reply["azure_user_delegation_sas"]["sas_token"]
    fields = dict(urllib.parse.parse_qsl(sas))
    assert (fields["sr"], fields["sp"]) == ("c", "rl")

    con = connect(table.owner)
    hand_over(con, table, sas)
    assert con.execute("SELECT * FROM uc.demo.events ORDER BY id").fetchall() == ROWS
    assert con.execute("SELECT word FROM uc.demo.events WHERE id = 2").fetchall() == [("b",)]

    # The SAS is what opens it: the same hand-over with its signature spoiled is refused by azurite.
    bad = dict(fields, sig=fields["sig"][::-1])
    con = connect(table.owner)
    hand_over(con, table, urllib.parse.urlencode(bad))
    with pytest.raises(duckdb.IOException, match="403"):
        con.execute("SELECT * FROM uc.demo.events").fetchall()
