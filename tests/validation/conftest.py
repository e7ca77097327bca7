"""Fixtures of the commit-validation tests: one service on SQLite + local disk and owned tables that delta-rs reads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import make_backend
from tests.support import Service


@pytest.fixture(scope="module")
def svc(request: pytest.FixtureRequest) -> Iterator[Service]:
    b = make_backend(request, "sqlite", "local", "validation")
    s = Service(b).start()
    yield s
    s.stop()
