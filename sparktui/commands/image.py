"""`sparktui image sync [--json]`: copy the head's engine image to every node whose image ID differs or is
missing (``docker save`` on the head streamed into ``docker load`` on the node; no registry, no temp file).

Exit status: 0 every node has the head's image, 1 a copy failed or was refused (e.g. the node's disk is
short), 2 no usable config (or ``engine.runtime = "host"``: no image).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from sparktui.commands.common import config_from_args, print_json, run_async
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:   # the config brings pydantic: loaded when the verb runs, not for its --help
    from sparktui.config import SparkConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 every node has the head's image, 1 failed or refused, 2 no usable "
                     "config (or engine.runtime = \"host\")")
    sub = parser.add_subparsers(dest="image_cmd", metavar="ACTION", required=True)
    sync = sub.add_parser("sync", help="copy the head's image to the nodes that lack it or differ")
    sync.add_argument("--json", action="store_true", help="print one JSON object at the end")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config.engine.runtime != "docker":
        print("sparktui image sync: engine.runtime is \"host\": there is no image to copy", file=sys.stderr)
        return ExitStatus.USAGE
    return run_async(_sync(config, args.json))


async def _sync(config: SparkConfig, as_json: bool) -> int:
    from sparktui.domain.lifecycle.image_copy import progress_line
    from sparktui.remote.cluster import close_cluster, open_cluster
    from sparktui.remote.image_sync import sync_image

    def progress(node: str, sent: int, total: int | None, seconds: float) -> None:
        if not as_json:
            print(progress_line(node, sent, total, seconds), flush=True)

    transports = await open_cluster(config)
    try:
        outcomes = await sync_image(config, transports, progress)
    finally:
        await close_cluster(transports)
    ok = all(o.ok for o in outcomes)
    if as_json:
        print_json({"image": config.engine.image, "ok": ok,
                    "nodes": [{"node": o.node, "action": o.action, "message": o.message, "bytes": o.bytes,
                               "seconds": round(o.seconds, 2)} for o in outcomes]})
    else:
        for o in outcomes:
            print(f"{o.node}: {o.action}: {o.message}")
    return ExitStatus.of(ok)
