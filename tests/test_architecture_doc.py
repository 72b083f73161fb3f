"""docs/architecture.md's walks stay true: every step names a module that exists and a function or class
that module defines, and each walk's "(N modules)" is the number of modules it lists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"

#: A walk's heading: "**A log line → its stage bar** (8 modules):".
_WALK = re.compile(r"^\*\*(?P<name>[^*]+)\*\* \((?P<count>\d+) modules\):$")
#: One step: "1. `sparktui/remote/line_stream.py` — `chunks`: …".
_STEP = re.compile(r"^\d+\. `(?P<path>sparktui/[\w/]+\.py)` — `(?P<name>\w+)`")


def walks() -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """Walk name → (the count it states, its steps as (module path, defined name))."""
    found: dict[str, tuple[int, list[tuple[str, str]]]] = {}
    current: str | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if head := _WALK.match(line):
            current = head["name"]
            found[current] = (int(head["count"]), [])
        elif current is not None and (step := _STEP.match(line)):
            found[current][1].append((step["path"], step["name"]))
        elif line.startswith("#"):
            current = None
    return found


def defined_names(path: Path) -> set[str]:
    """Every function, class and module-level name a module defines, methods included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_the_doc_has_the_three_walks() -> None:
    assert len(walks()) == 3
    assert all(steps for _, steps in walks().values())


@pytest.mark.parametrize("walk", sorted(walks()))
def test_a_walk_counts_its_modules(walk: str) -> None:
    count, steps = walks()[walk]
    assert count == len({path for path, _ in steps}), steps


@pytest.mark.parametrize(("path", "name"), sorted({s for _, steps in walks().values() for s in steps}))
def test_every_step_names_what_its_module_defines(path: str, name: str) -> None:
    module = REPO / path
    assert module.is_file(), path
    assert name in defined_names(module), f"{path} defines no {name}"
