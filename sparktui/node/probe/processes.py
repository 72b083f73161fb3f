"""Our processes on the node (Ray daemons, Ray workers, vLLM): found by a rescan of ``/proc``, with
their memory and CPU seconds."""

from __future__ import annotations

import os
import time
from typing import Any

from sparktui.node.probe.files import read_once
from sparktui.node.probe.problems import Problems, why_failed

# Ray and vLLM processes as they show on a node (``ray::`` is the proctitle of Ray workers and actors).
RAY_DAEMONS = ("raylet", "gcs_server")


def classify(argv: list[str], comm: str) -> str | None:
    """Which of our kinds a process is (Ray daemons, Ray workers, vLLM), or None."""
    first = argv[0] if argv else comm
    base = os.path.basename(first.split(" ", 1)[0])
    if first.startswith("ray::") or comm.startswith("ray::"):
        return "ray-worker"
    if base in RAY_DAEMONS:
        return base
    if comm in RAY_DAEMONS:
        return comm
    # vLLM renames its processes (VLLM::EngineCore, VllmWorker…), which shows in comm.
    if "vllm" in comm.lower() or first.lower().startswith("vllm::"):
        return "vllm"
    # The program, or the script/module a Python runs: ".../bin/vllm serve", "python3 /usr/local/bin/vllm",
    # "python -m vllm.entrypoints.openai.api_server" — but not "tail -F …/vllm.log".
    if base == "vllm":
        return "vllm"
    if base.startswith("python") and len(argv) > 1:
        if os.path.basename(argv[1]) == "vllm":
            return "vllm"
        if argv[1] == "-m" and len(argv) > 2 and argv[2].split(".")[0] == "vllm":
            return "vllm"
    return None


class Processes:
    def __init__(self, proc_root: str, every: float, problems: Problems) -> None:
        self.root = proc_root
        self.every = every
        self.problems = problems
        self.known: dict[int, dict[str, Any] | None] = {}
        self.scanned_at = -1e9
        self.result: list[dict[str, Any]] = []
        self.me = os.getpid()

    def sample(self) -> list[dict[str, Any]]:
        if time.monotonic() - self.scanned_at >= self.every:
            self._scan()
        return self.result

    def _scan(self) -> None:
        self.scanned_at = time.monotonic()
        try:
            pids = {int(n) for n in os.listdir(self.root) if n.isdigit()}
        except OSError as exc:
            self.problems.note("processes", why_failed(exc))
            return
        for gone in set(self.known) - pids:
            del self.known[gone]
        for pid in pids - set(self.known):
            self.known[pid] = None if pid == self.me else self._identify(pid)
        out = []
        for pid in sorted(self.known):
            info = self.known[pid]
            if info is None:
                continue
            statm = read_once(os.path.join(self.root, str(pid), "statm"), 128)
            rss = None
            if statm:
                try:
                    rss = int(statm.split()[1]) * os.sysconf("SC_PAGE_SIZE")
                except (IndexError, ValueError):
                    rss = None
            stat = read_once(os.path.join(self.root, str(pid), "stat"), 1024)
            # CPU seconds and when they were read (this node's monotonic clock): CPU % = their deltas.
            out.append({**info, "rss": rss, "cpu_s": cpu_seconds(stat), "at": round(self.scanned_at, 3)})
        self.result = out

    def _identify(self, pid: int) -> dict[str, Any] | None:
        raw = read_once(os.path.join(self.root, str(pid), "cmdline"), 4096)
        comm_raw = read_once(os.path.join(self.root, str(pid), "comm"), 256)
        if raw is None and comm_raw is None:
            return None
        argv = [a.decode("utf-8", "replace") for a in (raw or b"").split(b"\0") if a]
        comm = comm_raw.decode("utf-8", "replace").strip() if comm_raw else ""
        kind = classify(argv, comm)
        if kind is None:
            return None
        return {"pid": pid, "name": comm or (os.path.basename(argv[0]) if argv else ""), "kind": kind,
                "cmdline": " ".join(argv)[:300]}


def cpu_seconds(stat: bytes | None) -> float | None:
    """utime + stime of a ``/proc/PID/stat`` line, in seconds (the controller turns deltas into CPU %).
    Fields are counted after the command's closing parenthesis: a command may hold spaces and ``)``."""
    if not stat:
        return None
    try:
        fields = stat[stat.rindex(b")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (ValueError, IndexError, OSError):
        return None
