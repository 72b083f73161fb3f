"""The probe's script: its options and the sampling loop (one line of JSON a sample, on the wall clock's
marks), until its channel closes or ``--count`` samples are written. The package's docstring says the rest."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from sparktui.node.probe.channel import die_with_parent, stdin_closed, write_all
from sparktui.node.probe.sampler import Probe

#: ``--help``'s first line (the shipped script has no docstring: its ``__future__`` import comes first).
DESCRIPTION = "sparktui node probe: one JSON object per interval on stdout, until its channel closes."


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="sparktui-probe", description=DESCRIPTION)
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    p.add_argument("--count", type=int, default=0, help="emit N samples then exit (0: until closed)")
    p.add_argument("--proc-root", default="/proc")
    p.add_argument("--sys-root", default="/sys")
    p.add_argument("--nvml-module", default=os.environ.get("SPARKTUI_PROBE_NVML_MODULE", "pynvml"),
                   help="module used as pynvml (a test double in tests); env SPARKTUI_PROBE_NVML_MODULE")
    p.add_argument("--name-prefix", default="sparktui",
                   help="containers whose name starts with this are ours")
    p.add_argument("--docker-socket", default="/var/run/docker.sock")
    p.add_argument("--docker-every", type=float, default=10.0, help="seconds between container checks")
    p.add_argument("--no-containers", action="store_true",
                   help="do not look for containers (the engine runs on the host, not in docker)")
    p.add_argument("--proc-every", type=float, default=5.0,
                   help="seconds between process-list scans and per-process GPU memory reads")
    p.add_argument("--errors-every", type=float, default=5.0,
                   help="seconds between reads of the RoCE PMA error counters "
                        "(each read is a firmware command)")
    p.add_argument("--engine-port", type=int, default=None,
                   help="read the engine's /health and /metrics on 127.0.0.1:PORT into the samples")
    p.add_argument("--engine-families", default="",
                   help="comma-separated name prefixes of the /metrics families to send (default: none)")
    p.add_argument("--engine-timeout", type=float, default=5.0,
                   help="seconds an engine API request may take (default 5)")
    p.add_argument("--until-stdin-closes", action="store_true",
                   help="exit when stdin reaches EOF (how sparktui runs it over its channel)")
    args = p.parse_args(argv)
    if args.interval <= 0:
        p.error("--interval must be > 0")
    return args


def next_aligned(mono: float, wall: float, interval: float) -> float:
    """When the next sample of a stream is due (monotonic): at the next whole multiple of ``interval`` of
    the wall clock, at least half an interval from now. Every node's stream then samples at the same
    moments (their clocks agree to milliseconds under NTP): a dashboard draws all nodes' samples in one
    frame instead of one frame per node, and the readings it compares across nodes are of one instant.
    (Never a burst: a stream that fell behind waits for the next mark.)"""
    wait = interval - wall % interval
    if wait < interval / 2:
        wait += interval
    return mono + wait


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.until_stdin_closes:
        die_with_parent()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    probe = Probe(args)
    # The sample is a tree of fresh dicts and lists: no cycles to look for.
    encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
    try:
        next_at = time.monotonic()
        while True:
            line = encode(probe.sample()) + "\n"
            try:
                write_all(line.encode())
            except (BrokenPipeError, OSError):
                return 0
            if probe.engine_api is not None:
                probe.engine_api.kick()     # read now; the next sample carries it
            if args.count and probe.seq >= args.count:
                return 0
            now = time.monotonic()
            if args.count:
                next_at += args.interval
                if next_at < now:          # fell behind (suspended, slow read): skip, do not burst
                    next_at = now
            else:
                next_at = next_aligned(now, time.time(), args.interval)
            if args.until_stdin_closes:
                if stdin_closed(next_at):
                    return 0
            else:
                time.sleep(next_at - now)
    except KeyboardInterrupt:
        return 130
    finally:
        probe.close()


if __name__ == "__main__":
    sys.exit(main())
