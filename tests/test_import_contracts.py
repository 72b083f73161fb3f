"""The layering rules of pyproject.toml ([tool.importlinter]) hold: domain code knows nothing of UI or SSH."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    proc = subprocess.run([lint_imports], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ", 0 broken." in proc.stdout


def test_the_layers_contract_is_the_readme_table() -> None:
    """Every folder of README's "How it is built" table is a layer, in the table's order from the top."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    flat = [m.strip() for layer in layers for m in layer.replace(":", "|").split("|")]
    assert flat[:2] == ["sparktui.cli", "sparktui.commands"]
    assert set(flat[2:5]) == {"sparktui.ui", "sparktui.remote", "sparktui.sim"}   # side by side
    assert "|" in layers[2]                                                       # … and independent
    assert set(flat[5:7]) == {"sparktui.domain", "sparktui.config"}
    assert set(flat[7:]) == {"sparktui.node", "sparktui.probe"}                 # what runs on the nodes
    readme = (REPO / "README.md").read_text()
    for module in flat:
        path = module.replace(".", "/")
        assert f"`{path}/`" in readme or f"`{path}.py`" in readme, module
