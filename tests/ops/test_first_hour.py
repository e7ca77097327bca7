"""docs/first-hour.md, run as written against a fresh server started the way `make run` starts it
(tests/ops/doc_blocks.py says how): DuckDB, Polars and delta-rs read by name the table its Python writes made.
Then the README's Python block runs in the same folder.

Two blocks are not run: `make run` (the harness starts the server from the Makefile's own recipe) and the
engines' install, whose extra the test extra includes; the test asserts both instead."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

from tests.ops.doc_blocks import fenced_blocks, run_blocks
from tests.support import ROOT

PAGE = ROOT / "docs" / "first-hour.md"
INSTALL = ".venv/bin/pip install --quiet -e '.[engines]'"


def test_the_first_hour_page_leaves_a_table_duckdb_polars_and_delta_rs_read_by_name(tmp_path: Path) -> None:
    blocks = fenced_blocks(PAGE)
    assert blocks[0] == ("sh", "make run\n") and blocks[1] == ("sh", INSTALL + "\n"), blocks[:2]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "delta-commit-owner[engines]" in extras["test"]
    for module in ("duckdb", "polars", "deltalake", "pandas", "duckdb_extension_unity_catalog"):
        __import__(module)  # the engines extra is installed where this suite runs

    # then the README's Python block, in the same folder: a newcomer may well come back to the README
    readme = fenced_blocks(ROOT / "README.md", "## Python writes (pandas, pyarrow, Polars)")
    out = run_blocks(tmp_path, blocks[2:] + readme)
    _, write, listing, duck, polars, delta_rs, readme_read = out
    assert readme_read.count("Oslo") == 2 and "Lima" in readme_read, readme_read

    assert write.split() == ["2", "2"], write
    assert re.search(r"main\.demo\.cities", listing), listing
    # DuckDB's printed relation: Lima 1, Oslo 2, Pune 1
    assert re.findall(r"│ (\w+) +│ +(\d+) │", duck) == [("Lima", "1"), ("Oslo", "2"), ("Pune", "1")], duck
    assert re.findall(r"│ (\d+) +┆ (\w+) +│", polars) == [("1", "Oslo"), ("2", "Lima"), ("3", "Oslo"), ("4", "Pune")], polars
    assert delta_rs.splitlines()[0] == "EXTERNAL ['bigint', 'string']", delta_rs
    assert [line.split() for line in delta_rs.splitlines()[2:]] == [["1", "Oslo"], ["2", "Lima"], ["3", "Oslo"],
                                                                    ["4", "Pune"]], delta_rs
    log = sorted(p.name for p in (tmp_path / "warehouse" / "demo" / "cities" / "_delta_log").glob("*.json"))
    assert log == [f"{v:020}.json" for v in range(3)], log
