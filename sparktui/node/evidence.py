"""argv: ``NODE TAG VLLM_LOG LINES RAY_TEMP CONTAINER``. One node's evidence of a failure, taken before
anything is done about it; prints one JSON object.

- ``vllm_log``: the last LINES lines of VLLM_LOG (empty: no vLLM log on this node) and its NCCL lines;
- ``ray_logs``: the last LINES lines of each Ray worker log of the current session (and the raylet's, the
  GCS server's);
- ``processes``: every process of ours (tag TAG: vLLM, Ray's daemons and workers): argv, state, wchan,
  start time and the NCCL_*/UCX_*/GLOO_* environment;
- ``stacks``: a py-spy dump of each Python process of ours, from the host's py-spy or, when the host has
  none, the one in CONTAINER (docker runtime; empty: none); ``missing`` says so when neither has it.

Everything is bounded (lines, bytes, seconds): the answer must come back from a sick node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from sparktui.node.ours import ours
from sparktui.node.ray_session import session_dir

#: Bytes read from the end of a log for its last lines (a line of vLLM is rarely over 2 KiB).
TAIL_BYTES_PER_LINE = 2048
#: Bytes of a log scanned for NCCL lines (its end), and how many of them are kept (the newest).
NCCL_SCAN_BYTES = 32 * 1024 * 1024
NCCL_KEEP = 400
#: Ray log files kept per node (the largest actor workers first), and seconds per py-spy dump.
RAY_FILES = 12
PYSPY_SECONDS = 20.0
#: Seconds for all the dumps together: the whole answer must come back within the controller's timeout.
PYSPY_TOTAL = 30.0
DUMP_BYTES = 256 * 1024
ENV_PREFIXES = ("NCCL_", "UCX_", "GLOO_", "TORCH_NCCL_")


def tail(path: str, lines: int) -> dict[str, Any]:
    """The last ``lines`` lines of ``path``, with its size, or why it could not be read."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            f.seek(max(0, size - lines * TAIL_BYTES_PER_LINE))
            data = f.read()
    except OSError as exc:
        return {"path": path, "error": exc.strerror or str(exc)}
    text = data.decode("utf-8", "replace").splitlines()[-lines:]
    return {"path": path, "size": size, "lines": text}


def nccl_lines(path: str) -> list[str]:
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            f.seek(max(0, size - NCCL_SCAN_BYTES))
            data = f.read()
    except OSError:
        return []
    return [line for line in data.decode("utf-8", "replace").splitlines() if "NCCL" in line][-NCCL_KEEP:]


def ray_logs(temp: str, lines: int) -> dict[str, Any]:
    base = os.path.join(session_dir(os.path.expanduser(temp)), "logs")
    try:
        names = os.listdir(base)
    except OSError as exc:
        return {"dir": base, "error": exc.strerror or str(exc), "files": []}
    sizes: dict[str, int] = {}
    for name in names:
        try:
            sizes[name] = os.path.getsize(os.path.join(base, name))
        except OSError:
            continue
    workers = sorted((n for n in sizes if n.startswith("worker-") and sizes[n] > 0),
                     key=lambda n: -sizes[n])[:RAY_FILES]
    daemons = [n for n in ("raylet.out", "raylet.err", "gcs_server.out", "gcs_server.err") if n in sizes]
    return {"dir": os.path.realpath(base),
            "files": [dict(tail(os.path.join(base, n), lines), name=n) for n in daemons + workers]}


