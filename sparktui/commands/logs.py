"""`sparktui logs` (placeholder until its issue lands)."""

from __future__ import annotations

import argparse

from sparktui.commands.common import not_implemented


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    return not_implemented("logs")
