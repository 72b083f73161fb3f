"""argv: MODE (list | stop) TAG [GRACE]. Finds our processes (``ours``). ``stop`` sends SIGTERM, waits up
to GRACE s, then SIGKILL and waits again. Prints one JSON object: what is left, and what was signalled."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Callable

from sparktui.node.ours import ours


def signal_and_wait(tag: str, procs: dict[int, str], sig: signal.Signals, keep: Callable[[str], bool],
                    grace: float, signalled: list[list[object]]) -> dict[int, str]:
    """``sig`` to every process of ``procs`` that ``keep`` does not spare; what is ours once they ended
    (or the grace ran out)."""
    targets = {p: c for p, c in procs.items() if not keep(c)}
    for pid in targets:
        try:
            os.kill(pid, sig)
            signalled.append([pid, sig.name])
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while True:
        procs = ours(tag)
        if not [p for p in procs if p in targets] or time.monotonic() > deadline:
            return procs
        time.sleep(0.05)


def main(argv: list[str]) -> None:
    mode, tag = argv[0], argv[1]
    grace = float(argv[2]) if len(argv) > 2 else 5.0
    procs = ours(tag)
    signalled: list[list[object]] = []
    if mode == "stop":
        # Ray's own order: everything but the GCS first (a raylet whose GCS is gone hangs in its shutdown),
        # then the GCS; SIGKILL for whatever outlived the grace.
        procs = signal_and_wait(tag, procs, signal.SIGTERM, lambda cmd: "gcs_server" in cmd, grace, signalled)
        if procs:
            procs = signal_and_wait(tag, procs, signal.SIGTERM, lambda cmd: False, grace, signalled)
        if procs:
            procs = signal_and_wait(tag, procs, signal.SIGKILL, lambda cmd: False, grace, signalled)
    print(json.dumps({"processes": [{"pid": p, "cmdline": c[:400]} for p, c in sorted(procs.items())],
                      "signalled": signalled}))


if __name__ == "__main__":
    main(sys.argv[1:])
