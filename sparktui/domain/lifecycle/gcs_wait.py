"""Waiting for the Ray head's GCS: the workers' `ray start` goes out as soon as its port answers.

`ray start --head` returns only after the raylet, the log monitor and the rest are up (~4 s on a Spark),
while the GCS — all a worker needs to join — answers a second or two in, and lists the head's node soon
after. The start plan therefore runs this short loop on the head beside `ray start --head` and begins the
workers' phase when it exits 0 (``Phase.done_when``); `vllm serve` still waits for `ray start --head`
itself (``Phase.after``).

A worker that finds no head node in the GCS sleeps two seconds before it asks again, so the plan's workers
go out when the port answers and wait for the head's node themselves, their Ray CLI imported meanwhile
(``sparktui/node/ray_join.py``). With a ``ray_command`` of the config's own (which that script cannot run
in-process) the wait here is for the head's node instead (``head_node``).
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Sequence

from sparktui.node import source

#: Step name of the wait (the head phase's ``done_when``).
GCS_STEP = "Ray GCS answers"

#: Seconds between two connect attempts: a refused connect on the head costs microseconds.
GCS_POLL = 0.05

#: ``sparktui/node/gcs_wait.py`` and ``sparktui/node/ray_join.py`` (their argv and output are said there).
GCS_WAIT_PY = source("gcs_wait")
RAY_JOIN_PY = source("ray_join")


def gcs_wait_argv(python: Sequence[str] | str, host: str, port: int, timeout: float, *,
                  head_node: bool = False) -> list[str]:
    """The wait as an argv for ``python`` (the node's: it runs on the head's host network). ``head_node``:
    until the GCS lists the head's node alive too (what a worker's ``ray start`` asks for first)."""
    py = [python] if isinstance(python, str) else list(python)
    return [*py, "-c", GCS_WAIT_PY, host, str(port), str(math.ceil(timeout)), str(GCS_POLL),
            *(["head"] if head_node else [])]


def is_plain_ray(ray_command: Sequence[str]) -> bool:
    """Whether ``engine.ray_command`` is Ray's own ``ray`` (by name or path), whose entry point the join
    script can run in-process (``ray.scripts.scripts.main``); a wrapper of the config's own is not."""
    return len(ray_command) == 1 and posixpath.basename(ray_command[0]) == "ray"


def ray_join_argv(python: Sequence[str], head: str, port: int, timeout: float,
                  ray_start: Sequence[str]) -> list[str]:
    """A worker's ``ray start`` (``ray_start``: ``[ray, "start", …]`` with a plain ``ray``) as the join script
    under ``python`` (``engine.ray_python``): Ray's CLI imported at once, the start sent when the head's
    node is in the GCS, or ``timeout`` s on."""
    assert ray_start and is_plain_ray(ray_start[:1])
    return [*python, "-c", RAY_JOIN_PY, head, str(port), str(math.ceil(timeout)), str(GCS_POLL), *ray_start]
