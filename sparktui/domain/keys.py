"""The dashboard's key bindings as data: binding id → default keys, and the ``[ui.keys]`` conflict rule.

Here rather than in the UI so that ``config.py`` can refuse a conflict when the file is read (naming the
file, the key path and both actions), and the app builds its bindings from the same table.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Binding id → its default keys (Textual key names, comma-separated), in the footer's order.
DEFAULT_KEYS: dict[str, str] = {
    "start": "s",
    "restart": "r",
    "stop": "x",
    "smoke_test": "t",
    "bench": "b",
    "bench_chart": "B",
    "linktest": "L",
    "fix": "F",
    "find": "slash",
    "help": "question_mark",
    "quit": "q",
    "filter": "f",
    "level": "l",
    "node": "o",
    "log_source": "w",
    "full_log": "z",
    "pause": "p",
    "processes": "P",
    "engine": "e",
    "find_next": "n",
    "find_previous": "N",
    "log_down": "j",
    "log_up": "k",
    "log_page_down": "pagedown",
    "log_page_up": "pageup",
    "log_top": "g,home",
    "follow": "G,end",
    "wrap": "W",
    "probes": "h",
    "copy_line": "c",
    "save_log": "ctrl+s",
}

#: The help screen's groups, in its order, each with its binding ids in the order listed there. Every id of
#: ``DEFAULT_KEYS`` is in exactly one group (a test holds this).
KEY_GROUPS: dict[str, tuple[str, ...]] = {
    "Engine": ("start", "restart", "stop", "smoke_test", "bench", "linktest", "fix"),
    "Log": ("find", "find_next", "find_previous", "filter", "level", "node", "log_source", "probes", "wrap",
            "log_down", "log_up", "log_page_down", "log_page_up", "log_top", "follow", "copy_line",
            "save_log"),
    "View": ("full_log", "engine", "processes", "bench_chart", "pause"),
    "App": ("help", "quit"),
}

#: What a user may write for a key, in the name Textual gives it (so "/" and "slash" conflict).
_KEY_ALIASES = {"/": "slash", "?": "question_mark", " ": "space", "+": "plus", "-": "minus"}


def key_names(spec: str) -> list[str]:
    """``"x, ctrl+x"`` → ``["x", "ctrl+x"]`` (empty pieces dropped, aliases to Textual's names)."""
    keys = []
    for piece in spec.split(","):
        key = piece if piece == " " else piece.strip()
        if key:
            keys.append(_KEY_ALIASES.get(key, key))
    return keys


def effective_keys(overrides: Mapping[str, str]) -> dict[str, list[str]]:
    """Binding id → its keys as bound once ``overrides`` (``[ui.keys]``) replace the defaults."""
    return {a: key_names(overrides.get(a, default)) for a, default in DEFAULT_KEYS.items()}


def key_problems(overrides: Mapping[str, str]) -> dict[str, str]:
    """Binding id (of ``overrides``) → fault: unknown ids, no key at all, and keys that two actions would
    share once ``overrides`` replace the defaults (``stop = "s"`` while Start keeps "s")."""
    problems: dict[str, str] = {}
    # A screen's own bindings ("confirm.yes", "processes.close") live in that screen's scope: remapped as
    # given, never compared with the dashboard's keys (a dialog may reuse "n").
    overrides = {a: spec for a, spec in overrides.items() if "." not in a or not key_names(spec)}
    for action, spec in overrides.items():
        if "." in action:
            problems[action] = "names no key"
        elif action not in DEFAULT_KEYS:
            problems[action] = f"unknown action (known: {', '.join(DEFAULT_KEYS)})"
        elif not key_names(spec):
            problems[action] = "names no key"
    effective = effective_keys(overrides)
    owners: dict[str, list[str]] = {}
    for action, keys in effective.items():
        for key in dict.fromkeys(keys):
            owners.setdefault(key, []).append(action)
    for key, actions in owners.items():
        if len(actions) < 2:
            continue
        for action in actions:
            if action in overrides and action not in problems:
                others = [a for a in actions if a != action]
                how = ", ".join(f"{o} ({'[ui.keys]' if o in overrides else 'default'})" for o in others)
                problems[action] = f"key {key!r} is also bound to {how}: two actions cannot share a key"
    return problems
