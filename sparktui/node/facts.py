"""argv: one JSON object {"tag", "ports", "model_path"}. Prints one JSON object with the node's facts for
preflight: memory, RDMA ports, listening ports, our processes, the model directory."""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

from sparktui.node.ours import ours


def rdma_ports(base: str = "/sys/class/infiniband") -> list[dict[str, str | None]]:
    out: list[dict[str, str | None]] = []
    try:
        devs = sorted(os.listdir(base))
    except OSError:
        devs = []
    for dev in devs:
        try:
            ports = sorted(os.listdir(os.path.join(base, dev, "ports")))
        except OSError:
            continue
        for port in ports:
            entry: dict[str, str | None] = {"device": dev, "port": port}
            for name in ("state", "phys_state", "link_layer", "rate"):
                try:
                    with open(os.path.join(base, dev, "ports", port, name)) as f:
                        entry[name] = f.read().strip()
                except OSError:
                    entry[name] = None
            out.append(entry)
    return out


def listening_ports() -> set[int]:
    listening: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if len(parts) > 3 and parts[3] == "0A":
                        listening.add(int(parts[1].rsplit(":", 1)[1], 16))
        except (OSError, StopIteration):
            pass
    return listening


def model_dir(path: str) -> dict[str, Any]:
    """The model directory's files as [path, size] pairs (20 000 at most), their total size."""
    path = os.path.expanduser(path)
    files: list[list[object]] = []
    model: dict[str, Any] = {"path": path, "exists": os.path.isdir(path), "files": files, "total_bytes": 0,
                             "truncated": False}
    if model["exists"]:
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                full = os.path.join(root, name)
                try:
                    size = os.path.getsize(full)
                except OSError:
                    continue
                model["total_bytes"] += size
                if len(files) < 20000:
                    files.append([os.path.relpath(full, path), size])
                else:
                    model["truncated"] = True
    return model


def main(argv: list[str]) -> None:
    req = json.loads(argv[0])
    out: dict[str, Any] = {"hostname": socket.gethostname(), "home": os.path.expanduser("~"),
                           "python": sys.version.split()[0]}
    mem: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                mem[k] = int(v.split()[0])
    except OSError as e:
        out["meminfo_error"] = str(e)
    out["mem_total_kb"] = mem.get("MemTotal")
    out["mem_available_kb"] = mem.get("MemAvailable")
    out["rdma"] = rdma_ports()
    out["dev_infiniband"] = os.path.isdir("/dev/infiniband")
    listening = listening_ports()
    out["ports_busy"] = sorted(p for p in req.get("ports", []) if p in listening)
    out["processes"] = [{"pid": p, "cmdline": c[:400]} for p, c in sorted(ours(req["tag"]).items())]
    if req.get("model_path"):
        out["model"] = model_dir(req["model_path"])
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
