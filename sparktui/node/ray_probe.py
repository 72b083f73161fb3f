"""argv: ADDRESS NODE_IP INTERVAL COUNT [stdin]. Connects to the Ray cluster once and prints one
``RAYPROBE {json}`` line per INTERVAL (``ray.nodes()``: the same keys in Ray 2.9 … 2.60), COUNT times at
most; it also ends when the channel closes (the next print fails). ``RAYPROBE_ERROR {json}`` when Ray
cannot be imported or joined."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, NoReturn

from sparktui.node.stdin_watch import end_with_stdin


def error(text: str, code: int) -> NoReturn:
    print("RAYPROBE_ERROR " + json.dumps({"error": text}), flush=True)
    sys.exit(code)


def reading(ray: Any) -> dict[str, Any]:
    nodes = []
    for n in ray.nodes():
        res = n.get("Resources") or {}
        nodes.append({"node_id": n.get("NodeID"), "ip": n.get("NodeManagerAddress"),
                      "hostname": n.get("NodeManagerHostname"), "alive": bool(n.get("Alive", n.get("alive"))),
                      "gpu": float(res.get("GPU", 0.0)), "is_head": "node:__internal_head__" in res})
    cr = ray.cluster_resources()
    return {"ray_version": ray.__version__, "t": time.time(), "nodes": nodes,
            "gpu_total": float(cr.get("GPU", 0.0))}


def main(argv: list[str]) -> None:
    argv = end_with_stdin(argv)
    addr, ip, interval, count = argv[0], argv[1], float(argv[2]), int(argv[3])
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except Exception as e:
        error(f"cannot import ray: {e}", 3)
    try:
        ray.init(address=addr, _node_ip_address=ip, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as e:
        error(f"ray.init({addr}): {type(e).__name__}: {e}", 4)
    for _ in range(count):
        print("RAYPROBE " + json.dumps(reading(ray), sort_keys=True), flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    main(sys.argv[1:])
