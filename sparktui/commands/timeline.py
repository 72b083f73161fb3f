"""`sparktui timeline LOGFILE [--json]`: read a vLLM log, print its init-stage timeline, facts, failure.

Exit status: 0 when the log shows a ready (or cleanly stopped) server or a start still under way, 1 when it
failed, 2 when the file cannot be read or is not a vLLM log (no line in it is a vLLM, Ray or PyTorch log
record, and no failure vLLM's users meet: a README, a config, a binary).

``--json`` times are ISO 8601 with a year: vLLM's lines carry none, so the year is then the file's (its
modification time; for a pipe on stdin, the time it was read), and ``year_source`` says which.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from typing import BinaryIO

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
    from sparktui.domain.logs.log_year import date_stage_times
    from sparktui.domain.logs.timeline import render_human, timeline_from_bytes
    from sparktui.domain.logs.verdict import is_vllm_log
    from sparktui.domain.perf.start_explain import explain_snapshot

    try:
        if args.logfile == "-":
            data, written = sys.stdin.buffer.read(), _file_time(sys.stdin.buffer)
        else:
            with open(args.logfile, "rb") as fh:
                data, written = fh.read(), _file_time(fh)
    except OSError as exc:
        print(f"sparktui timeline: cannot read {args.logfile}: {exc.strerror or exc}", file=sys.stderr)
        return ExitStatus.USAGE
    snap = timeline_from_bytes(data, expected_nodes=args.nodes)
    if not is_vllm_log(data, snap):
        print(f"sparktui timeline: {args.logfile} is not a vLLM log (no line in it is one vLLM, Ray or "
              f"PyTorch prints)", file=sys.stderr)
        return ExitStatus.USAGE
    # Why it took as long as it did: from the log alone (no disk measured, the image's help not read).
    explanation = explain_snapshot(snap)
    if args.json:
        data = {**snap.to_json(), "explanation": explanation.to_json()}
        if written is not None:
            print_json(date_stage_times(data, snap.year_known, written, "file_mtime"))
        else:
            print_json(date_stage_times(data, snap.year_known, time.time(), "read_time"))
    else:
        print(render_human(snap))
        if explanation.findings:
            print("\nWhy it took this long (the slowest first):")
            print("\n".join(explanation.lines()))
    return ExitStatus.of(snap.outcome != "failed")


def _file_time(stream: BinaryIO) -> float | None:
    """The modification time of the file behind ``stream``; None for a pipe, a terminal or an in-memory
    stream (no file date)."""
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError):   # io.UnsupportedOperation is both
        return None
    return st.st_mtime if stat.S_ISREG(st.st_mode) else None
