"""Waiting for the Ray head's GCS port: the workers' `ray start` goes out as soon as it answers.

`ray start --head` returns only after the raylet, the log monitor and the rest are up (~4 s on a Spark),
while the GCS — all a worker needs to join — answers a second or two in. The start plan therefore runs
this short connect loop on the head beside `ray start --head` and begins the workers' phase when it
exits 0 (``Phase.done_when``); `vllm serve` still waits for `ray start --head` itself (``Phase.after``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Step name of the wait (the head phase's ``done_when``).
GCS_STEP = "Ray GCS answers"

#: Seconds between two connect attempts: a refused connect on the head costs microseconds.
GCS_POLL = 0.05

#: argv: HOST PORT TIMEOUT POLL. Exits 0 (printing "gcs answered after N s") once a TCP connect to
#: HOST:PORT succeeds, 1 when TIMEOUT passes first. Standard library only.
GCS_WAIT_PY = r"""
import socket, sys, time
host, port, limit, poll = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
t0 = time.monotonic()
while True:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
    except OSError as e:
        if time.monotonic() - t0 > limit:
            print("gcs at %s:%d did not answer within %.0f s: %s" % (host, port, limit, e), file=sys.stderr)
            sys.exit(1)
        time.sleep(poll)
        continue
    print("gcs answered after %.2f s" % (time.monotonic() - t0), flush=True)
    break
"""


def gcs_wait_argv(python: Sequence[str] | str, host: str, port: int, timeout: float) -> list[str]:
    """The wait as an argv for ``python`` (the node's: it runs on the head's host network)."""
    py = [python] if isinstance(python, str) else list(python)
    return [*py, "-c", GCS_WAIT_PY, host, str(port), str(math.ceil(timeout)), str(GCS_POLL)]
