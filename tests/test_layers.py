"""The layers hold. Which package may import which is import-linter's (``[tool.importlinter]`` in pyproject.toml,
run by `make lint`): the layers, the client alone, API adapters that import no store (but its row types), storage
or backfiller, the catalog without the store's writer or the storage, no circles among sibling modules. Here:
what an import contract cannot say (an adapter reaching a resource through an attribute), and no import circle
at all, at any depth, imports inside functions and under TYPE_CHECKING included."""

from __future__ import annotations

import re
import sys

import grimp

from tests.support import ROOT

API = ROOT / "coordinator" / "api"
# The application's wiring opens the resources; everything else under api/ is an adapter.
WIRING = {API / "app.py", API / "keys.py"}
REACH = re.compile(r"app\[(STORE|STORAGE|BACKFILLER)\]|\bservice\.(store|storage|backfiller|roots|settings)\b|"
                   r"\.(store|storage|backfiller)\.\w+\(")
PRODUCT = ("coordinator", "backfill", "client")
KNOWN_CIRCLES: list[set[str]] = []


def _adapters() -> list:
    return sorted(p for p in API.rglob("*.py") if p not in WIRING)


def test_no_adapter_reaches_the_store_the_storage_or_the_backfiller() -> None:
    found = []
    for path in _adapters():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if REACH.search(line) and "tokens_ctx" not in line and "TokenStore(" not in line:
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


def test_the_catalog_reaches_the_commit_path_only_through_the_service() -> None:
    """Its imports are a contract (no storage, no store writer); the attributes and the package's re-export are not."""
    text = (ROOT / "coordinator" / "core" / "catalog.py").read_text()
    assert not re.search(r"service\.(store|storage|backfiller|roots|settings)\b", text)
    assert "import OwnershipStore" not in text


def _circles(graph: grimp.ImportGraph) -> list[set[str]]:
    """The strongly connected parts of the module graph with more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    part.add(m)
                    if m == node:
                        break
                if len(part) > 1:
                    out.append(part)
    return out


def test_no_module_of_the_product_imports_itself_back_through_others() -> None:
    sys.path.insert(0, str(ROOT))  # this checkout's packages, not an installed copy
    try:
        graph = grimp.build_graph(*PRODUCT, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    circles = [sorted(c) for c in _circles(graph) if c not in KNOWN_CIRCLES]
    assert circles == [], "import circles: " + "; ".join(" <-> ".join(c) for c in circles)
