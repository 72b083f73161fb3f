"""`sparktui stop [--json] [--dry-run]`: vLLM (SIGINT → SIGTERM → SIGKILL), Ray on every node, our
containers; then verify that nothing of ours remains on any node (else say exactly what). Idempotent."""

from __future__ import annotations

import argparse

from sparktui.commands.start import add_operation_arguments, run_operation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_operation_arguments(parser, waits=False)


def run(args: argparse.Namespace) -> int:
    return run_operation(args, "stop")
