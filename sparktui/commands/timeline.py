"""`sparktui timeline LOGFILE [--json]`: read a vLLM log, print its init-stage timeline, facts, failure.

Exit status: 0 when the log shows a ready (or cleanly stopped) server or a start still under way, 1 when it
failed, 2 when the file cannot be read or is not a vLLM log.
"""

from __future__ import annotations

import argparse
import sys

from sparktui.commands.common import positive_int, print_json
from sparktui.commands.exit_status import ExitStatus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 ready, stopped or still starting, 1 the log shows a failure, 2 cannot "
                     "read it or it is not a vLLM log")
    parser.add_argument("logfile", metavar="LOGFILE", help="the vLLM log to read (- for stdin)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--nodes", type=positive_int, default=None, metavar="N",
                        help="nodes the engine spans: a per-node stage is done when all N reported")


def run(args: argparse.Namespace) -> int:
    from sparktui.domain.logs.timeline import render_human, timeline_from_bytes

    try:
        if args.logfile == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.logfile, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        print(f"sparktui timeline: cannot read {args.logfile}: {exc.strerror or exc}", file=sys.stderr)
        return ExitStatus.USAGE
    snap = timeline_from_bytes(data, expected_nodes=args.nodes)
    if not snap.is_vllm_log:
        print(f"sparktui timeline: {args.logfile} is not a vLLM log (no line in it is one vLLM prints)",
              file=sys.stderr)
        return ExitStatus.USAGE
    if args.json:
        print_json(snap.to_json())
    else:
        print(render_human(snap))
    return ExitStatus.of(snap.outcome != "failed")
