"""The layers hold: API adapters reach the core (the commit service, the catalog, the credential vendor) and
never the store, the storage or the backfiller; the catalog reaches the commit path only through the service."""

from __future__ import annotations

import re

from tests.support import ROOT

API = ROOT / "coordinator" / "api"
# The application's wiring opens the resources; everything else under api/ is an adapter.
WIRING = {API / "app.py", API / "keys.py"}
REACH = re.compile(r"app\[(STORE|STORAGE|BACKFILLER)\]|\bservice\.(store|storage|backfiller|roots|settings)\b|"
                   r"\.(store|storage|backfiller)\.\w+\(")


def _adapters() -> list:
    return sorted(p for p in API.rglob("*.py") if p not in WIRING)


def test_no_adapter_reaches_the_store_the_storage_or_the_backfiller() -> None:
    found = []
    for path in _adapters():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if REACH.search(line) and "tokens_ctx" not in line and "TokenStore(" not in line:
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


def test_adapters_import_only_row_types_from_the_store() -> None:
    found = []
    for path in _adapters():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r"\s*from (\.+|coordinator\.)store(\.\w+)? import", line)
            if m and m.group(2) not in (".rows", ".tokens"):  # row types; the token store is auth's wiring
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


def test_the_catalog_reaches_the_commit_path_only_through_the_service() -> None:
    text = (ROOT / "coordinator" / "core" / "catalog.py").read_text()
    assert not re.search(r"service\.(store|storage|backfiller|roots|settings)\b", text)
    assert "import OwnershipStore" not in text and "StorageRouter" not in text
