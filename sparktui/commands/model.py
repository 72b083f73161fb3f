"""`sparktui model sync [--json] [--dry-run] [--checksum]`: copy the head's model directory to every other
node (rsync run on the head, pushing over each node's cable address; resumable; skipped when in sync;
refused when the node's disk is short), or ``hf download`` on every node for a Hugging Face id.

`sparktui model read-test [--mib N] [--seconds S] [--json]`: read the model's largest shard on every node at
once, past the page cache (O_DIRECT, else after dropping its cached pages), at most N MiB for at most S
seconds: each disk's read rate in GiB/s, kept in the local state dir (``disk_reads.jsonl``) for the start's
explanation ("weights read at 0.15 GiB/s where the disk gives 2.1 GiB/s") and ``plan``.

Exit status: 0 every node has the head's model (or would, with ``--dry-run``) / every node was measured,
1 a copy failed or was refused / a node could not be measured, 2 no usable config.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING

from sparktui.commands.common import config_from_args, positive_int, print_json, run_async
from sparktui.commands.exit_status import ExitStatus
from sparktui.domain.perf.disk_read import DEFAULT_MIB, DEFAULT_SECONDS

if TYPE_CHECKING:   # the config brings pydantic: loaded when the verb runs, not for its --help
    from sparktui.config import SparkConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "exit status: 0 every node has the head's model, 1 failed or refused, 2 no usable config"
    sub = parser.add_subparsers(dest="model_cmd", metavar="ACTION", required=True)
    sync = sub.add_parser("sync", help="copy the head's model directory to the other nodes (rsync over the "
                          "cable), or `hf download` on every node for a Hugging Face id")
    sync.add_argument("--json", action="store_true", help="print one JSON object at the end")
    sync.add_argument("--dry-run", action="store_true",
                      help="say what would be copied, and the commands, without copying")
    sync.add_argument("--checksum", action="store_true",
                      help="compare file contents, not only sizes and times, to decide what is in sync")
    test = sub.add_parser("read-test", help="each node's disk read rate for the model's files (GiB/s, past "
                          "the page cache; kept for the start's explanation and plan)")
    test.add_argument("--mib", type=positive_int, default=DEFAULT_MIB, metavar="N",
                      help=f"read at most N MiB of the largest shard (default {DEFAULT_MIB})")
    test.add_argument("--seconds", type=positive_int, default=int(DEFAULT_SECONDS), metavar="S",
                      help=f"read for at most S seconds (default {DEFAULT_SECONDS:.0f})")
    test.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if args.model_cmd == "read-test":
        return run_async(_read_test(config, args.json, args.mib, args.seconds))
    return run_async(_sync(config, args.json, args.dry_run, args.checksum))


async def _read_test(config: SparkConfig, as_json: bool, mib: int, seconds: float) -> int:
    from sparktui.remote.cluster import close_cluster, open_cluster
    from sparktui.remote.disk_read import measure_disks

    transports = await open_cluster(config)
    try:
        readings = await measure_disks(config, transports, mib=mib, seconds=seconds)
    finally:
        await close_cluster(transports)
    ok = all(r.ok for r in readings)
    if as_json:
        print_json({"model": config.engine.model, "ok": ok, "nodes": [r.to_json() for r in readings]})
    else:
        for r in readings:
            print(r.describe())
    return ExitStatus.of(ok)


async def _sync(config: SparkConfig, as_json: bool, dry_run: bool, checksum: bool) -> int:
    from sparktui.domain.lifecycle.model_copy import progress_bar
    from sparktui.remote.cluster import close_cluster, open_cluster
    from sparktui.remote.model_sync import sync_model

    tty = sys.stdout.isatty()
    shown = [False]

    def progress(node: str, done: int, total: int | None, seconds: float) -> None:
        if as_json:
            return
        line = progress_bar(node, done, total, seconds)
        if tty:   # one bar, redrawn in place
            print("\r" + line + "\x1b[K", end="", flush=True)
            shown[0] = True
        else:
            print(line, flush=True)

    transports = await open_cluster(config)
    try:
        outcomes = await sync_model(config, transports, progress, dry_run=dry_run, checksum=checksum)
    finally:
        await close_cluster(transports)
    if shown[0]:
        print()
    ok = all(o.ok for o in outcomes)
    if as_json:
        print_json({"model": config.engine.model, "ok": ok, "dry_run": dry_run,
                    "nodes": [{"node": o.node, "action": o.action, "message": o.message, "bytes": o.bytes,
                               "sent": o.sent, "files": o.files, "seconds": round(o.seconds, 2),
                               "bytes_per_s": round(o.bytes / o.seconds) if o.seconds else None,
                               "argv": list(o.argv), "detail": list(o.detail)} for o in outcomes]})
        return ExitStatus.of(ok)
    head = config.head.name
    for o in outcomes:
        print(f"{o.node}: {o.action}: {o.message}")
        for line in o.detail:
            print(f"  {line}")
        if dry_run and o.argv and o.action == "would copy":
            where = head if o.argv[0] == "rsync" else o.node
            print(f"  {where}$ {shlex.join(o.argv)}")
    return ExitStatus.of(ok)
