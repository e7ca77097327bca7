"""Fixtures of the UI tests: one owner with tokens on (PostgreSQL + local disk, publication only when asked),
seeded once with catalogs, tables and commits (harness/ui_seed.py); tokens of each kind; one headless
Chromium (harness/browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from harness.browser import Browser
from harness.ui_seed import Seeded, seed
from tests.conftest import make_backend
from tests.security.conftest import _dispose_engines, store_token  # noqa: F401 (closes State's engines at the end)
from tests.support import Service


@dataclass
class World:
    svc: Service
    seeded: Seeded
    admin: str
    ops: str
    reader: str  # read on the "orders" table's location only

    @property
    def ui(self) -> str:
        return self.svc.endpoint + "/ui"


@pytest.fixture(scope="session")
def ui_world(request: pytest.FixtureRequest) -> Iterator[World]:
    b = make_backend(request, "postgres", "local", "ui")
    svc = Service(b, extra_env={"COMMIT_OWNER_AUTH": "tokens", "COMMIT_OWNER_BACKFILL": "false"}).start()
    try:
        admin = store_token(b, "*:admin")
        seeded = seed(svc, token=admin, backlog=("events",))
        yield World(svc, seeded, admin, store_token(b, "*:ops"),
                    store_token(b, f"{seeded.locations['orders']}:read"))
    finally:
        svc.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as b:
        yield b


def sign_in(browser: Browser, world: World, token: str) -> None:
    """Sign in through the UI's form, as a person would."""
    browser.open(world.ui + "/login")
    browser.submit("form.login", {"token": token})
    assert browser.url() == world.ui + "/", browser.text()


def facts(browser: Browser, selector: str) -> dict[str, str]:
    """The ``<dt>`` -> ``<dd>`` texts of the definition list ``selector``, as rendered."""
    return dict(browser.eval(
        f"Array.from(document.querySelectorAll('{selector} dt')).map(d => [d.innerText, d.nextElementSibling.innerText])"))
