"""Textual's private parts stay in ``sparktui/ui/textual_compat.py``, and what that module relies on still
holds.

The scan (:func:`test_textual_privates_only_in_the_compat_module`) reads every module of ``sparktui`` with
``ast`` and fails, naming file, line and what it found, on any of these outside ``ui/textual_compat.py``:

1. an import from a private Textual module or of a private name: ``textual._x``, ``textual.widgets._x``,
   ``from textual.x import _y`` (any dotted part or imported name starting with one underscore);
2. in a module that imports Textual, an attribute ``_x`` (one underscore, not a dunder) read or set on
   anything but the bare names ``self``/``cls`` — ``super()._x``, ``app._x``, ``widget.screen._x`` — unless
   its receiver is a module imported by name that is not Textual's (``os._exit``);
3. in a class with a Textual ancestor, ``self._x``/``cls._x`` or a method ``_x`` where ``_x`` is one of that
   ancestor's private names (a class attribute, or an attribute its source reaches as ``self._x``): an
   override or a use of Textual's internals that rule 2 cannot see (``self._clock``, ``def _on_mount``).

Our own privates (``self._lines`` of our widget, ``_draw``) pass: rule 3 looks only at names Textual's
classes use. A class defined inside a function is not resolved for rule 3.

Then one test per use in ``textual_compat``: each fails with a message naming the Textual behaviour that
changed, so a new Textual release that breaks one says what to fix.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Footer, Log

from sparktui.ui.textual_compat import FooterKey, InlineWidthLog, update_scrollbars, widen_log

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "sparktui"
COMPAT = PACKAGE / "ui" / "textual_compat.py"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private_imports(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name.split(".")[0] == "textual" and any(map(_private, a.name.split(".")))]
        elif (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "textual"
              and (any(map(_private, node.module.split("."))) or any(_private(a.name) for a in node.names))):
            names = ", ".join(a.name for a in node.names)
            found.append((node.lineno, f"from {node.module} import {names}"))
    return found


def _imports_textual(tree: ast.Module) -> bool:
    return any((isinstance(n, ast.Import) and any(a.name.split(".")[0] == "textual" for a in n.names))
               or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "textual")
               for n in ast.walk(tree))


def _foreign_modules(tree: ast.Module) -> set[str]:
    """Names bound by ``import x`` (not Textual): ``os._exit`` reaches into ``os``, not into Textual."""
    return {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
            for a in n.names if a.name.split(".")[0] != "textual"}


def _private_attributes(tree: ast.Module) -> list[tuple[int, str]]:
    foreign = _foreign_modules(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            receiver = node.value
            if isinstance(receiver, ast.Name) and (receiver.id in ("self", "cls") or receiver.id in foreign):
                continue
            found.append((node.lineno, ast.unparse(node)))
    return found


@functools.cache
def _textual_private_names(cls: type) -> frozenset[str]:
    """``cls``'s private names: its class attributes and what its source reaches as ``self._x``."""
    names = {name for name in vars(cls) if _private(name)}
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return frozenset(names)
    names.update(n.attr for n in ast.walk(ast.parse(source))
                 if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
                 and _private(n.attr))
    return frozenset(names)


