"""docs/transactions.md's Python block, run as written against a server started the way `make run` starts it
(tests/ops/doc_blocks.py): two tables written in one transaction, read back together, and by delta-rs."""

from __future__ import annotations

from pathlib import Path

from tests.ops.doc_blocks import fenced_blocks, run_blocks
from tests.support import ROOT


def test_the_transactions_page_block_commits_two_tables_together(tmp_path: Path) -> None:
    blocks = fenced_blocks(ROOT / "docs" / "transactions.md", "## Python")
    assert [lang for lang, _ in blocks] == ["python"]
    (out,) = run_blocks(tmp_path, blocks)
    assert out.splitlines() == ["[1, 1]", "[2, 2]", "2"], out
