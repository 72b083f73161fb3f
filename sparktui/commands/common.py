"""Helpers shared by the verbs: loading the config with a clean error, printing JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sparktui.config import ConfigError, SparkConfig, find_config, load_config


class NoConfig(Exception):
    pass


def config_from_args(args: argparse.Namespace) -> SparkConfig:
    """Load the config the user meant, or exit 2 with a message naming the file, key and fault."""
    path = find_config(getattr(args, "config", None))
    if path is None:
        print("sparktui: no config found (tried --config, $SPARKTUI_CONFIG, ./config.toml, "
              "~/.config/sparktui/config.toml). Copy the example config.toml and edit it, "
              "or try `sparktui --demo`.", file=sys.stderr)
        raise SystemExit(2)
    try:
        return load_config(path)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(2) from None


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def not_implemented(verb: str) -> int:
    print(f"sparktui {verb}: not implemented yet", file=sys.stderr)
    return 3
