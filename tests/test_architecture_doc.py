"""docs/architecture.md's walks stay true: they are the ones ``benchmarks/walks.py`` measures (the same
modules in the same order, each with the function entered first, and the same counts of modules, calls and
hops), and every step names a module that exists and a function that module defines."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"

#: A walk's heading: "**A log line → its stage bar** (12 modules on the path; 27 modules, 351 calls
#: touched; 3 hops):".
_WALK = re.compile(r"^\*\*(?P<name>[^*]+)\*\* \((?P<path>\d+) modules on the path; (?P<modules>\d+) modules, "
                   r"(?P<calls>\d+) calls touched; (?P<hops>\d+) hops\):$")
#: A segment's path: "Path: `sparktui/remote/log_feed.py` `LogFeed.follow_engine_log` → …".
_PATH = re.compile(r"`(?P<path>sparktui/[\w/]+\.py)` `(?P<name>[\w.<>]+)`")
#: The issue's bound on each walk's path.
MOST_MODULES_ON_A_PATH = 12
#: One step: "1. `sparktui/remote/log_feed.py` — `LogFeed.follow_engine_log`".
_STEP = re.compile(r"^\d+\. `(?P<path>sparktui/[\w/]+\.py)` — `(?P<name>[\w.<>]+)`$")


@dataclass
class DocWalk:
    path_modules: int
    modules: int
    calls: int
    hops: int
    steps: list[tuple[str, str]]
    #: Each segment's path, as written.
    paths: list[list[tuple[str, str]]]


def walks() -> dict[str, DocWalk]:
    """Walk name → what the doc says of it."""
    found: dict[str, DocWalk] = {}
    current: str | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if head := _WALK.match(line):
            current = head["name"]
            found[current] = DocWalk(int(head["path"]), int(head["modules"]), int(head["calls"]),
                                     int(head["hops"]), [], [])
        elif current is not None and line.startswith("Path: "):
            found[current].paths.append([(m["path"], m["name"]) for m in _PATH.finditer(line)])
        elif current is not None and (step := _STEP.match(line)):
            found[current].steps.append((step["path"], step["name"]))
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
    assert all(walk.steps for walk in walks().values())


@pytest.mark.parametrize("walk", sorted(walks()))
def test_a_walk_counts_its_modules(walk: str) -> None:
    found = walks()[walk]
    assert found.modules == len({path for path, _ in found.steps}) == len(found.steps), found.steps


@pytest.mark.parametrize("walk", sorted(walks()))
def test_a_walks_path_counts_its_modules_and_stays_short(walk: str) -> None:
    found = walks()[walk]
    on_path = {module for path in found.paths for module, _ in path}
    assert found.path_modules == len(on_path) <= MOST_MODULES_ON_A_PATH, sorted(on_path)


def named_steps() -> list[tuple[str, str]]:
    """Every (module, function) the walks name: in the lists of modules and on the paths."""
    return sorted({s for w in walks().values() for s in (*w.steps, *(s for p in w.paths for s in p))})


@pytest.mark.parametrize(("path", "name"), named_steps())
def test_every_step_names_what_its_module_defines(path: str, name: str) -> None:
    module = REPO / path
    assert module.is_file(), path
    defined = defined_names(module)
    parts = [part for part in name.split(".") if part != "<locals>"]
    assert all(part in defined for part in parts), f"{path} defines no {name}"


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    """``benchmarks/walks.py --json``: the walks run with the real code (a few seconds)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "walks.py"), "--json"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=120, check=True).stdout
    return {walk["walk"]: walk for walk in json.loads(out)}


@pytest.mark.parametrize("walk", sorted(walks()))
def test_a_walk_is_the_one_measured(walk: str, measured: dict[str, Any]) -> None:
    """When this fails the code's path changed: write the walk again from
    ``benchmarks/walks.py --markdown``."""
    found, run = walks()[walk], measured[walk]
    assert found.steps == [(m["module"], m["function"]) for m in run["order"]]
    assert found.paths == [[(m["module"], m["function"]) for m in s["path"]] for s in run["segments"]]
    assert (found.path_modules, found.modules, found.calls, found.hops) == (
        run["path_modules"], run["modules"], run["calls"], run["hops"])
