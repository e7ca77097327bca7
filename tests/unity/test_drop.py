"""DROP TABLE through the Unity Catalog facade and the Delta REST Catalog API, on every backend
(docs/decisions.md, DROP TABLE): every ratified commit is published first, then the name is free, the table
takes no commit, holds no lease, is out of the backlog, and stays on record marked dropped for the ops
commands; no file is deleted. A drop that cannot publish is refused and changes nothing."""

from __future__ import annotations

import json
import re

from tests.delta.conftest import v1
from tests.ops.helpers import post_commit
from tests.ops.test_cli import cli
from tests.support import Service, actions, delta_file, delta_rs_table, ndjson, version0
from tests.unity.conftest import Writer, assert_uc_error, db_rows, ok, picture, uc

COMMITS = "/delta/preview/commits"


def ops(svc: Service, *args: str) -> dict | list:
    res = cli("tables", *args, "--json", "--database-url", svc.backend.database_url)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_drop_publishes_every_ratified_commit_then_frees_the_name_and_keeps_every_file(uc_service: Service) -> None:
    svc, b = uc_service, uc_service.backend
    w = Writer(svc).names()
    w.create()
    for v in (1, 2):
        assert w.commit(v)[0] == 200
    assert not b.exists(delta_file(w.location, 1))  # the service publishes nothing by itself (backfill off)
    before = b.snapshot(w.location)

    assert ok(svc, "DELETE", f"/tables/{w.full_name}") == {}

    after = b.snapshot(w.location)
    assert {k: after[k] for k in before} == before  # nothing deleted or changed
    assert sorted(set(after) - set(before)) == ["/_delta_log/00000000000000000001.json",
                                                "/_delta_log/00000000000000000002.json"]
    for v in (1, 2):
        assert b.read(delta_file(w.location, v)) == w.staged[v]  # published: the ratified bytes
    assert_uc_error(*uc(svc, "GET", f"/tables/{w.full_name}"), 404, "TABLE_NOT_FOUND")
    assert_uc_error(*uc(svc, "GET", COMMITS, {"table_id": w.table_id, "table_uri": w.location,
                                              "start_version": 0}), 404, "TABLE_NOT_FOUND")
    status, payload, _ = w.commit(3)
    assert_uc_error(status, payload, 404, "TABLE_NOT_FOUND")
    assert not any(n.startswith("00000000000000000003") for n in b.list(f"{w.location}/_delta_log"))
    # on record, marked dropped: the owner's API and both ops commands say so
    info = svc.client().get_table(w.table_id)
    assert (info.status, info.accepting_commits, info.name, info.unbackfilled_commits,
            info.latest_backfilled_version) == ("DROPPED", False, None, 0, 2)
    assert info.raw["droppedName"] == w.full_name and info.raw["droppedAt"] > 0
    listed = {r["tableId"]: r for r in ops(svc, "list")}[w.table_id]
    assert (listed["status"], listed["droppedName"]) == ("DROPPED", w.full_name)
    shown = ops(svc, "show", w.table_id)
    assert (shown["status"], shown["droppedName"], shown["droppedAt"]) == ("DROPPED", w.full_name, info.raw["droppedAt"])
    assert [c["version"] for c in shown["recentCommits"]] == [2, 1]  # the audit trail stays
    text = cli("tables", "show", w.table_id, "--database-url", b.database_url).stdout
    assert re.search(r"^status\s+DROPPED$", text, re.M) and re.search(
        rf"^droppedName\s+{re.escape(w.full_name)}$", text, re.M), text
    listed_text = cli("tables", "list", "--database-url", b.database_url).stdout
    line = next(line for line in listed_text.splitlines() if line.startswith(w.table_id))
    assert re.search(rf"^{w.table_id}\s+{re.escape(w.full_name)} \(dropped\)\s+2\s+2\s+0\s+no\s+DROPPED\s", line), line
    import urllib.request

    with urllib.request.urlopen(f"{svc.endpoint}/") as reply:  # the status page (auth is off here)
        page = reply.read().decode()
    assert f'<td class="name">{w.full_name} (dropped)</td>' in page
    row = [r for r in db_rows(b.database_url)["owned_tables"] if r[0].strip("'") == w.table_id]
    assert len(row) == 1 and "None" in row[0]  # no lease holder (lease_owner is NULL)
    # the name is free again, for a new table with a new id
    again = Writer(svc, catalog=w.catalog)
    again.create()
    assert again.table_id != w.table_id and ok(svc, "GET", f"/tables/{w.full_name}")["table_id"] == again.table_id
    # dropping again: the name now is the new table's; the old id is gone for good
    assert_uc_error(*uc(svc, "DELETE", f"/tables/{w.catalog}.{w.schema}.nope"), 404, "TABLE_NOT_FOUND")


