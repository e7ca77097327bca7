"""Catalog-managed commits through ``/delta/preview/commits`` on every backend: the writer stages the
file, the owner reads it, checks it like an /api/v1 commit body, ratifies it through the same service
and backfills it through the same backfiller. Every refusal changes no row and no file."""

from __future__ import annotations

import json
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import make_backend
from tests.ops.test_cli import cli
from tests.support import Service, actions, db_commit_files, delta_file, ndjson, wait_until
from tests.unity.conftest import Writer, assert_uc_error, db_rows, ok, picture, sha, uc

COMMITS = "/delta/preview/commits"


def new_writer(svc: Service) -> Writer:
    w = Writer(svc).names()
    w.create()
    return w


def test_a_new_table_has_no_commits_and_latest_version_0(uc_service: Service) -> None:
    w = new_writer(uc_service)
    assert w.get_commits() == {"commits": [], "latest_table_version": 0}


def test_commits_are_ratified_in_order_with_the_staged_files_checksum(uc_service: Service) -> None:
    w = new_writer(uc_service)
    names = {}
    for v in (1, 2, 3):
        status, payload, names[v] = w.commit(v)
        assert (status, payload) == (200, {})
    page = w.get_commits()
    assert page["latest_table_version"] == 3
    assert [(c["version"], c["file_name"]) for c in page["commits"]] == [(v, names[v]) for v in (1, 2, 3)]
    for c in page["commits"]:
        assert c["file_size"] == len(w.staged[c["version"]])
        assert c["timestamp"] == json.loads(w.staged[c["version"]].split(b"\n")[0])["commitInfo"]["inCommitTimestamp"]
    assert db_commit_files(uc_service.backend.database_url, w.table_id) == names
    rows = db_rows(uc_service.backend.database_url)["commits"]
    shas = {r[7].strip("'") for r in rows if r[0].strip("'") == w.table_id}
    assert shas == {sha(w.staged[v]) for v in (1, 2, 3)}
    # the range and the query-parameter form
    assert [c["version"] for c in w.get_commits(2, 2)["commits"]] == [2]
    q = urllib.parse.urlencode({"table_id": w.table_id, "table_uri": w.location, "start_version": 3})
    assert [c["version"] for c in ok(uc_service, "GET", f"{COMMITS}?{q}")["commits"]] == [3]


def test_the_same_version_and_file_name_again_is_a_no_op(uc_service: Service) -> None:
    w = new_writer(uc_service)
    status, _, name = w.commit(1)
    assert status == 200
    before = picture(uc_service, w.location)
    status, payload = uc(uc_service, "POST", COMMITS, w.commit_body(1, name))
    assert (status, payload) == (200, {})
    assert picture(uc_service, w.location) == before


def test_a_taken_version_is_commit_version_conflict_and_changes_nothing(uc_service: Service) -> None:
    w = new_writer(uc_service)
    assert w.commit(1)[0] == 200
    other = w.stage(1)
    before = picture(uc_service, w.location)
    status, payload = uc(uc_service, "POST", COMMITS, w.commit_body(1, other))
    assert_uc_error(status, payload, 409, "COMMIT_VERSION_CONFLICT")
    assert picture(uc_service, w.location) == before


def test_a_gap_is_invalid_argument_and_changes_nothing(uc_service: Service) -> None:
    w = new_writer(uc_service)
    name = w.stage(2)
    before = picture(uc_service, w.location)
    status, payload = uc(uc_service, "POST", COMMITS, w.commit_body(2, name))
    assert_uc_error(status, payload, 400, "INVALID_ARGUMENT")
    assert "Expected version: 1" in payload["message"]
    assert picture(uc_service, w.location) == before


