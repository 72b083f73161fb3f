"""No class in the dashboard (``sparktui/ui``) or the SSH side (``sparktui/remote``) over ``LIMIT`` lines: a
class that long does more than one job (issue 32). The classes still over it are listed with their length
now; they may only shrink (the aim: an empty list), and no other class may cross the limit."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sparktui/ui", "sparktui/remote")
LIMIT = 300

#: "module:Class" → its length in lines when it was listed. Lower a number when a class shrinks; remove the
#: entry when it is under the limit.
STILL_TOO_LONG: dict[str, int] = {}


def class_lengths(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, int]:
    """Every class (nested ones too) in ``packages`` → its lines, from ``class`` to its last line."""
    lengths: dict[str, int] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.ClassDef):
                    end = node.end_lineno or node.lineno
                    lengths[f"{module}:{node.name}"] = end - node.lineno + 1
    return lengths


def test_no_class_grows_past_the_limit() -> None:
    lengths = class_lengths()
    too_long = {name: n for name, n in lengths.items() if n > LIMIT}
    new = {name: n for name, n in too_long.items() if name not in STILL_TOO_LONG}
    grown = {name: (n, STILL_TOO_LONG[name]) for name, n in too_long.items()
             if name in STILL_TOO_LONG and n > STILL_TOO_LONG[name]}
    assert not new, f"classes over {LIMIT} lines (split them by job): {new}"
    assert not grown, f"listed classes grew (now, listed): {grown}"


def test_the_list_names_only_classes_still_too_long() -> None:
    """A listed class that is gone, or now under the limit, comes off the list (so the list only shrinks)."""
    lengths = class_lengths()
    stale = {name: lengths.get(name) for name in STILL_TOO_LONG if lengths.get(name, 0) <= LIMIT}
    assert not stale, f"remove from STILL_TOO_LONG (now under {LIMIT} lines or gone): {stale}"


def test_lengths_count_from_class_to_its_last_line(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "class A:\n    x = 1\n\n    class B:\n        def f(self) -> None:\n            pass\n"
        "\n\nclass C: ...\n")
    assert class_lengths(tmp_path, ("pkg",)) == {"pkg.m:A": 6, "pkg.m:B": 3, "pkg.m:C": 1}
