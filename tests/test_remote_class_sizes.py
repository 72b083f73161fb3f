"""No class in ``sparktui/remote`` over 300 lines (issue 32: split by job): a class that grows past it
holds more than one job, and the test names it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 300


def class_sizes(folder: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                end = node.end_lineno or node.lineno
                sizes[f"{path.relative_to(ROOT)}:{node.name}"] = end - node.lineno + 1
    return sizes


def test_no_class_in_remote_is_over_300_lines() -> None:
    sizes = class_sizes(ROOT / "sparktui" / "remote")
    assert "sparktui/remote/backend.py:SshBackend" in sizes
    too_big = {name: lines for name, lines in sizes.items() if lines > LIMIT}
    assert not too_big, too_big
