"""Helpers shared by the verbs: loading the config with a clean error, refusing the shipped example,
printing JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:   # the config module brings pydantic: loaded when a verb runs, not for its --help
    from sparktui.config import SparkConfig

T = TypeVar("T")


def config_from_args(args: argparse.Namespace) -> SparkConfig:
    """Load the config the user meant, or exit 2 with a message naming the file, key and fault."""
    from sparktui.config import ConfigError, find_config, load_config, user_config_path

    path = find_config(getattr(args, "config", None))
    if path is None:
        print(f"sparktui: no config found ({looked_at(None)}; no --config or $SPARKTUI_CONFIG). "
              f"Run `sparktui init` to write {user_config_path()}, or copy the example config.toml there "
              "and edit it, or try `sparktui --demo`.", file=sys.stderr)
        raise SystemExit(ExitStatus.USAGE)
    try:
        return load_config(path)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(ExitStatus.USAGE) from None


def looked_at(found: Path | None, environ: Mapping[str, str] | None = None) -> str:
    """The default locations the lookup went through and what each held, for a message about the config
    found there (``found``, the shipped example) or about none found: "looked at ~/.config/sparktui/
    config.toml: no file; ./config.toml: the shipped example (cluster.example = true)"."""
    from sparktui.config import default_locations

    said = []
    for place in default_locations(environ):
        if place == found:
            said.append(f"{shown_path(place)}: the shipped example (cluster.example = true)")
            break
        said.append(f"{shown_path(place)}: no file")
    return "looked at " + "; ".join(said)


def shown_path(path: Path | None) -> str:
    """A path from the lookup as a message shows it: a relative one (``config.toml``, looked for in the
    working folder) with its ``./``, so it reads as a place and not as a bare name."""
    if path is None or path.is_absolute() or str(path).startswith("."):
        return str(path)
    return f"./{path}"


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, with asyncio imported only now: a verb's ``--help`` never pays for it (it
    brings ssl and concurrent.futures, a third of a headless verb's start)."""
    import asyncio

    return asyncio.run(main)


def positive_number(text: str, unit: str) -> float:
    """An argparse type's check: a number of ``unit`` above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of {unit}: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 {unit}, got {text}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above zero (a zero or negative timeout would give up at once)."""
    return positive_number(text, "seconds")


def positive_minutes(text: str) -> float:
    """An argparse type: a number of minutes above zero."""
    return positive_number(text, "minutes")


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def refuse_example(args: argparse.Namespace, config: SparkConfig, verb: str, hint: str) -> bool:
    """Say so and return True when the config came from the default lookup and is still the shipped
    example: it names no real machines, so no verb may act on it. ``--config`` or ``$SPARKTUI_CONFIG``
    naming it is taken as meant."""
    from sparktui.config import find_config, user_config_path

    explicit = getattr(args, "config", None) or os.environ.get("SPARKTUI_CONFIG")
    if not config.cluster.example or explicit:
        return False
    path = find_config(None)
    print(f"sparktui {verb}: no config of yours found ({looked_at(path)}), and the example names no real "
          f"machines. Run `sparktui init` to write {user_config_path()}, or describe your Sparks in "
          f"{shown_path(path)} (and delete `example = true`), or pass --config PATH. {hint}".rstrip(),
          file=sys.stderr)
    return True


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")