def test_drop_of_a_fenced_table_with_unpublished_commits_is_refused_and_changes_nothing(uc_service: Service) -> None:
    svc, b = uc_service, uc_service.backend
    w = Writer(svc).names()
    w.create()
    assert w.commit(1)[0] == 200
    b.write(delta_file(w.location, 1), ndjson(actions(1, tag="foreign")))  # written around the owner
    status, payload = uc(svc, "POST", COMMITS, {"table_id": w.table_id, "table_uri": w.location,
                                                "latest_backfilled_version": 1})
    assert_uc_error(status, payload, 400, "FAILED_PRECONDITION")  # fenced
    before = picture(svc, w.location)
    status, payload = uc(svc, "DELETE", f"/tables/{w.full_name}")
    assert_uc_error(status, payload, 400, "FAILED_PRECONDITION")
    assert "DROP of table " + w.full_name + " refused, nothing changed" in payload["message"]
    assert "FENCED" in payload["message"] and "tables unfence" in payload["message"]
    assert picture(svc, w.location) == before
    assert ok(svc, "GET", f"/tables/{w.full_name}")["table_id"] == w.table_id


def test_an_external_table_dropped_stays_readable_and_its_location_and_name_can_be_registered_again(
        uc_service: Service) -> None:
    svc, b = uc_service, uc_service.backend
    w = Writer(svc).names()
    loc = b.new_location()
    name = f"{w.catalog}.{w.schema}.ext"
    first = svc.client().register_table(loc, current_version=-1, name=name)
    b.write(delta_file(loc, 0), ndjson(version0()))
    status, _, body = post_commit(svc, first.table_id, 1, actions(1))
    assert status == 200, body
    assert ok(svc, "GET", f"/tables/{name}")["table_type"] == "EXTERNAL"

    assert ok(svc, "DELETE", f"/tables/{name}") == {}

    assert delta_rs_table(b, loc).version() == 1  # published before the drop: any Delta reader opens it
    assert svc.client().get_table(first.table_id).status == "DROPPED"
    second = svc.client().register_table(loc, current_version=1, name=name)
    assert second.table_id != first.table_id and ok(svc, "GET", f"/tables/{name}")["table_id"] == second.table_id
    ids = [r["tableId"] for r in ops(svc, "list") if r["location"] == second.location]
    assert ids == [second.table_id]  # the dropped row at that location made room for the new registration
    assert svc.client().get_table(second.table_id).status == "ACTIVE"


def test_drop_through_the_delta_rest_catalog_api_publishes_first_and_marks_the_table_dropped(
        uc_service: Service) -> None:
    svc, b = uc_service, uc_service.backend
    w = Writer(svc).names()
    w.create()
    assert w.commit(1)[0] == 200
    assert v1(svc, "DELETE", f"/catalogs/{w.catalog}/schemas/{w.schema}/tables/{w.table}")[0] == 204
    assert b.read(delta_file(w.location, 1)) == w.staged[1]
    info = svc.client().get_table(w.table_id)
    assert (info.status, info.raw["droppedName"]) == ("DROPPED", w.full_name)
