"""`sparktui restart [--wait] [--json] [--dry-run]`: stop (verified), then start."""

from __future__ import annotations

import argparse

from sparktui.commands.start import add_operation_arguments, run_operation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_operation_arguments(parser, waits=True)


def run(args: argparse.Namespace) -> int:
    return run_operation(args, "restart")
