"""The tests do not lean on the wall clock or on private parts: no fixed sleep followed by an assert (slow
on an idle machine, flaky on a busy one: wait for the condition, ``tests/waiting.py``), and no read of a
private attribute (``x._name``) of another object (it pins the test to one implementation: use the public
API).

Read with ``ast``, every ``.py`` under ``tests/``. What is left is listed below, each with its reason."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: A call to a function of this name waits a fixed time: ``time.sleep``, ``asyncio.sleep``, and Pilot's
#: ``pause`` when given a delay (``pause()`` alone waits for the app to be idle: a condition, not a time).
#: ``asyncio.sleep(0)`` is not a wait: it gives the loop one turn (the callbacks and task steps already due
#: run), the same on any machine, so what follows it is decided by the code, not by the clock.
SLEEPS = frozenset({"sleep"})

_SSH_BACKEND = ("SshBackend's flush loop, log feed and memory guard have no public seam yet: a test drives "
                "them one by one, without nodes")
_TEXTUAL = ("Textual has no public API for this; a helper belongs in ui/textual_compat.py (issue 32 item 4), "
            "where a Textual upgrade that changes it is caught")
_SPARKLINE = ("the sparkline's column cut, checked against its definition sample by sample; through the "
              "screen this would be a snapshot per case")
_NOT_SPARKTUI = "not a sparktui object"

#: Private reads kept, by file and expression, each with why no public way exists (yet).
PRIVATE_READS_ALLOWED: dict[tuple[str, str], str] = {
    ("tests/fixtures/telemetry/nvml/gb10_pynvml.py", "NVMLError._valClassMapping"):
        f"{_NOT_SPARKTUI}: the fake pynvml's own error registry, named as pynvml names it",
    ("tests/conftest.py", "super()._split_scope"):
        f"{_NOT_SPARKTUI}: xdist's own extension point (a scheduler subclass says which unit a test is in)",
    ("tests/test_cli_imports.py", "parser._actions"):
        f"{_NOT_SPARKTUI}: argparse has no public list of a parser's sub-commands",
    ("tests/test_memory_guard.py", "backend.session.truth._set"):
        "EngineTruth moves only on evidence (no public setter, by design); the test puts it in a state "
        "directly instead of feeding a whole start",
    ("tests/test_lifecycle_executor.py", "controller._run_plan"):
        "the plan runner's cancel/skip rules on hand-made plans; no verb runs an arbitrary plan",
    ("tests/test_lifecycle_executor.py", "controller._exclusive"):
        "holding the operation lock without running an operation (a real one ends before the refusal "
        "can be seen)",
    ("tests/test_log_access.py", "tl._requests_served"):
        "the count reaches the public facts only when serving ends; these logs end while serving",
    ("tests/test_log_follower.py", "follower._proc"):
        "the follower's SSH channel, killed mid-stream as a lost connection would; no public handle",
    ("tests/test_probe.py", "node_probe._id_name"):
        "the node probe's sysfs parsers; issue 32 item 2 splits probe.py into one-job modules",
    ("tests/test_probe.py", "node_probe._rate_gbps"):
        "the node probe's sysfs parsers; issue 32 item 2 splits probe.py into one-job modules",
    ("tests/test_ui_failure_diagnosis.py", "app.screen._compositor"): f"{_TEXTUAL} (the screen's text)",
    ("tests/test_ui_idle.py", "bar._timers"): f"{_TEXTUAL} (a widget's timers)",
    ("tests/test_ui_idle.py", "t._active"): f"{_TEXTUAL} (whether a timer runs)",
    ("tests/ui_fakes.py", "app._notifications"): f"{_TEXTUAL} (the notifications shown)",
    ("tests/test_ui_sparkline.py", "spark._prepare"): _SPARKLINE,
    ("tests/test_ui_sparkline.py", "spark._aligned_columns"): _SPARKLINE,
    ("tests/test_ui_sparkline.py", "spark._values"): _SPARKLINE,
}


def _files() -> Iterator[Path]:
    for path in sorted(TESTS.rglob("*.py")):
        if "__snapshots__" not in path.parts:
            yield path


def _name(path: Path) -> str:
    return path.relative_to(TESTS.parent).as_posix()


def _call(stmt: ast.stmt) -> ast.Call | None:
    if not isinstance(stmt, ast.Expr):
        return None
    value = stmt.value.value if isinstance(stmt.value, ast.Await) else stmt.value
    return value if isinstance(value, ast.Call) else None


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_fixed_wait(stmt: ast.stmt) -> bool:
    """``sleep(…)``, ``pilot.pause(delay)``, or a loop that does nothing but those."""
    call = _call(stmt)
    if call is not None:
        name = _called(call)
        if name in SLEEPS:
            args = call.args
            return not (len(args) == 1 and isinstance(args[0], ast.Constant) and args[0].value == 0)
        return name == "pause" and bool(call.args or call.keywords)
    # A counted loop of waits is one long wait (a ``while`` loop waits for its condition: fine).
    if isinstance(stmt, ast.For | ast.AsyncFor) and not stmt.orelse:
        return (any(_is_fixed_wait(s) for s in stmt.body)
                and all(_is_fixed_wait(s) or _is_idle_wait(s) for s in stmt.body))
    return False


def _is_idle_wait(stmt: ast.stmt) -> bool:
    call = _call(stmt)
    return call is not None and _called(call) == "pause" and not (call.args or call.keywords)


def _asserts(stmt: ast.stmt) -> bool:
    """An ``assert``, or a ``with pytest.raises(…)`` block (an assert that something fails)."""
    if isinstance(stmt, ast.Assert):
        return True
    return isinstance(stmt, ast.With | ast.AsyncWith) and any(
        isinstance(item.context_expr, ast.Call) and _called(item.context_expr) == "raises"
        for item in stmt.items)


def sleeps_before_asserts(tree: ast.AST) -> list[int]:
    """Lines of fixed waits whose next statement in the same block (past any ``pilot.pause()``, which only
    lets the app catch up) is an ``assert`` or a ``pytest.raises``."""
    found = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block):
                if not _is_fixed_wait(stmt):
                    continue
                after = i + 1
                while after < len(block) and (_is_idle_wait(block[after]) or _is_fixed_wait(block[after])):
                    after += 1
                if after < len(block) and _asserts(block[after]):
                    found.append(stmt.lineno)
    return sorted(found)


def private_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """``x._name`` read where ``x`` is not ``self``/``cls`` (a class's own privates are its business)."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
                and node.attr.startswith("_") and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_scan_finds_what_it_looks_for() -> None:
    tree = ast.parse(
        "async def t(pilot):\n"
        "    await asyncio.sleep(1)\n"
        "    await pilot.pause()\n"
        "    assert x\n"
        "    time.sleep(0.5)\n"
        "    assert y\n"
        "    for _ in range(3):\n"
        "        await asyncio.sleep(0.1)\n"
        "        await pilot.pause()\n"
        "    assert z\n"
        "    await asyncio.sleep(0.1)\n"   # a pace, not a wait for a result: fine
        "    post()\n"
        "    await pilot.pause()\n"        # waits for the app to be idle: fine
        "    assert w\n"
        "    await asyncio.sleep(0)\n"     # one turn of the loop: fine
        "    assert t\n"
        "    while not done():\n"         # a wait for a condition: fine
        "        time.sleep(0.1)\n"
        "    assert done()\n"
        "    time.sleep(0.05)\n"
        "    with pytest.raises(E):\n"
        "        f()\n"
        "    v = app._inbox\n"
        "    self._mine = 1\n"
        "    u = obj.__dict__\n")
    assert sleeps_before_asserts(tree) == [2, 5, 7, 20]
    assert private_reads(tree) == [(23, "app._inbox")]


def test_no_test_sleeps_and_then_asserts() -> None:
    found = [f"{_name(path)}:{line}" for path in _files()
             for line in sleeps_before_asserts(ast.parse(path.read_text(), str(path)))]
    assert not found, ("a fixed sleep followed by an assert (wait for the condition instead):\n"
                       + "\n".join(found))


def test_no_test_reads_a_private_attribute() -> None:
    found: list[str] = []
    seen: set[tuple[str, str]] = set()
    for path in _files():
        for line, expr in private_reads(ast.parse(path.read_text(), str(path))):
            seen.add((_name(path), expr))
            if (_name(path), expr) not in PRIVATE_READS_ALLOWED:
                found.append(f"{_name(path)}:{line}: {expr}")
    assert not found, "a private attribute read (use the public API):\n" + "\n".join(found)
    stale = sorted(set(PRIVATE_READS_ALLOWED) - seen)
    assert not stale, f"allowed private reads no test makes any more (remove them from the list): {stale}"
