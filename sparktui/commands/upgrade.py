"""`sparktui upgrade IMAGE [--dry-run] [--yes] [--json]`: a new engine image, tried with a way back.

Before any downtime: the image on the head (pulled there if a registry answers), copied to every node and
verified by image ID; the image in use kept on every node as the way back; the new image's vLLM version and
its `serve --help` against every flag this engine is started with; the serving engine's smoke test and a
short benchmark as the baseline. Then (after a yes, or with --yes) the switch under one hold of the
operation lock: stop, start on the new image, ready, smoke, the same benchmark. Promoted when it serves at
≥ `[upgrade] min_speed_ratio` of the baseline's output tokens/s (kept on the head: every later start uses
it); otherwise rolled back by itself to the image in use, verified serving again. `sparktui rollback`
returns to the image before the one in use, the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from sparktui.commands.common import config_from_args, print_json, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.remote.upgrade import UpgradeReport

EPILOG = ("exit status: 0 promoted (with --dry-run: every check passed; also: it is the image in use), "
          "1 the way back did not serve either (a person is needed), 2 no usable config or the host "
          "runtime, 5 another sparktui operation runs, 7 tried and rolled back (the previous image serves "
          "again), 8 refused before any downtime (nothing was changed)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("image", metavar="IMAGE", help="the new engine image (a tag or a digest)")
    add_common(parser)


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="distribute and check, measure the baseline; change nothing")
    parser.add_argument("--yes", action="store_true", help="switch without asking")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if refuse_example(args, config, "upgrade", ""):
        return ExitStatus.USAGE
    if config.engine.runtime != "docker":
        print("sparktui upgrade: engine.runtime is \"host\": vLLM is installed on the nodes, not an image — "
              "upgrade it there (the same version on every node), then `sparktui restart --wait`",
              file=sys.stderr)
        return ExitStatus.USAGE
    return run_async(upgrade(config, args.image, args))


async def upgrade(config: SparkConfig, image: str | None, args: argparse.Namespace) -> int:
    from sparktui.domain.events import OperationRefused
    from sparktui.domain.upgrade.images import ImageHistory, rollback_target
    from sparktui.remote.cluster import close_cluster, open_cluster
    from sparktui.remote.engine import EngineController
    from sparktui.remote.image_store import read_image_in_use
    from sparktui.remote.upgrade import ORIGIN, ImageUpgrade

    def stage(name: str, status: str, message: str) -> None:
        if not args.json:
            mark = {"running": "…", "ok": "✓", "failed": "✗", "skipped": "–"}.get(status, " ")
            print(f"{mark} {name:10} {message}", flush=True)

    async def confirm(report: UpgradeReport) -> bool:
        if args.yes:
            return True
        if not sys.stdin.isatty():
            print("sparktui upgrade: the switch stops the engine; pass --yes to go on without asking",
                  file=sys.stderr)
            return False
        # In a thread: the loop goes on meanwhile (the upgrade's heartbeat on the head, the links' keepalive).
        answer = await asyncio.to_thread(
            input, f"Switch from {report.previous} to {report.image} now (the engine stops)? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    transports = await open_cluster(config)
    try:
        controller = EngineController(config, transports, origin=ORIGIN)
        if image is None:   # `sparktui rollback`
            kept = await read_image_in_use(controller.nodes)
            target = rollback_target(kept if kept is not None and kept.applies_to(config) else None,
                                     ImageHistory().load(), config.engine.image)
            if target is None:
                print("sparktui rollback: no upgrade is in use (the configured image is): nothing to return "
                      "to", file=sys.stderr)
                return ExitStatus.NOT_WELL
            image = target[1] or target[0]
        job = ImageUpgrade(controller, on_stage=stage, min_speed_ratio=config.upgrade.min_speed_ratio,
                           confirm=confirm)
        try:
            report = await job.run(image, dry_run=args.dry_run)
        except OperationRefused as exc:
            print(f"sparktui upgrade: {exc}", file=sys.stderr)
            return ExitStatus.BUSY
    finally:
        await close_cluster(transports)
    if args.json:
        print_json(report.to_json())
    else:
        print(summary(report))
    return {"promoted": ExitStatus.OK, "checked": ExitStatus.OK, "same": ExitStatus.OK,
            "rolled_back": ExitStatus.ROLLED_BACK, "refused": ExitStatus.REFUSED}.get(report.outcome,
                                                                                    ExitStatus.NOT_WELL)


def summary(report: UpgradeReport) -> str:
    down = f"; downtime {report.downtime_s:.0f} s" if report.downtime_s is not None else ""
    words = {"promoted": f"promoted {report.image}", "rolled_back": f"rolled back to {report.previous}",
             "refused": f"refused {report.image} (nothing was changed)",
             "checked": "checked (nothing changed)", "same": "nothing to do",
             "failed": f"{report.image} failed and {report.previous} did not serve again: a person is needed",
             }[report.outcome]
    table = report.verdict.table() if report.verdict is not None else []
    return "\n".join([f"upgrade: {words}: {report.reason}{down}", *(f"  {line}" for line in table)])
