"""Which file in a node's Ray session log directory holds that node's vLLM worker output.

vLLM's Ray workers are actors; Ray writes each worker process's output to
``worker-<worker id>-<job id>-<pid>.{out,err}`` (vLLM logs to stderr). Idle pooled workers carry the
job id ``ffffffff``; the actors of ``vllm serve`` carry its job id. The newest non-empty actor log is
the one to follow; ``raylet.out`` when no actor has written yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_WORKER = re.compile(r"^worker-([0-9a-f]+)-([0-9a-f]+)-(\d+)\.(out|err)$")


@dataclass(frozen=True)
class LogFile:
    name: str
    size: int
    mtime: float


def parse_listing(text: str) -> tuple[str, tuple[LogFile, ...], str | None]:
    """RAY_LOGS_PY output → (directory, files, error)."""
    data = json.loads(text.strip().splitlines()[-1])
    files = tuple(LogFile(str(f["name"]), int(f["size"]), float(f["mtime"])) for f in data.get("files", ()))
    return str(data.get("dir", "")), files, data.get("error")


def choose_worker_log(files: Sequence[LogFile]) -> str | None:
    def rank(f: LogFile) -> tuple[int, int, float]:
        m = _WORKER.match(f.name)
        assert m is not None
        idle = m.group(2).startswith("ffffffff")
        return (0 if idle else 1, 1 if m.group(4) == "err" else 0, f.mtime)

    workers = [f for f in files if _WORKER.match(f.name) and f.size > 0]
    if workers:
        return max(workers, key=rank).name
    names: Mapping[str, LogFile] = {f.name: f for f in files}
    for fallback in ("raylet.out", "raylet.err"):
        if fallback in names:
            return fallback
    return None
