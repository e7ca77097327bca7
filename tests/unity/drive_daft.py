"""Drive the owner's Unity Catalog API with the real Daft 0.7 (run in .venv-daft, whose pins differ from the
service's: Daft wants pyarrow < 26).

Usage: drive_daft.py ENDPOINT TOKEN READ_NAME... --create NEW_NAME. Reads each READ_NAME by name (Daft's
``load_table`` + ``read_deltalake``), then lets Daft create NEW_NAME as a MANAGED table without a location
(``load_table(..., table_type="MANAGED")``: POST /tables with no storage_location and no columns), appends
two rows at its location with ``write_deltalake`` and reads it back by name. Prints one JSON object.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import daft
from daft.catalog.__unity import UnityCatalogClient
from daft.io import IOConfig


def rows(df: Any) -> list[dict[str, Any]]:
    out = df.to_pydict()
    keys = list(out)
    return sorted(({k: out[k][i] for k in keys} for i in range(len(out[keys[0]]) if keys else 0)),
                  key=lambda r: json.dumps(r, sort_keys=True, default=str))


def main() -> None:
    endpoint, token, *rest = sys.argv[1:]
    cut = rest.index("--create")
    read_names, new_name = rest[:cut], rest[cut + 1]
    warnings.simplefilter("ignore")  # Daft warns that local paths get no vended credentials
    uc = UnityCatalogClient(endpoint, token=token)
    out: dict[str, Any] = {"read": {}}
    for name in read_names:
        table = uc.load_table(name, operation="READ")
        out["read"][name] = {"type": table.table_info.table_type, "rows": rows(daft.read_deltalake(table))}
    created = uc.load_table(new_name, table_type="MANAGED")
    out["created"] = {"type": created.table_info.table_type, "location": created.table_uri,
                      "columns": [c.name for c in created.table_info.columns or []]}
    # A local location gets no vended credentials, and Daft takes a catalog table's IOConfig from those alone:
    # it writes to the table's location (the catalog's answer) with an explicit, empty one.
    daft.from_pydict({"id": [1, 2], "word": ["a", "b"]}).write_deltalake(created.table_uri, io_config=IOConfig())
    again = uc.load_table(new_name, operation="READ")
    out["created"]["rows"] = rows(daft.read_deltalake(again))
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
