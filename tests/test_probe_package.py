"""The probe is a package of one-job modules (``sparktui/node/probe/``) that reaches a node as ONE script:
``main`` with every module it imports inlined once. The modules share one namespace there, so no two of
them may define the same top-level name; the text runs isolated, from a directory without sparktui."""

from __future__ import annotations

import ast
import collections
import json
import subprocess
import sys
from pathlib import Path

from sparktui import node
from sparktui.remote.probe_runner import probe_source

PACKAGE = Path(node.__file__).parent / "probe"


def _top_level_names(tree: ast.Module) -> list[str]:
    names = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            names.append(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names += [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    return names


def test_the_shipped_probe_is_every_module_once_in_one_namespace() -> None:
    text = node.source("probe.main")
    assert probe_source() == text.encode()
    imports = [line for line in text.splitlines() if line.startswith(("import", "from"))]
    assert not [line for line in imports if "sparktui" in line]
    assert text.startswith("from __future__ import annotations\n") and text.count("from __future__") == 1
    tree = ast.parse(text, feature_version=(3, 8))
    twice = [n for n, count in collections.Counter(_top_level_names(tree)).items() if count > 1]
    assert twice == [], f"defined by two modules (one overwrites the other on the node): {twice}"
    shipped = set(_top_level_names(tree))
    for module in PACKAGE.glob("*.py"):    # every module is shipped: none is imported only by the controller
        assert set(_top_level_names(ast.parse(module.read_text()))) <= shipped, module.name


def test_each_module_has_one_job_and_stays_small() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert len(sizes) >= 10
    assert max(sizes.values()) <= 250, sizes


def test_the_shipped_text_runs_isolated_without_sparktui(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-I", "-c", node.source("probe.main"), "--count", "1",
                           "--interval", "0.05", "--no-containers", "--nvml-module", "no_such_nvml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
    sample = json.loads(proc.stdout)
    assert sample["v"] == 1 and sample["seq"] == 1 and sample["memory"]["total"] > 0
