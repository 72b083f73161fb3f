"""argv: ``TAG SECONDS``. The stacks and state of every process of ours on this node (``ours(TAG)``: vLLM,
its Ray workers, the Ray daemons), for an incident, kept before anything is restarted. Prints one JSON
object.

With py-spy on PATH (``pip install py-spy``; in the image for the docker runtime): ``py-spy dump`` of each
Python process, each bounded by SECONDS. Without it, it says so, and gives what /proc has of each process:
its state, what it waits in (wchan), its threads' states, its command line. Also the NCCL/UCX/GLOO and CUDA
environment of the vLLM process (the communicator's settings on this node).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

from sparktui.node.ours import ours

#: The environment that decides how the ranks talk: kept with the incident.
ENV_PREFIXES = ("NCCL_", "UCX_", "GLOO_", "CUDA_", "VLLM_", "RAY_", "TORCH_", "PYTORCH_", "PYTHONHASHSEED")


def proc_text(pid: int, name: str) -> str:
    try:
        with open(f"/proc/{pid}/{name}") as f:
            return f.read().strip()
    except OSError:
        return ""


def proc_state(pid: int) -> dict[str, Any]:
    """What /proc says of a process: its state, what it waits in, its threads' states."""
    status = dict(line.split(":", 1) for line in proc_text(pid, "status").splitlines() if ":" in line)
    threads: dict[str, int] = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            stat = proc_text(pid, f"task/{tid}/stat")
            state = stat.rsplit(")", 1)[1].split()[0] if ")" in stat else "?"
            threads[state] = threads.get(state, 0) + 1
    except OSError:
        pass
    return {"state": status.get("State", "").strip(), "wchan": proc_text(pid, "wchan"),
            "threads": threads, "vm_rss": status.get("VmRSS", "").strip()}


def engine_env(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            pairs = [item.decode("utf-8", "replace").split("=", 1) for item in f.read().split(b"\0") if item]
    except OSError:
        return {}
    return {k: v for k, v in (p for p in pairs if len(p) == 2) if k.startswith(ENV_PREFIXES)}


def main(tag: str, seconds: float) -> None:
    found = ours(tag)
    pyspy = shutil.which("py-spy")
    processes = []
    env: dict[str, str] = {}
    for pid, cmdline in sorted(found.items()):
        entry: dict[str, Any] = {"pid": pid, "cmdline": cmdline[:500], **proc_state(pid)}
        if pyspy and ("python" in cmdline or "ray::" in cmdline or "vllm" in cmdline):
            try:
                dump = subprocess.run([pyspy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                                      timeout=seconds)
                entry["py_spy"] = (dump.stdout or dump.stderr)[-20000:]
            except subprocess.TimeoutExpired:
                entry["py_spy"] = f"py-spy dump did not answer within {seconds:g} s"
        if not env and ("vllm" in cmdline and "serve" in cmdline):
            env = engine_env(pid)
        processes.append(entry)
    report = {"py_spy": pyspy, "processes": processes, "engine_env": env}
    if not pyspy:
        report["py_spy_missing"] = ("py-spy not found on PATH: no Python stacks (pip install py-spy on the "
                                    "node, or in the image for the docker runtime); /proc's view of each "
                                    "process instead")
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 10.0)
