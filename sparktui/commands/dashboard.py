"""`sparktui` with no verb: the dashboard (placeholder until the dashboard lands)."""

from __future__ import annotations

import argparse

from sparktui.commands.common import not_implemented


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    return not_implemented("dashboard")
