"""Waiting for the Ray head's GCS: the workers' `ray start` goes out as soon as the head's node is in it.

`ray start --head` returns only after the raylet, the log monitor and the rest are up (~4 s on a Spark),
while the GCS — all a worker needs to join — answers a second or two in, and lists the head's node soon
after. The start plan therefore runs this short loop on the head beside `ray start --head` and begins the
workers' phase when it exits 0 (``Phase.done_when``); `vllm serve` still waits for `ray start --head`
itself (``Phase.after``). It waits for the head's node, not only the port: a worker that finds no head node
in the GCS sleeps two seconds before it asks again (``sparktui/node/gcs_wait.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sparktui.node import source

#: Step name of the wait (the head phase's ``done_when``).
GCS_STEP = "Ray GCS answers"

#: Seconds between two connect attempts: a refused connect on the head costs microseconds.
GCS_POLL = 0.05

#: ``sparktui/node/gcs_wait.py`` (its argv and output are said there).
GCS_WAIT_PY = source("gcs_wait")


def gcs_wait_argv(python: Sequence[str] | str, host: str, port: int, timeout: float, *,
                  head_node: bool = False) -> list[str]:
    """The wait as an argv for ``python`` (the node's: it runs on the head's host network). ``head_node``:
    until the GCS lists the head's node alive too (what a worker's ``ray start`` asks for first)."""
    py = [python] if isinstance(python, str) else list(python)
    return [*py, "-c", GCS_WAIT_PY, host, str(port), str(math.ceil(timeout)), str(GCS_POLL),
            *(["head"] if head_node else [])]
