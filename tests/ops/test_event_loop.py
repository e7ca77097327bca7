"""`serve` runs on uvloop when it is installed; a bad `event_loop` is refused before anything starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator.cli.main import main
from coordinator.cli.serve import new_event_loop


def test_an_unknown_event_loop_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    db = tmp_path / "owner.db"
    res = CliRunner().invoke(main, ["serve", "--event-loop", "tornado", "--database-url", f"sqlite:///{db}"])
    assert res.exit_code == 2
    assert "event_loop must be one of auto, uvloop, asyncio, not 'tornado'" in res.output
    assert not db.exists()


@pytest.mark.parametrize("choice, module", [("auto", "uvloop"), ("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_the_event_loop_follows_the_setting(choice: str, module: str) -> None:
    pytest.importorskip("uvloop")
    loop = new_event_loop(choice)
    try:
        assert type(loop).__module__.split(".")[0] == module
        assert loop.run_until_complete(_answer()) == 42
    finally:
        loop.close()


async def _answer() -> int:
    return 42


def test_a_refused_serve_leaves_the_callers_environment_as_it_was(tmp_path: Path, monkeypatch) -> None:
    """`serve --workers 2` names its metrics folder in the environment for its workers; run inside another
    process and refused, it must take the name back (later subprocesses would inherit a folder that is gone)."""
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    before = dict(os.environ)
    res = CliRunner().invoke(main, ["serve", "--workers", "2", "--event-loop", "tornado",
                                    "--database-url", f"sqlite:///{tmp_path / 'owner.db'}"])
    assert res.exit_code == 2 and "event_loop must be one of" in res.output
    assert dict(os.environ) == before
