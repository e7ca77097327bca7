"""`commit-owner transactions list`: which tables and versions each transaction committed, and when."""

from __future__ import annotations

import json
import uuid

from tests.ops.helpers import call
from tests.ops.test_cli import cli
from tests.support import Service, actions, create_owned_table, delta_file, ndjson, version0


def test_transactions_list_shows_each_transaction_with_its_tables_and_versions(owner_service: Service) -> None:
    svc = owner_service
    catalog = f"tx_{uuid.uuid4().hex[:8]}"
    for path, body in (("/catalogs", {"name": catalog}), ("/schemas", {"name": "s", "catalog_name": catalog})):
        status, _, reply = call(svc, "POST", "/api/2.1/unity-catalog" + path, json.dumps(body).encode(),
                                {"Content-Type": "application/json"})
        assert status == 200, reply
    owner = svc.client()
    loc_a = svc.backend.new_location()
    a = owner.register_table(loc_a, name=f"{catalog}.s.facts").table_id
    svc.backend.write(delta_file(loc_a, 0), ndjson(version0()))
    b, loc_b = create_owned_table(svc)
    first = owner.commit_transaction([(a, 1, actions()), (b, 1, actions())])
    second = owner.commit_transaction([(b, 2, actions())])
    db = svc.backend.database_url
    res = cli("transactions", "list", "--json", "--database-url", db)
    assert res.returncode == 0, res.stderr
    listed = {tx["transactionId"]: tx for tx in json.loads(res.stdout)}
    assert sorted((c["tableId"], c["version"], c["location"]) for c in listed[first.transaction_id]["commits"]) == \
        sorted([(a, 1, loc_a), (b, 1, loc_b)])
    assert listed[first.transaction_id]["committedTime"].endswith("Z")
    assert {c["tableId"]: c["name"] for c in listed[first.transaction_id]["commits"]} == {a: f"{catalog}.s.facts",
                                                                                        b: None}

    res = cli("transactions", "list", "--table", loc_a, "--json", "--database-url", db)
    assert res.returncode == 0, res.stderr
    assert [tx["transactionId"] for tx in json.loads(res.stdout)] == [first.transaction_id]

    res = cli("transactions", "list", "--limit", "1", "--database-url", db)
    assert res.returncode == 0, res.stderr
    head, *lines = res.stdout.splitlines()
    assert head.startswith(second.transaction_id) and head.endswith(" 1 table")
    assert lines[0].split()[:2] == ["v2", b] and lines[0].endswith(loc_b)

    res = cli("transactions", "list", "--table", "00000000-0000-0000-0000-000000000000", "--database-url", db)
    assert res.returncode == 1 and "no table" in res.stderr
