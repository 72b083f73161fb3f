"""Which file in a node's Ray session log directory holds that node's vLLM worker output.

vLLM's Ray workers are actors (class ``RayWorkerWrapper``); Ray writes each worker process's output to
``worker-<worker id>-<job id>-<pid>.{out,err}`` and, when a worker becomes an actor, the markers
``:job_id:<hex>`` and ``:actor_name:<class>`` at the top of both files. A pooled worker's file name keeps
the job id ``ffffffff``, so the markers decide, not the name. vLLM logs to stderr, but prints and
progress bars may land in either file: of an actor's two files the one with more output is followed.
``raylet.out`` when no actor has written yet.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.domain.json_report import last_json_object

_WORKER = re.compile(r"^worker-([0-9a-f]+)-([0-9a-f]+)-(\d+)\.(out|err)$")
#: The actor class vLLM's Ray executor runs on every GPU (vLLM 0.4 … 0.11+).
VLLM_ACTOR = "RayWorkerWrapper"
#: Bytes of Ray's own markers at the top of a worker file; a file this small holds no output yet.
_MARKER_BYTES = 96


@dataclass(frozen=True)
class LogFile:
    name: str
    size: int
    mtime: float
    actor: str | None = None
    job: str | None = None


def parse_listing(text: str) -> tuple[str, tuple[LogFile, ...], str | None]:
    """RAY_LOGS_PY output → (directory, files, error); ``ValueError`` when it holds no report."""
    data = last_json_object(text)
    if data is None:
        raise ValueError("no JSON report in the output")
    files = tuple(LogFile(str(f["name"]), int(f["size"]), float(f["mtime"]), f.get("actor"), f.get("job"))
                  for f in data.get("files", ()))
    return str(data.get("dir", "")), files, data.get("error")


def choose_worker_log(files: Sequence[LogFile]) -> str | None:
    def rank(f: LogFile) -> tuple[int, int, int, float]:
        m = _WORKER.match(f.name)
        assert m is not None
        vllm = f.actor == VLLM_ACTOR
        actor = f.actor is not None or not m.group(2).startswith("ffffffff")
        return (int(vllm), int(actor), int(f.size > _MARKER_BYTES), f.size)

    workers = [f for f in files if _WORKER.match(f.name) and f.size > 0]
    if workers:
        best = max(workers, key=rank)
        if rank(best)[:2] != (0, 0):
            return best.name
    names = {f.name for f in files}
    for fallback in ("raylet.out", "raylet.err"):
        if fallback in names:
            return fallback
    return None
