"""docs/architecture.md's "Where does X live" table and glossary stay true: every file or folder they name
exists, every ``module.py`` (``Name``) pair names something that module defines, and every product package
is drawn in "The packages"."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
#: A path of the repository in backticks: top folder first, a file or a folder.
PATH = re.compile(r"`((?:coordinator|client|backfill|harness|schema|scripts|tests|docs)/[\w/.-]*)`")
#: "`path.py` (`Name`" or "`path.py`, `Name`": a module and a name it defines.
DEFINES = re.compile(r"`((?:coordinator|client|backfill)/[\w/]+\.py)` \(`(\w+)`")


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}") if f"## {title}" in text else text.index(f"### {title}")
    rest = text[start + 4:]
    end = re.search(r"^##+ ", rest, re.M)
    return rest[: end.start()] if end else rest


def _names_defined(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_every_path_the_tables_name_exists() -> None:
    named = set()
    for title in ("Where does X live", "Glossary", "The packages"):
        named.update(PATH.findall(_section(title)))
    assert len(named) > 30, "the tables name the files; this test reads them"
    missing = sorted(p for p in named if not (ROOT / p.rstrip("/")).exists())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_every_name_the_table_pins_to_a_module_is_defined_there() -> None:
    pairs = DEFINES.findall(_section("Where does X live")) + DEFINES.findall(_section("Glossary"))
    assert pairs, "the table pins rules to names; this test reads them"
    wrong = [f"{path} ({name})" for path, name in pairs
             if (ROOT / path).exists() and name not in _names_defined(ROOT / path)]
    assert not wrong, f"docs/architecture.md names what these modules do not define: {wrong}"


def test_every_product_package_is_drawn() -> None:
    drawn = _section("The packages")
    packages = sorted(str(p.parent.relative_to(ROOT)) for top in ("coordinator", "backfill", "client")
                      for p in (ROOT / top).rglob("__init__.py"))
    undrawn = [p for p in packages if f"{p}/" not in drawn]
    assert not undrawn, f"packages missing from docs/architecture.md's \"The packages\": {undrawn}"