def test_a_full_backlog_is_resource_exhausted_and_changes_nothing(uc_service: Service) -> None:
    w = new_writer(uc_service)
    for v in range(1, 5):  # the fixture's cap is 4 unbackfilled commits
        assert w.commit(v)[0] == 200
    name = w.stage(5)
    before = picture(uc_service, w.location)
    status, payload = uc(uc_service, "POST", COMMITS, w.commit_body(5, name))
    assert_uc_error(status, payload, 429, "RESOURCE_EXHAUSTED")
    assert picture(uc_service, w.location) == before
    # the writer publishes and says so: the backlog frees and the same commit goes through
    for v in range(1, 5):
        w.publish(v)
    status, payload = uc(uc_service, "POST", COMMITS, w.commit_body(5, name, backfilled=4))
    assert (status, payload) == (200, {})
    assert [c["version"] for c in w.get_commits()["commits"]] == [1, 2, 3, 4, 5]  # published ones too


def test_bad_commit_requests_are_refused_and_change_nothing(uc_service: Service) -> None:
    w = new_writer(uc_service)
    good = w.stage(1)
    bad_content = w.stage(1, data=ndjson(actions(1)[1:]))  # no commitInfo first
    not_json = w.stage(1, data=b"{not json\n")
    upper = w.stage(1, uid=str(uuid.uuid4()).upper())
    before = picture(uc_service, w.location)
    cases = [
        (w.commit_body(1, good, uri=uc_service.backend.new_location()), 400, "INVALID_ARGUMENT"),
        (w.commit_body(1, good, size=len(w.staged[1]) + 1), 400, "INVALID_ARGUMENT"),
        (w.commit_body(1, good, size=len(w.staged[1]) - 1), 400, "INVALID_ARGUMENT"),
        (w.commit_body(1, good, size=2**40), 413, "RESOURCE_EXHAUSTED"),
        (w.commit_body(1, f"{1:020d}.{uuid.uuid4()}.json"), 400, "INVALID_ARGUMENT"),  # not staged
        (w.commit_body(1, "_staged_commits/" + good), 400, "INVALID_ARGUMENT"),
        (w.commit_body(1, "../" + good), 400, "INVALID_ARGUMENT"),
        (w.commit_body(1, f"{1:020d}.json"), 400, "INVALID_ARGUMENT"),
        (w.commit_body(2, good), 400, "INVALID_ARGUMENT"),  # the name says version 1
        (w.commit_body(1, upper), 400, "INVALID_ARGUMENT"),
        (w.commit_body(0, f"{0:020d}.{uuid.uuid4()}.json"), 400, "INVALID_ARGUMENT"),
        ({**w.commit_body(1, good), "table_id": str(uuid.uuid4())}, 404, "TABLE_NOT_FOUND"),
        ({**w.commit_body(1, good), "table_id": "nope"}, 400, "INVALID_ARGUMENT"),
        ({"table_id": w.table_id, "table_uri": w.location}, 400, "INVALID_ARGUMENT"),
        ({**w.commit_body(1, good), "surprise": 1}, 400, "INVALID_ARGUMENT"),
        ({**w.commit_body(1, good), "latest_backfilled_version": 7}, 400, "INVALID_ARGUMENT"),
    ]
    for name in (bad_content, not_json):
        body = w.commit_body(1, name)
        size = len(uc_service.backend.read(f"{w.location}/_delta_log/_staged_commits/{name}"))
        body["commit_info"]["file_size"] = size
        cases.append((body, 400, "INVALID_ARGUMENT"))
    for body, status_want, code in cases:
        status, payload = uc(uc_service, "POST", COMMITS, body)
        assert_uc_error(status, payload, status_want, code)
        assert picture(uc_service, w.location) == before, body
    # and the good one still goes through afterwards
    w.staged[1] = uc_service.backend.read(f"{w.location}/_delta_log/_staged_commits/{good}")
    status, payload = uc(uc_service, "POST", COMMITS, w.commit_body(1, good, backfilled=0))
    assert (status, payload) == (200, {})


def test_get_commits_refuses_a_wrong_uri_or_range_and_unknown_tables(uc_service: Service) -> None:
    w = new_writer(uc_service)
    base = {"table_id": w.table_id, "table_uri": w.location, "start_version": 0}
    before = picture(uc_service, w.location)
    for body, want, code in [
        ({**base, "table_uri": uc_service.backend.new_location()}, 400, "INVALID_ARGUMENT"),
        ({**base, "start_version": 3, "end_version": 1}, 400, "INVALID_ARGUMENT"),
        ({k: v for k, v in base.items() if k != "start_version"}, 400, "INVALID_ARGUMENT"),
        ({**base, "table_id": str(uuid.uuid4())}, 404, "TABLE_NOT_FOUND"),
    ]:
        status, payload = uc(uc_service, "GET", COMMITS, body)
        assert_uc_error(status, payload, want, code)
    assert picture(uc_service, w.location) == before


