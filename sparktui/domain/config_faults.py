"""A config fault in words: pydantic's error entries (``ValidationError.errors()``) as sentences a user of
config.toml reads, in TOML's terms (text, whole number, true or false, list, table), never pydantic's
("Input should be a valid integer", "Tuple should have at least 1 item after validation").

Pure: it reads the plain mappings pydantic returns. The error types (``ConfigProblem``, ``ConfigError``) and
the key path live here too, below both the config schema and the recipes that report faults the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ConfigProblem:
    key_path: str
    fault: str


class ConfigError(Exception):
    """A config that cannot be used; ``str()`` names the file, each key path and its fault."""

    def __init__(self, path: Path | str | None, problems: Sequence[ConfigProblem],
                 headline: str | None = None):
        self.path = str(path) if path is not None else "<config>"
        self.problems = tuple(problems)
        #: The first line; a file that is not there or cannot be read is no "invalid config".
        self.headline = headline or f"{self.path}: invalid config"
        super().__init__(self._render())

    def _render(self) -> str:
        lines = [self.headline]
        lines += [f"  {self.path}: {p.key_path}: {p.fault}" for p in self.problems]
        return "\n".join(lines)


def key_path(loc: Sequence[int | str]) -> str:
    """Turn pydantic's location into a TOML key path: ``nodes[1].role``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<top level>"


def config_problem(err: Mapping[str, Any]) -> ConfigProblem:
    """One pydantic error entry as a problem: its key path and its fault in words."""
    return ConfigProblem(key_path(err["loc"]), fault_sentence(err))


#: Keys whose value is a command line (an argv list): "at least one word (the command)".
_ARGV_KEYS = ("vllm_command", "ray_command", "ray_python", "gpu_list_command")


def toml_value(value: Any) -> str:
    """A value as config.toml spells it (``"text"``, ``true``, ``3``), or what it is when it is large."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "an empty list" if not value else "a list"
    if isinstance(value, Mapping):
        return "a table"
    return type(value).__name__


def _at_least(err: Mapping[str, Any], ctx: Mapping[str, Any]) -> str:
    n = int(ctx.get("min_length", 1))
    key = str(err["loc"][-1]) if err.get("loc") else ""
    if key in _ARGV_KEYS and n == 1:
        return "must list at least one word (the command)"
    if key == "nodes":
        return "must list at least one node (a [[nodes]] table)"
    return f"must list at least {n} item{'' if n == 1 else 's'}"


def _number(value: Any) -> str:
    """A bound as written in the docs: 60, not 60.0."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _bound(word: str, limit: str) -> Callable[[Mapping[str, Any], Mapping[str, Any]], str]:
    return lambda _err, ctx: f"must be {word.format(_number(ctx.get(limit)))}"


_SENTENCES: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], str]] = {
    "missing": lambda _e, _c: "required key is missing",
    "extra_forbidden": lambda _e, _c: "unknown key (check the spelling; see config.toml for the keys)",
    "too_short": _at_least,
    "string_too_short": lambda _e, _c: "must not be empty",
    "string_type": lambda _e, _c: "must be text (in quotes)",
    "int_type": lambda _e, _c: "must be a whole number",
    "int_parsing": lambda _e, _c: "must be a whole number",
    "int_from_float": lambda _e, _c: "must be a whole number",
    "float_type": lambda _e, _c: "must be a number",
    "float_parsing": lambda _e, _c: "must be a number",
    "bool_type": lambda _e, _c: "must be true or false",
    "bool_parsing": lambda _e, _c: "must be true or false",
    "tuple_type": lambda _e, _c: "must be a list (e.g. [\"a\", \"b\"])",
    "list_type": lambda _e, _c: "must be a list (e.g. [\"a\", \"b\"])",
    "dict_type": lambda _e, _c: "must be a table (key = value pairs)",
    "model_type": lambda _e, _c: "must be a table (key = value pairs)",
    "model_attributes_type": lambda _e, _c: "must be a table (key = value pairs)",
    # pydantic lists the choices in Python's quotes ('docker' or 'host'); TOML's are double.
    "literal_error": lambda _e, ctx: f"must be one of {str(ctx.get('expected')).replace(chr(39), chr(34))}",
    "greater_than_equal": _bound("{} or more", "ge"),
    "greater_than": _bound("more than {}", "gt"),
    "less_than_equal": _bound("{} or less", "le"),
    "less_than": _bound("less than {}", "lt"),
    "byte_size": lambda _e, _c: "must be a size such as \"4GiB\", \"512MiB\" or a number of bytes",
    "byte_size_unit": lambda _e, ctx: f"must be a size such as \"4GiB\" or \"512MiB\" (unknown unit "
                                      f"{ctx.get('unit')!r})",
}


def fault_sentence(err: Mapping[str, Any]) -> str:
    """One pydantic error entry as a sentence: what the key must be, and what it got."""
    kind = str(err.get("type", ""))
    ctx = err.get("ctx") or {}
    sentence = _SENTENCES.get(kind)
    if sentence is not None:
        text = sentence(err, ctx)
    else:
        # Our own validators' messages are already sentences; anything else gets pydantic's wording
        # turned into ours.
        text = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        text = text.replace("Input should be", "must be").replace(" should ", " must ")
    if kind in ("missing", "extra_forbidden") or "input" not in err:
        return text
    return f"{text}, got {toml_value(err['input'])}"
