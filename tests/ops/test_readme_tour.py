"""The README's tour, run as written against a fresh server started the way `make run` starts it
(tests/ops/doc_blocks.py says how). Afterwards delta-rs must read the table."""

from __future__ import annotations

import re
from pathlib import Path

from tests.ops.doc_blocks import fenced_blocks, run_blocks
from tests.support import ROOT


def test_the_readme_tour_leaves_a_table_delta_rs_reads(tmp_path: Path) -> None:
    blocks = fenced_blocks(ROOT / "README.md", "## A 60-second tour")
    assert [lang for lang, _ in blocks].count("python") >= 1 and "tables create" in blocks[0][1]
    outputs = run_blocks(tmp_path, blocks, timeout=120)

    import deltalake

    dt = deltalake.DeltaTable(str(tmp_path / "warehouse" / "t1"))
    assert dt.version() == 1
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]
    shown = outputs[-1]
    assert sorted(re.findall(r"^\| (\d+) +\|$", shown, re.M)) == ["1", "2", "3"], shown  # delta-rs's printed rows
    assert "latestTableVersion       1" in shown and "latestBackfilledVersion  1" in shown