def test_the_writers_own_publication_is_recorded_when_the_bytes_match(uc_service: Service) -> None:
    w = new_writer(uc_service)
    for v in (1, 2):
        assert w.commit(v)[0] == 200
        w.publish(v)
    status, payload = uc(uc_service, "POST", COMMITS,
                         {"table_id": w.table_id, "table_uri": w.location, "latest_backfilled_version": 2})
    assert (status, payload) == (200, {})
    assert [c["version"] for c in w.get_commits()["commits"]] == [1, 2]  # still listed once published
    assert uc_service.client().get_table(w.table_id).latest_backfilled_version == 2


def test_foreign_bytes_at_a_published_version_fence_the_table(uc_service: Service) -> None:
    w = new_writer(uc_service)
    assert w.commit(1)[0] == 200
    foreign = ndjson(actions(1))
    uc_service.backend.write(delta_file(w.location, 1), foreign)
    status, payload = uc(uc_service, "POST", COMMITS,
                         {"table_id": w.table_id, "table_uri": w.location, "latest_backfilled_version": 1})
    assert_uc_error(status, payload, 400, "FAILED_PRECONDITION")
    assert uc_service.backend.read(delta_file(w.location, 1)) == foreign  # never overwritten
    info = uc_service.client().get_table(w.table_id)
    assert info.status == "FENCED" and not info.accepting_commits
    status, payload, _ = w.commit(2)
    assert_uc_error(status, payload, 400, "FAILED_PRECONDITION")


def test_the_server_side_backfiller_publishes_catalog_managed_commits(uc_service_backfilling: Service) -> None:
    svc = uc_service_backfilling
    w = new_writer(svc)
    for v in (1, 2, 3):
        assert w.commit(v)[0] == 200
    wait_until(lambda: svc.client().get_table(w.table_id).latest_backfilled_version >= 3, what="backfill")
    for v in (1, 2, 3):
        assert svc.backend.read(delta_file(w.location, v)) == w.staged[v]
    page = w.get_commits()
    assert ([c["version"] for c in page["commits"]], page["latest_table_version"]) == ([1, 2, 3], 3)
    # a writer that also publishes itself (identical bytes) and reports it changes nothing
    w.stage(4)
    w.publish(4)
    status, payload = uc(svc, "POST", COMMITS, w.commit_body(4, _staged_name(svc, w, 4), backfilled=3))
    assert (status, payload) == (200, {})
    wait_until(lambda: svc.client().get_table(w.table_id).latest_backfilled_version >= 4, what="backfill of 4")
    assert svc.backend.read(delta_file(w.location, 4)) == w.staged[4]
    assert svc.client().get_table(w.table_id).status == "ACTIVE"


def test_metadata_sent_with_a_commit_updates_the_table_info(uc_service: Service) -> None:
    w = new_writer(uc_service)
    name = w.stage(1)
    body = w.commit_body(1, name)
    body["metadata"] = {"description": "now with names", "schema": {"columns": [
        {"name": "id", "type_name": "LONG", "type_text": "bigint", "position": 0, "nullable": True},
        {"name": "label", "type_name": "STRING", "type_text": "string", "position": 1, "nullable": True}]},
        "properties": {"properties": {"delta.feature.catalogManaged": "supported", "team": "a"}}}
    assert uc(uc_service, "POST", COMMITS, body) == (200, {})
    got = ok(uc_service, "GET", f"/tables/{w.full_name}")
    assert [c["name"] for c in got["columns"]] == ["id", "label"] and got["comment"] == "now with names"
    assert got["properties"]["team"] == "a" and got["properties"]["io.unitycatalog.tableId"] == w.table_id


