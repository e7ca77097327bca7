"""schemathesis fuzzes the running service against its OpenAPI document (bounded in time).

No request may produce a 5xx, every answer must match the document (status code, content type, body
schema), and a refused request (4xx) must leave the database and storage as they were. Auth is on:
first an admin token over every location, then a read-only token for another prefix (so every
mutation is refused)."""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.parse
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, Phase, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from coordinator.api.delta.shapes import DERIVED  # noqa: E402
from coordinator.core.catalog import RESERVED  # noqa: E402
from tests.conftest import make_backend  # noqa: E402
from tests.security.conftest import State, store_token  # noqa: E402
from tests.support import Service, actions, delta_file, ndjson, version0  # noqa: E402

UC = "/api/2.1/unity-catalog"
DELTA = f"{UC}/delta/v1"
BUDGET_SECONDS = float(os.environ.get("COMMIT_OWNER_FUZZ_SECONDS", "40"))
EXAMPLES = 40
LINE_TOO_LONG = "Got more than 8190 bytes when reading"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

schemathesis.serializer.alias("application/x-ndjson", "text/plain")


@pytest.fixture(scope="module")
def fuzz_service(request: pytest.FixtureRequest) -> Iterator[Service]:
    b = make_backend(request, "sqlite", "local", "sec-fuzz")
    (b.tmp / "wh").mkdir()
    # No background backfill: the only state changes are the ones a request makes.
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens", "COMMIT_OWNER_BACKFILL": "false",
                                "COMMIT_OWNER_ALLOW_LOCATION": f"file://{b.tmp}/wh",
                                "COMMIT_OWNER_MANAGED_LOCATION": f"file://{b.tmp}/wh/managed"}).start()
    yield svc
    svc.stop()


