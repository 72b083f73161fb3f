"""Just enough of a TOML writer for the test bed's config files (no TOML writer is a dependency).

Covers what config.toml uses: tables, arrays of tables, strings, numbers, booleans, arrays of scalars.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"cannot write {value!r} to TOML here")
        return repr(value)
    if isinstance(value, str):
        # A JSON string is a valid TOML basic string (same escapes).
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _emit(lines: list[str], path: list[str], table: Mapping[str, Any], header: str | None) -> None:
    if header is not None:
        if lines:
            lines.append("")
        lines.append(header)
    subtables: list[tuple[str, Mapping[str, Any]]] = []
    arrays: list[tuple[str, list[Mapping[str, Any]]]] = []
    for key, value in table.items():
        if value is None:
            continue  # TOML has no null: leaving the key out means "default"
        if isinstance(value, Mapping):
            subtables.append((key, value))
        elif _is_table_array(value):
            arrays.append((key, list(value)))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, sub in subtables:
        dotted = ".".join(_key(p) for p in [*path, key])
        _emit(lines, [*path, key], sub, f"[{dotted}]")
    for key, items in arrays:
        dotted = ".".join(_key(p) for p in [*path, key])
        for item in items:
            _emit(lines, [*path, key], item, f"[[{dotted}]]")


def dumps(data: Mapping[str, Any]) -> str:
    lines: list[str] = []
    _emit(lines, [], data, None)
    return "\n".join(lines) + "\n"