def test_only_managed_tables_of_the_catalog_take_commits(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    b = uc_service.backend
    loc = b.new_location()
    info = uc_service.client().register_table(loc, current_version=-1, name=f"{w.catalog}.{w.schema}.v1")
    b.write(delta_file(loc, 0), ndjson(actions(0)))
    w.table_id, w.location = info.table_id, loc
    name = w.stage(1)
    before = picture(uc_service, loc)
    status, payload = uc(uc_service, "POST", COMMITS, w.commit_body(1, name))
    assert_uc_error(status, payload, 400, "INVALID_ARGUMENT")
    assert picture(uc_service, loc) == before


def _staged_name(svc: Service, w: Writer, version: int) -> str:
    names = svc.backend.list(f"{w.location}/_delta_log/_staged_commits")
    prefix = f"{version:020d}."
    found = [n for n in names if n.startswith(prefix) and svc.backend.read(
        f"{w.location}/_delta_log/_staged_commits/{n}") == w.staged[version]]
    assert len(found) == 1, found
    return found[0]



def test_commits_through_api_v1_are_seen_through_the_unity_catalog_api(uc_service: Service) -> None:
    w = Writer(uc_service).names()
    b = uc_service.backend
    loc = b.new_location()
    c = uc_service.client()
    info = c.register_table(loc, current_version=-1, name=f"{w.catalog}.{w.schema}.both")
    b.write(delta_file(loc, 0), ndjson(actions(0)))
    committed = c.commit(info.table_id, 1, actions(1))
    got = ok(uc_service, "GET", f"/tables/{w.catalog}.{w.schema}.both")
    assert got["table_id"] == info.table_id
    page = ok(uc_service, "GET", COMMITS, {"table_id": info.table_id, "table_uri": loc, "start_version": 0})
    assert [(x["version"], x["file_name"]) for x in page["commits"]] == [(1, committed.file_name)]
    assert page["latest_table_version"] == 1


def test_concurrent_commits_of_one_version_ratify_exactly_one_file(uc_service: Service) -> None:
    import threading

    w = new_writer(uc_service)
    names = [w.stage(1) for _ in range(4)]
    bodies = {n: uc_service.backend.read(f"{w.location}/_delta_log/_staged_commits/{n}") for n in names}
    answers: dict[str, tuple[int, Any]] = {}

    def send(name: str) -> None:
        body = w.commit_body(1, name, size=len(bodies[name]))
        answers[name] = uc(uc_service, "POST", COMMITS, body)

    threads = [threading.Thread(target=send, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [n for n, (status, _) in answers.items() if status == 200]
    assert len(winners) == 1, answers
    for n, (status, payload) in answers.items():
        if n not in winners:
            assert_uc_error(status, payload, 409, "COMMIT_VERSION_CONFLICT")
    assert db_commit_files(uc_service.backend.database_url, w.table_id) == {1: winners[0]}
    assert sorted(uc_service.backend.list(f"{w.location}/_delta_log/_staged_commits")) == sorted(names)


def test_a_staged_file_overwritten_after_ratification_is_never_published_and_fences_the_table(
        uc_service: Service) -> None:
    """The writer's credential can write _staged_commits/: bytes put there after the owner ratified the file
    are refused at publication (the SHA-256 kept at ratification judges), the table is fenced, and <v>.json
    is never written with them."""
    from client.contract.errors import ForeignCommitFileError

    svc = uc_service
    w = new_writer(svc)
    status, _, name = w.commit(1)
    assert status == 200
    ratified = w.staged[1]
    staged_uri = f"{w.location}/_delta_log/_staged_commits/{name}"
    tampered = ndjson(actions(2, tag="tampered"))
    svc.backend.write(staged_uri, tampered)
    try:
        svc.client().backfill_to_version(w.table_id, 1)
        raise AssertionError("publication of an overwritten staged file was not refused")
    except ForeignCommitFileError as e:
        assert name in e.message and "ratified" in e.message and "fenced" in e.message, e.message
    assert not svc.backend.exists(delta_file(w.location, 1))  # neither the new bytes nor any others
    info = svc.client().get_table(w.table_id)
    assert (info.status, info.accepting_commits, info.latest_backfilled_version) == ("FENCED", False, 0)
    assert name in info.raw["statusReason"]
    status, payload, _ = w.commit(2)
    assert_uc_error(status, payload, 400, "FAILED_PRECONDITION")
    # restoring the ratified bytes lets an operator unfence; then the ratified bytes, only they, are published
    svc.backend.write(staged_uri, ratified)
    res = cli("tables", "unfence", w.table_id, "--json", env=svc.backend.env())
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["backfilledThrough"] == 1
    assert svc.backend.read(delta_file(w.location, 1)) == ratified


def test_the_backfiller_publishes_the_ratified_bytes_even_if_the_staged_file_is_overwritten(
        uc_service_backfilling: Service) -> None:
    """With the server-side backfiller on, the bytes it publishes are the ones it ratified: from its own copy
    when it still holds it, else checked against the checksum. The overwrite never reaches <v>.json."""
    svc = uc_service_backfilling
    w = new_writer(svc)
    for v in (1, 2, 3):
        status, _, name = w.commit(v)
        assert status == 200
        svc.backend.write(f"{w.location}/_delta_log/_staged_commits/{name}", ndjson(actions(1, tag=f"x{v}")))
    wait_until(lambda: svc.client().get_table(w.table_id).latest_backfilled_version >= 3
               or svc.client().get_table(w.table_id).status == "FENCED", what="backfill or fence")
    for v in (1, 2, 3):
        path = delta_file(w.location, v)
        assert not svc.backend.exists(path) or svc.backend.read(path) == w.staged[v], v


@pytest.fixture(scope="module")
def paged_service(request: pytest.FixtureRequest) -> Iterator[Service]:
    """getCommits pages of 2 commits, no background backfill, room for 6 unpublished commits (SQLite + local
    disk: paging is one LIMIT of the store's read, the same statement on every backend)."""
    svc = Service(make_backend(request, "sqlite", "local", "uc-paged"), extra_env={
        "COMMIT_OWNER_BACKFILL": "false", "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": "6",
        "COMMIT_OWNER_GET_COMMITS_PAGE_SIZE": "2"}).start()
    yield svc
    svc.stop()


def read_all_commits(w: Writer, start: int, end: int | None = None) -> tuple[list[list[int]], int]:
    """What a UC client does (delta-spark's UCCommitCoordinatorClient, the spec's latest_table_version note):
    ask from ``start``; while the reply lists fewer commits than the range up to min(latest, end) holds, ask
    again from the version after the last one listed. Returns the versions of each page and the latest."""
    pages: list[list[int]] = []
    while True:
        reply = w.get_commits(start, end)
        versions = sorted(c["version"] for c in reply["commits"])
        pages.append(versions)
        top = reply["latest_table_version"] if end is None else min(end, reply["latest_table_version"])
        if not versions or versions[-1] >= top:
            return pages, reply["latest_table_version"]
        start = versions[-1] + 1


def test_get_commits_answers_in_bounded_pages_that_a_client_reads_to_the_end(paged_service: Service) -> None:
    w = new_writer(paged_service)
    for v in range(1, 6):
        assert w.commit(v)[0] == 200
    first = w.get_commits(1)
    assert ([c["version"] for c in first["commits"]], first["latest_table_version"]) == ([1, 2], 5)
    assert read_all_commits(w, 1) == ([[1, 2], [3, 4], [5]], 5)
    assert read_all_commits(w, 2, 4) == ([[2, 3], [4]], 5)
    assert read_all_commits(w, 5) == ([[5]], 5)
    assert read_all_commits(w, 6) == ([[]], 5)
    # published commits stay listed (Sail), so paging covers them too
    for v in (1, 2, 3):
        w.publish(v)
    assert uc(paged_service, "POST", COMMITS, {"table_id": w.table_id, "table_uri": w.location,
                                               "latest_backfilled_version": 3}) == (200, {})
    assert read_all_commits(w, 0) == ([[1, 2], [3, 4], [5]], 5)
    got = [c for page in (w.get_commits(s)["commits"] for s in (1, 3, 5)) for c in page]
    assert [(c["version"], c["file_size"]) for c in got] == [(v, len(w.staged[v])) for v in range(1, 6)]
