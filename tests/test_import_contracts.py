"""The layering rules of pyproject.toml ([tool.importlinter]) hold: domain code knows nothing of UI or
SSH; and no sparktui module imports itself back through others (an import circle)."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    proc = subprocess.run([lint_imports], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ", 0 broken." in proc.stdout


def import_cycles(package: str) -> list[tuple[str, ...]]:
    """Every import circle between ``package``'s modules, each once, as the modules in import order with
    the first repeated at the end. Imports inside functions and under ``TYPE_CHECKING`` count: they are arrows
    too."""
    import grimp

    graph = grimp.build_graph(package)
    seen: set[frozenset[str]] = set()
    cycles: list[tuple[str, ...]] = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer) \
                if imported.startswith(f"{package}.") else None
            if back and frozenset(back) not in seen:
                seen.add(frozenset(back))
                cycles.append((importer, *back))
    return cycles


def test_no_import_cycle_between_sparktui_modules() -> None:
    cycles = import_cycles("sparktui")
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_a_circle_is_found_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above sees a circle through an import inside a function (the kind config.py once had)."""
    pkg = tmp_path / "circled"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from circled.b import B\n\nA = 1\n")
    (pkg / "b.py").write_text("B = 2\n\n\ndef late() -> int:\n    from circled.a import A\n    return A\n")
    (pkg / "c.py").write_text("import circled.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("circled") == [("circled.a", "circled.b", "circled.a")]


def test_the_layers_contract_is_the_architecture_table() -> None:
    """Every layer of the contract is a row of docs/architecture.md's "Layers" table, in the contract's order
    from the top (side-by-side layers in any order among themselves), and the README's one-screen summary
    names every layer too."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    flat = [m.strip() for layer in layers for m in layer.replace(":", "|").split("|")]
    assert flat[:2] == ["sparktui.cli", "sparktui.commands"]
    assert set(flat[2:5]) == {"sparktui.ui", "sparktui.remote", "sparktui.sim"}   # side by side
    assert "|" in layers[2]                                                       # … and independent
    assert set(flat[5:7]) == {"sparktui.domain", "sparktui.config"}
    assert set(flat[7:]) == {"sparktui.node", "sparktui.probe"}                 # what runs on the nodes
    doc = (REPO / "docs" / "architecture.md").read_text()
    table = doc[doc.index("## Layers"):]
    rows = [line for line in table.splitlines() if line.startswith("| `sparktui/")]

    def row_of(module: str) -> int:
        path = module.replace(".", "/")
        hits = [i for i, row in enumerate(rows) if f"`{path}/`" in row.split("|")[1]
                or f"`{path}.py`" in row.split("|")[1]]
        assert hits, f"{module} is not a row of docs/architecture.md's Layers table"
        return hits[0]

    order = [[row_of(m.strip()) for m in layer.replace(":", "|").split("|")] for layer in layers]
    for upper, lower in itertools.pairwise(order):
        assert max(upper) < min(lower), (layers, order)
    readme = (REPO / "README.md").read_text()
    for module in flat:
        path = module.replace(".", "/")
        assert f"`{path}/`" in readme or f"`{path}.py`" in readme, f"{module} is not in the README"