def _post(svc: Service, token: str, path: str, body: dict[str, Any]) -> Any:
    import urllib.request

    req = urllib.request.Request(svc.endpoint + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def _get(svc: Service, token: str, path: str) -> Any:
    import urllib.request

    req = urllib.request.Request(svc.endpoint + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@dataclass
class World:
    svc: Service
    admin: str  # admin over every location
    outsider: str  # read on an unrelated prefix: every mutation refused
    table_id: str  # a table of /api/v1, with one commit, published
    named: dict[str, str]  # the path parameters of a catalog-managed table, for the Delta REST Catalog API

    def schema(self) -> Any:
        return schemathesis.openapi.from_url(self.svc.endpoint + "/api/v1/openapi.json")

    def state(self) -> State:
        return State(self.svc.backend, f"file://{self.svc.backend.tmp}/wh")


def _named_table(svc: Service, admin: str, name: str) -> dict[str, str]:
    """A catalog-managed table ``fz.s.<name>`` created through the Delta REST Catalog API; its path parameters."""
    staging = _post(svc, admin, f"{DELTA}/catalogs/fz/schemas/s/staging-tables", {"name": name})
    svc.backend.write(delta_file(staging["location"], 0), ndjson(version0()))
    _post(svc, admin, f"{DELTA}/catalogs/fz/schemas/s/tables", {
        "name": name, "location": staging["location"], "table-type": "MANAGED", "last-commit-timestamp-ms": 1,
        "columns": {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]},
        "protocol": {"min-reader-version": 3, "min-writer-version": 7}, "properties": {}})
    return {"catalog": "fz", "schema": "s", "table": name}


@pytest.fixture(scope="module")
def world(fuzz_service: Service) -> World:
    svc, b = fuzz_service, fuzz_service.backend
    admin = store_token(b, "*:admin")
    loc = f"file://{b.tmp}/wh/fuzzed"
    client = svc.client(token=admin)
    table_id = client.register_table(loc).table_id
    b.write(delta_file(loc, 0), ndjson(version0()))
    client.commit(table_id, 1, actions())
    client.backfill_to_version(table_id, 1)
    _post(svc, admin, f"{UC}/catalogs", {"name": "fz"})
    _post(svc, admin, f"{UC}/schemas", {"name": "s", "catalog_name": "fz"})
    return World(svc, admin, store_token(b, f"file://{b.tmp}/elsewhere:read"), table_id, _named_table(svc, admin, "t"))


@pytest.mark.slow
def test_fuzzing_the_api_finds_no_server_error_and_refusals_change_nothing(world: World) -> None:
    svc, admin, outsider, table_id, named = world.svc, world.admin, world.outsider, world.table_id, world.named
    schema = world.schema()
    state = world.state()
    operations = [r.ok() for r in schema.get_all_operations()]
    modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    slice_seconds = BUDGET_SECONDS / (2 * len(operations) * len(modes))  # every operation gets its share
    started = time.monotonic()
    seen: dict[str, int] = {}
    refusals = [0]
    too_long = [0]

    def run(case: Any, token: str, until: float) -> None:
        if time.monotonic() > until:
            return
        if "table_id" in (case.path_parameters or {}) and zlib.crc32(repr(case.query).encode()) % 2 == 0:
            case.path_parameters["table_id"] = table_id  # half the cases aim at a real table
        params = case.path_parameters or {}
        if "catalog" in params and zlib.crc32(repr(case.body).encode()) % 2 == 0:
            params.update({k: v for k, v in named.items() if k in params})  # (by name, for /delta/v1)
        before = state.take()
        response = case.call(base_url=svc.endpoint, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        if response.status_code == 400 and LINE_TOO_LONG in response.text:
            # aiohttp's HTTP parser refuses a request line or header over 8190 bytes before any route or
            # middleware sees it (plain text, outside every API's envelope); it must still change nothing
            too_long[0] += 1
            assert state.take() == before, (case.method, response.text[:200])
            return
        case.validate_response(response, checks=CHECKS)
        seen[str(response.status_code)] = seen.get(str(response.status_code), 0) + 1
        if response.status_code >= 400:
            refusals[0] += 1
            assert state.take() == before, (case.method, case.formatted_path, response.status_code, response.text)

    for token in (admin, outsider):
        for operation in operations:
            for mode in modes:
                strategy = operation.as_strategy(generation_mode=mode)
                until = time.monotonic() + slice_seconds

                @given(strategy)
                @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
                def fuzz(case: Any) -> None:
                    run(case, token, until)  # noqa: B023 - called within this iteration only

                try:
                    fuzz()
                except Unsatisfiable:
                    assert mode == GenerationMode.NEGATIVE  # nothing to break in, e.g., GET /healthz
    print(f"fuzzing: {sum(seen.values())} requests in {time.monotonic() - started:.1f}s, statuses {seen}, "
          f"{too_long[0]} refused by the HTTP parser as too long")
    assert sum(seen.values()) > 100 and refusals[0] > 50
    assert not any(s.startswith("5") for s in seen)


def _send_twice_authorized(svc: Service, case: Any, first: str, second: str) -> tuple[int, bytes]:
    """The request of ``case`` with two ``Authorization`` lines (a client library sends one: http.client)."""
    import requests

    kwargs = case.as_transport_kwargs(base_url=svc.endpoint, headers={"Authorization": f"Bearer {first}"})
    prepared = requests.Request(**{k: v for k, v in kwargs.items()
                                   if k in ("method", "url", "headers", "params", "json", "data")}).prepare()
    url = urllib.parse.urlsplit(prepared.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.putrequest(prepared.method or "GET", url.path + (f"?{url.query}" if url.query else ""),
                        skip_accept_encoding=True)
        for name, value in prepared.headers.items():
            conn.putheader(name, value)
        conn.putheader("Authorization", f"Bearer {second}")
        body = prepared.body.encode() if isinstance(prepared.body, str) else prepared.body
        conn.endheaders(body)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_generated_requests_with_two_credentials_or_a_reserved_property_are_refused_and_change_nothing(
        world: World) -> None:
    """Every operation, its generated requests sent with two Authorization lines: 401 unless the route is public.
    Then updateTable and createTable with a reserved property set to a value the table does not hold: 400."""
    svc, admin, outsider = world.svc, world.admin, world.outsider
    schema, state = world.schema(), world.state()
    named = _named_table(svc, admin, f"r{time.monotonic_ns() % 10**6}")
    public = {op["operationId"] for item in schema.raw_schema["paths"].values() for op in item.values()
              if isinstance(op, dict) and op.get("security") == []}
    sent = [0]

    for r in schema.get_all_operations():
        operation = r.ok()

        @given(operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        @settings(max_examples=3, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def twice(case: Any) -> None:
            if "catalog" in (case.path_parameters or {}):
                case.path_parameters.update({k: v for k, v in named.items() if k in case.path_parameters})
            before = state.take()
            first, second = (admin, outsider) if sent[0] % 2 else (outsider, admin)
            status, raw = _send_twice_authorized(svc, case, first, second)
            sent[0] += 1
            if case.operation.definition.raw.get("operationId") not in public:
                assert status == 401, (case.method, case.formatted_path, raw[:300])
            assert status < 500 and state.take() == before, (case.method, case.formatted_path, status)

        try:
            twice()
        except Unsatisfiable:
            pass

    loaded = _get(svc, admin, f"{DELTA}/catalogs/fz/schemas/s/tables/{named['table']}")["metadata"]
    held = {**loaded["properties"], "ucTableId": loaded["table-uuid"]}
    reserved = sorted({*RESERVED, *DERIVED, "delta.feature.vacuumProtocolCheck"})
    update = schema.find_operation_by_id("updateTable")
    create = schema.find_operation_by_id("createTable")
    staging = _post(svc, admin, f"{DELTA}/catalogs/fz/schemas/s/staging-tables", {"name": "never"})
    svc.backend.write(delta_file(staging["location"], 0), ndjson(version0()))

    @given(key=st.sampled_from(reserved), value=st.text(max_size=40), extra=st.dictionaries(
        st.text(min_size=1, max_size=20), st.text(max_size=20), max_size=3), remove=st.booleans())
    @settings(max_examples=60, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def reserved_property(key: str, value: str, extra: dict[str, str], remove: bool) -> None:
        if remove and key in held:
            updates = [{"action": "remove-properties", "removals": [key]}]
        else:
            assume(held.get(key) != value)
            updates = [{"action": "set-properties", "updates": {**extra, key: value}}]
        cases = [update.Case(path_parameters=named, media_type="application/json", body={
                     "requirements": [{"type": "assert-table-uuid", "uuid": loaded["table-uuid"]}], "updates": updates}),
                 create.Case(path_parameters={"catalog": "fz", "schema": "s"}, media_type="application/json", body={
                     "name": "never", "location": staging["location"], "table-type": "MANAGED",
                     "last-commit-timestamp-ms": 1, "columns": {"type": "struct", "fields": []},
                     "protocol": {"min-reader-version": 3, "min-writer-version": 7},
                     "properties": {**extra, key: value}})]
        for case in cases:
            before = state.take()
            response = case.call(base_url=svc.endpoint, headers={"Authorization": f"Bearer {admin}"}, timeout=30)
            case.validate_response(response, checks=CHECKS)
            assert response.status_code == 400 and "reserved" in response.text, (case.body, response.text)
            assert state.take() == before, case.body

    reserved_property()
    assert sent[0] > 20