def _inherited_privates(module: ModuleType, tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for class_node in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        cls = getattr(module, class_node.name, None)
        if not isinstance(cls, type):
            continue
        textual_bases = [k for k in cls.__mro__ if k.__module__.split(".")[0] == "textual"]
        if not textual_bases:
            continue
        theirs = frozenset().union(*map(_textual_private_names, textual_bases))
        for node in ast.walk(class_node):
            name = None
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in ("self", "cls") and node.attr in theirs:
                name = f"{node.value.id}.{node.attr}"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in theirs:
                name = f"def {node.name}"
            if name:
                owners = [k.__name__ for k in textual_bases if name.rsplit(" ", 1)[-1].split(".")[-1]
                          in _textual_private_names(k)]
                found.append((node.lineno, f"{class_node.name}: {name} (Textual's {', '.join(owners)})"))
    return found


def test_textual_privates_only_in_the_compat_module() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == COMPAT:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(REPO)
        problems += [f"{where}:{line}: private Textual import: {what}"
                     for line, what in _private_imports(tree)]
        if not _imports_textual(tree):
            continue
        problems += [f"{where}:{line}: private attribute on a Textual object: {what}"
                     for line, what in _private_attributes(tree)]
        problems += [f"{where}:{line}: Textual's private name: {what}"
                     for line, what in _inherited_privates(importlib.import_module(_module_name(path)), tree)]
    assert not problems, ("Textual's private parts outside sparktui/ui/textual_compat.py (use the public "
                          "API, or add a named function there with a test here):\n" + "\n".join(problems))


def test_the_scan_finds_each_kind_of_private_use() -> None:
    """The scan's rules catch what they say (so a clean scan means something)."""
    source = textwrap.dedent("""
        import os
        from textual.widgets._footer import FooterKey
        from textual.widgets import Log
        class L(Log):
            def _update_size(self, updates, lines):
                self._update_maximum_width(updates, 1)
                super()._update_size(updates, lines)
                os._exit(0)
                self.screen._compositor
                self.mine = self._clock
            def _own_helper(self):
                return self._lines
    """)
    tree = ast.parse(source)
    module = ModuleType("scanned")
    exec(compile(tree, "scanned", "exec"), module.__dict__)
    assert [w for _, w in _private_imports(tree)] == ["from textual.widgets._footer import FooterKey"]
    attributes = sorted(w for _, w in _private_attributes(tree))
    assert attributes == ["self.screen._compositor", "super()._update_size"]
    inherited = [w.split(" (")[0] for _, w in _inherited_privates(module, tree)]
    assert sorted(inherited) == ["L: def _update_size", "L: self._lines", "L: self._update_maximum_width"]


# ---- one test per use in textual_compat --------------------------------------------------------------

class _FooterApp(App[None]):
    BINDINGS: ClassVar[list[Binding]] = [Binding("x", "bell", "Ring"), Binding("q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Footer()


async def test_footer_composes_footer_keys_with_key_description_and_action() -> None:
    app = _FooterApp()
    async with app.run_test(size=(80, 5)) as pilot:
        await pilot.pause()
        keys = list(app.query(FooterKey))
        assert keys, ("Textual's Footer no longer composes textual.widgets._footer.FooterKey widgets "
                      "(FittedFooter ranks and drops those to fit the width)")
        ring = next((k for k in keys if k.action == "bell"), None)
        assert ring is not None, "FooterKey no longer carries its binding's action as .action"
        assert (ring.key_display, ring.description) == ("x", "Ring"), (
            "FooterKey no longer carries .key_display and .description as FittedFooter measures them")


class _RecordingLog(InlineWidthLog):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[tuple[int, list[str]]] = []

    def lines_written(self, updates: int, lines: list[str]) -> None:
        self.batches.append((updates, list(lines)))
        super().lines_written(updates, lines)


class _LogApp(App[None]):
    def compose(self) -> ComposeResult:
        yield _RecordingLog()


async def test_log_hands_each_batch_to_update_size_and_widens_for_its_update_only() -> None:
    app = _LogApp()
    async with app.run_test(size=(40, 10)) as pilot:
        log = app.query_one(_RecordingLog)
        log.write_lines(["a" * 50, "b" * 70])
        assert log.batches and log.batches[-1][1] == ["a" * 50, "b" * 70], (
            "Log.write_lines no longer calls self._update_size(updates, new_lines) once per batch "
            "(InlineWidthLog measures there, without Textual's thread worker)")
        assert log.virtual_size.width == 70, (
            "Log._update_maximum_width(updates, size) no longer sets virtual_size's width for the current "
            "update")
        stale = log.batches[-1][0]
        log.clear()
        widen_log(log, stale, 500)
        await pilot.pause()
        assert log.virtual_size.width == 0, (
            "Log._update_maximum_width no longer ignores a width measured before Log.clear() (its update "
            "counter)")


class _ScrollApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Log()


async def test_scroll_update_sets_the_scrollbars_and_keeps_the_offset_in_range() -> None:
    app = _ScrollApp()
    async with app.run_test(size=(40, 10)) as pilot:
        log = app.query_one(Log)
        log.write_lines(f"line {i}" for i in range(200))
        await pilot.pause()
        log.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert log.scroll_y > 50
        log.set_reactive(Widget.virtual_size, Size(10, 30))
        update_scrollbars(log, Size(10, 30))
        assert log.vertical_scrollbar.window_virtual_size == 30, (
            "Widget._scroll_update(virtual_size) no longer gives the vertical scrollbar the new virtual size")
        assert log.scroll_y <= 30, (
            "Widget._scroll_update(virtual_size) no longer keeps scroll_y within the new virtual size")


@pytest.mark.parametrize("name", ["FooterKey", "InlineWidthLog", "update_scrollbars", "widen_log"])
def test_every_compat_name_has_a_docstring_naming_what_it_relies_on(name: str) -> None:
    import sparktui.ui.textual_compat as compat

    obj: Any = getattr(compat, name)
    if name == "FooterKey":   # a re-exported type: its comment in the module says it
        assert "FooterKey" in inspect.getsource(compat)
        return
    assert "Relies on" in (obj.__doc__ or ""), f"{name}: say which Textual behaviour it relies on"
