"""A reader whose table names an owner that stopped (or moved) fails within the connect bound, saying which
endpoint it tried and which table property named it; ``owner_endpoint=`` / ``$COMMIT_OWNER_ENDPOINT`` reads
the table through the owner's new address.

The owner is a real ``commit-owner serve``: it creates the table and ratifies two commits it does not
backfill, then it is stopped, so the endpoint in the table's properties is a closed port nobody listens on.
A second service on the same database and storage is the owner after the move.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from client.contract.errors import UnavailableError
from client.http import ENDPOINT_ENV
from client.lifecycle import create_table
from client.snapshot import load_snapshot
from tests.conftest import make_backend
from tests.lifecycle.helpers import SCHEMA, append_through_owner, tree
from tests.support import Backend, Service

# Nothing is published behind the test's back: the reader needs the owner for versions 1 and 2.
NO_BACKFILL = {"COMMIT_OWNER_BACKFILL_BATCH_SIZE": "1000", "COMMIT_OWNER_MAX_UNBACKFILLED_COMMITS": "1000"}


@pytest.fixture(scope="module")
def moved_backend(request: pytest.FixtureRequest) -> Backend:
    return make_backend(request, "sqlite", "local", "moved-owner")


@pytest.fixture(scope="module")
def stopped_owner_table(moved_backend: Backend) -> Iterator[tuple[str, str]]:
    """(table path, endpoint of the stopped owner): version 0 published, versions 1 and 2 only ratified."""
    first = Service(moved_backend, extra_env=NO_BACKFILL).start()
    try:
        path = str(moved_backend.tmp / "events")
        with first.client() as c:
            create_table(path, SCHEMA, client=c)
            assert append_through_owner(c, path, [1]) == 1
            assert append_through_owner(c, path, [2]) == 2
    finally:
        first.stop()
    yield path, first.endpoint


def _closed(endpoint: str) -> bool:
    parts = urlsplit(endpoint)
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((parts.hostname, parts.port)) != 0


@pytest.mark.slow  # waits out the 10 s read bound
def test_a_stopped_owner_fails_the_read_within_the_bound_naming_endpoint_and_property(stopped_owner_table) -> None:
    path, gone = stopped_owner_table
    assert _closed(gone)
    published = load_snapshot(path, ask_owner=False)
    assert published.version == 0 and published.owner is not None and published.owner.endpoint == gone
    prop = published.owner.generation.owner_conf_key
    before = tree(path)

    started = time.monotonic()
    with pytest.raises(UnavailableError) as err:
        load_snapshot(path)
    waited = time.monotonic() - started
    assert waited < 5, f"the read waited {waited:.1f} s for an owner nobody runs"
    message = err.value.message
    assert gone in message and f"table property {prop}" in message and path in message
    assert "owner_endpoint=" in message and ENDPOINT_ENV in message
    assert tree(path) == before  # a failed read changes nothing

    started = time.monotonic()
    with pytest.raises(UnavailableError, match="cannot reach the commit owner"):
        load_snapshot(path, connect_deadline=1.0)
    assert time.monotonic() - started < 4  # the bound is the caller's to choose


def test_owner_endpoint_and_the_environment_override_the_table_property(
    stopped_owner_table, moved_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, gone = stopped_owner_table
    moved = Service(moved_backend, extra_env=NO_BACKFILL).start()
    try:
        assert moved.endpoint != gone
        snap = load_snapshot(path, owner_endpoint=moved.endpoint)
        assert snap.version == 2 and snap.unbackfilled_versions == [1, 2]
        assert snap.owner is not None and snap.owner.endpoint == gone  # the properties are not rewritten

        monkeypatch.setenv(ENDPOINT_ENV, moved.endpoint)
        assert load_snapshot(path).version == 2
        # an explicit owner_endpoint wins over the environment, and its failure says where it came from
        with pytest.raises(UnavailableError, match="endpoint from owner_endpoint="):
            load_snapshot(path, owner_endpoint=gone, connect_deadline=1.0)
        monkeypatch.setenv(ENDPOINT_ENV, gone)
        with pytest.raises(UnavailableError, match=f"endpoint from \\${ENDPOINT_ENV}"):
            load_snapshot(path, connect_deadline=1.0)
    finally:
        moved.stop()

