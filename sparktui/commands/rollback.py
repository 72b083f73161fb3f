"""`sparktui rollback [--dry-run] [--yes] [--json]`: back to the image before the one in use, the way
`sparktui upgrade` switches (checked before any downtime, verified after, rolled back again if it fails)."""

from __future__ import annotations

import argparse
import sys

from sparktui.commands import upgrade as U
from sparktui.commands.common import config_from_args, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = U.EPILOG
    U.add_common(parser)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if refuse_example(args, config, "rollback", ""):
        return ExitStatus.USAGE
    if config.engine.runtime != "docker":
        print("sparktui rollback: engine.runtime is \"host\": there is no image to return to",
              file=sys.stderr)
        return ExitStatus.USAGE
    return run_async(U.upgrade(config, None, args))