def proc_text(pid: int, name: str) -> str:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def process(pid: int, boot: float, ticks: int) -> dict[str, Any]:
    """What /proc says of one process: argv, state, wchan, start time, its pid in its namespace (for a
    py-spy inside the container), the communication libraries' environment."""
    status = dict(line.split(":", 1) for line in proc_text(pid, "status").splitlines() if ":" in line)
    stat = proc_text(pid, "stat").rsplit(")", 1)[-1].split()
    started = boot + int(stat[19]) / ticks if len(stat) > 19 else None
    environ = proc_text(pid, "environ").split("\0")
    env = dict(e.split("=", 1) for e in environ if e.startswith(ENV_PREFIXES) and "=" in e)
    nspid = status.get("NSpid", "").split()
    return {"pid": pid, "argv": [a for a in proc_text(pid, "cmdline").split("\0") if a][:200],
            "state": status.get("State", "").strip(), "wchan": proc_text(pid, "wchan").strip() or "-",
            "started_at": started, "ns_pid": int(nspid[-1]) if nspid else pid, "env": env}


def boot_time() -> float:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def is_python(proc: dict[str, Any]) -> bool:
    """vLLM and Ray's workers are Python (``ray::Name`` after setproctitle); the raylet and GCS are not."""
    argv = proc["argv"]
    first = os.path.basename(argv[0]) if argv else ""
    return first.startswith(("python", "ray::", "vllm")) or any(a.endswith(".py") for a in argv[:3])


def run(argv: list[str], seconds: float = PYSPY_SECONDS) -> dict[str, Any]:
    try:
        res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             timeout=seconds)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": None, "text": f"{argv[0]}: {exc}"}
    return {"rc": res.returncode, "text": res.stdout[-DUMP_BYTES:].decode("utf-8", "replace")}


def pyspy_prefix(container: str) -> list[str] | None:
    """How to run py-spy here: the host's, else the container's (``docker exec``), else ``None``."""
    found = shutil.which("py-spy") or shutil.which(os.path.expanduser("~/.local/bin/py-spy"))
    if found:
        return [found]
    inside = ["docker", "exec", container, "py-spy"]
    if container and shutil.which("docker") and run([*inside, "--version"])["rc"] == 0:
        return inside
    return None


def stacks(node: str, procs: list[dict[str, Any]], container: str) -> dict[str, Any]:
    prefix = pyspy_prefix(container)
    if prefix is None:
        where = "on the host's PATH" + (" or in container " + container if container else "")
        return {"tool": None, "missing": (
            f"py-spy not found on {node} (not {where}), so no Python stack dumps. To get them next time: "
            "`pip install py-spy` on the node (or add it to the engine image), as a user allowed to "
            "ptrace the engine (root, or the container run with --cap-add SYS_PTRACE). "
            "What /proc says of each process (argv, state, wchan) is kept instead."),
            "dumps": []}
    inside = prefix[0] == "docker"
    dumps = []
    deadline = time.monotonic() + PYSPY_TOTAL
    for proc in procs:
        if not is_python(proc):
            continue
        left = deadline - time.monotonic()
        if left < 1:
            dumps.append({"pid": proc["pid"], "rc": None,
                          "text": f"not dumped: the dumps' {PYSPY_TOTAL:.0f} s were spent"})
            continue
        pid = proc["ns_pid"] if inside else proc["pid"]
        result = run([*prefix, "dump", "--pid", str(pid)], min(PYSPY_SECONDS, left))
        dumps.append({"pid": proc["pid"], "rc": result["rc"], "text": result["text"]})
    return {"tool": " ".join(prefix), "dumps": dumps}


def main(argv: list[str]) -> None:
    node, tag, vllm_log, lines, ray_temp, container = argv[:6]
    count = int(lines)
    report: dict[str, Any] = {"node": node}
    if vllm_log:
        path = os.path.expanduser(vllm_log)
        report["vllm_log"] = dict(tail(path, count), nccl=nccl_lines(path))
    report["ray_logs"] = ray_logs(ray_temp, count)
    boot = boot_time()
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    procs = []
    for pid in sorted(ours(tag)):
        try:
            procs.append(process(pid, boot, ticks))
        except (ValueError, IndexError):
            continue
    report["processes"] = procs
    report["stacks"] = stacks(node, procs, container)
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
