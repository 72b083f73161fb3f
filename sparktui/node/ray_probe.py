"""argv: ADDRESS NODE_IP INTERVAL COUNT [gcs] [changes] [stdin]. Connects to the Ray cluster once and
prints one ``RAYPROBE {json}`` line per INTERVAL (``ray.nodes()``: the same keys in Ray 2.9 … 2.60), COUNT
times at most; it also ends when the channel closes (the next print fails). ``RAYPROBE_ERROR {json}`` when
Ray cannot be imported or joined.

``changes`` (the dashboard's watch while the engine runs): a reading is printed only when it differs from
the last one printed (its time aside), or ten seconds on (``changes.ChangesOnly``): Ray is still read every
INTERVAL here, and a node lost is still told within one, but a quiet cluster sends a line every ten
seconds, not every second, for the dashboard to decrypt and parse all day.

``gcs`` (a one-shot reading, ``sparktui status``): the same node table read from the GCS without joining
as a driver (``ray.init`` starts a core worker: ~1.2 s more than ``import ray`` on a test host), through
the state accessor ``ray memory`` uses; ``ray.init`` as before where that private API is missing."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, NoReturn

from sparktui.node.changes import ChangesOnly
from sparktui.node.stdin_watch import end_with_stdin


def error(text: str, code: int) -> NoReturn:
    print("RAYPROBE_ERROR " + json.dumps({"error": text}), flush=True)
    sys.exit(code)


def reading(ray: Any, table: list[dict[str, Any]], cr: dict[str, float]) -> dict[str, Any]:
    """One ``RAYPROBE`` document from the GCS node table (``ray.nodes()``) and the cluster's resources."""
    nodes = []
    for n in table:
        res = n.get("Resources") or {}
        nodes.append({"node_id": n.get("NodeID"), "ip": n.get("NodeManagerAddress"),
                      "hostname": n.get("NodeManagerHostname"), "alive": bool(n.get("Alive", n.get("alive"))),
                      "gpu": float(res.get("GPU", 0.0)), "is_head": "node:__internal_head__" in res})
    return {"ray_version": ray.__version__, "t": time.time(), "nodes": nodes,
            "gpu_total": float(cr.get("GPU", 0.0))}


def gcs_state(addr: str) -> Any:
    """Ray's global state read straight from the GCS at ``addr`` (no driver), or ``None`` where this Ray
    lacks the accessor or the GCS does not answer it."""
    try:
        from ray._private.internal_api import get_state_from_address

        state = get_state_from_address(addr)
        state.node_table()  # connects now: a failure falls back to ray.init
        return state
    except Exception:
        return None


def main(argv: list[str]) -> None:
    argv = end_with_stdin(argv)
    addr, ip, interval, count = argv[0], argv[1], float(argv[2]), int(argv[3])
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except Exception as e:
        error(f"cannot import ray: {e}", 3)
    flags = argv[4:]
    state = gcs_state(addr) if "gcs" in flags else None
    if state is None:
        try:
            ray.init(address=addr, _node_ip_address=ip, log_to_driver=False, logging_level=logging.ERROR)
        except Exception as e:
            error(f"ray.init({addr}): {type(e).__name__}: {e}", 4)
        state = ray
    table = ray.nodes if state is ray else state.node_table
    watch = ChangesOnly() if "changes" in flags else None
    for i in range(count):
        doc = reading(ray, table(), state.cluster_resources())
        doc["via"] = "driver" if state is ray else "gcs"
        if watch is None or watch.due(json.dumps({k: v for k, v in doc.items() if k != "t"}, sort_keys=True),
                                      time.monotonic()):
            print("RAYPROBE " + json.dumps(doc, sort_keys=True), flush=True)
        if i + 1 < count:
            time.sleep(interval)


if __name__ == "__main__":
    main(sys.argv[1:])
