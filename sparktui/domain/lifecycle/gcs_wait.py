"""Waiting for the Ray head's GCS port: the workers' `ray start` goes out as soon as it answers.

`ray start --head` returns only after the raylet, the log monitor and the rest are up (~4 s on a Spark),
while the GCS — all a worker needs to join — answers a second or two in. The start plan therefore runs
this short connect loop on the head beside `ray start --head` and begins the workers' phase when it
exits 0 (``Phase.done_when``); `vllm serve` still waits for `ray start --head` itself (``Phase.after``).
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


def gcs_wait_argv(python: Sequence[str] | str, host: str, port: int, timeout: float) -> list[str]:
    """The wait as an argv for ``python`` (the node's: it runs on the head's host network)."""
    py = [python] if isinstance(python, str) else list(python)
    return [*py, "-c", GCS_WAIT_PY, host, str(port), str(math.ceil(timeout)), str(GCS_POLL)]
