"""Lifecycle timings on the test bed (root): Ray-ready → `vllm serve`, and a full verified stop.

Measured in one run, over real SSH to two test hosts with real Ray and the stand-in engine:

1. **Ray registered → `vllm serve` launched.** "Ray has every node and GPU" is read from the head's GCS
   log (``gcs_server.out``: the time the last node, with its GPU, registered), not from sparktui, so the
   figure includes sparktui's polling delay. sparktui's mark is the wall-clock time it sent the detached
   `vllm serve` command (and, second figure, when that command returned the engine's pid).
   The naive way, in the same run: poll `ray status` every 2 s over SSH (as community launchers do) and
   then sleep 5 s for Ray's monitor to settle; its latency is computed the same way.
2. **Full stop** (vLLM SIGINT→SIGTERM→SIGKILL, Ray on every node, verify nothing remains), engine
   ready. The naive way, in one extra cycle: over SSH, one node after the other, SIGTERM vLLM and wait for
   it, then `ray stop` (each test host has its own PID namespace, so `ray stop` only sees that host).

    .venv/bin/python benchmarks/bench_lifecycle.py [--cycles 3] [--pace 4]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sparktui.config import SparkConfig  # noqa: E402
from sparktui.domain.lifecycle.ray_state import ExpectedNode, evaluate, parse_ray_status  # noqa: E402
from sparktui.remote.cluster import close_cluster, open_cluster  # noqa: E402
from sparktui.remote.engine import EngineController  # noqa: E402
from sparktui.remote.engine_wait import wait_until_ready  # noqa: E402
from sparktui.remote.transport import Transport  # noqa: E402
from tests.lifecycle_helpers import lifecycle_config, make_model_dirs  # noqa: E402
from tests.testbed import Testbed, unavailable_reason  # noqa: E402

#: "[2026-11-29 18:01:02,345 I 12 12] gcs_node_manager.cc:…: Registering new node, node id = …"
_GCS_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?(?:Registering|registered)", re.I)
NAIVE_POLL = 2.0
NAIVE_SETTLE = 5.0


def gcs_registrations(bed: Testbed) -> list[float]:
    logs = sorted((bed.host_tmp("spark1") / "ray").glob("session_2*/logs/gcs_server.out"),
                  key=lambda p: p.stat().st_mtime)
    if not logs:
        return []
    times = []
    for line in logs[-1].read_text(errors="replace").splitlines():
        m = _GCS_LINE.match(line)
        if m and "node" in line.lower():
            times.append(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp())
    return times


async def naive_wait(config: SparkConfig, transport: Transport, expected: list[ExpectedNode],
                     begin: float) -> float | None:
    """`ray status` every 2 s until every node and GPU shows, then sleep 5 s: when it would launch."""
    ray = [*config.engine.ray_command, "status", "--address",
           f"{config.head.address}:{config.engine.ray_port}"]
    while time.time() - begin < 120:
        t = time.time()
        res = await transport.run(ray, timeout=30)
        state = parse_ray_status(res.stdout)
        if state is not None and evaluate(state, expected).ready:
            return time.time() + NAIVE_SETTLE
        await asyncio.sleep(max(0.0, NAIVE_POLL - (time.time() - t)))
    return None


async def naive_stop(config: SparkConfig, transports: dict[str, Transport]) -> float:
    t0 = time.monotonic()
    head = transports[config.head.name]
    await head.run(["sh", "-c", 'p=$(cat /tmp/sparktui/vllm.pid); kill -TERM "$p";'
                    ' while kill -0 "$p" 2>/dev/null; do sleep 0.2; done'], timeout=120)
    for node in config.nodes:
        await transports[node.name].run([*config.engine.ray_command, "stop"], timeout=120)
    return time.monotonic() - t0


async def cycle(config: SparkConfig, transports: dict[str, Transport], bed: Testbed, naive: bool,
                ) -> dict[str, float | None]:
    controller = EngineController(config, transports)
    expected = [ExpectedNode(n.name, n.address, 1.0) for n in config.nodes]
    naive_task: asyncio.Task[float | None] | None = None

    def on_progress(view: object) -> None:
        nonlocal naive_task
        steps = getattr(view, "steps", ())
        started = any(s.name == "ray start (worker)" and s.status.value == "ok" for s in steps)
        if naive_task is None and started:
            naive_task = asyncio.ensure_future(naive_wait(config, transports[config.head.name], expected,
                                                          time.time()))

    controller.on_progress = on_progress
    view = await controller.start(preflight=False)
    if not view.ok:
        raise SystemExit(f"start failed: {view.message}")
    launched = controller.marks["serve_launch"]
    serve_step = next(s for s in view.steps if s.name == "vllm serve")
    pid_back = launched + (serve_step.seconds or 0.0)
    registered = gcs_registrations(bed)
    ray_ready = max(registered) if len(registered) >= len(config.nodes) else None
    naive_at = await naive_task if naive_task is not None else None
    result = await wait_until_ready(controller, timeout=180)
    if result.outcome != "ready":
        raise SystemExit(f"engine not ready: {result.detail}")
    out: dict[str, float | None] = {
        "ray_to_launch": None if ray_ready is None else launched - ray_ready,
        "ray_to_seen": None if ray_ready is None else controller.marks["ray_ready_seen"] - ray_ready,
        "worker_step_end": None if ray_ready is None else _worker_end(controller) - ray_ready,
        "ray_to_pid": None if ray_ready is None else pid_back - ray_ready,
        "naive_ray_to_launch": None if ray_ready is None or naive_at is None else naive_at - ray_ready,
    }
    if naive:
        out["naive_stop"] = await naive_stop(config, transports)
        await controller.stop()  # whatever the naive stop left
    else:
        t0 = time.monotonic()
        stop = await controller.stop()
        out["stop"] = time.monotonic() - t0
        if not stop.ok:
            raise SystemExit(f"stop incomplete: {stop.message}")
    return out


def _worker_end(controller: EngineController) -> float:
    """Wall time at which the last worker's `ray start` command returned."""
    return max(t for k, t in controller.marks.items() if k.startswith("done:ray start (worker)"))


def fmt(values: list[float]) -> str:
    if not values:
        return "n/a"
    return (f"median {statistics.median(values):.3f} s, min {min(values):.3f}, max {max(values):.3f} "
            f"(n={len(values)})")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--pace", type=float, default=4.0, help="stand-in start-up length, seconds")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"bench_lifecycle: needs the test bed: {reason}", file=sys.stderr)
        return 2
    with Testbed(("spark1", "spark2")) as bed:
        make_model_dirs(bed)
        config = lifecycle_config(bed, pace=args.pace, stop_grace=10.0)
        transports = await open_cluster(config)
        try:
            rows = [await cycle(config, transports, bed, naive=False) for _ in range(args.cycles)]
            rows.append(await cycle(config, transports, bed, naive=True))
        finally:
            await close_cluster(transports)

    def col(key: str) -> list[float]:
        return [float(v) for r in rows if (v := r.get(key)) is not None]

    ours, naive = col("ray_to_launch"), col("naive_ray_to_launch")
    stops, naive_stops = col("stop"), col("naive_stop")
    print("Lifecycle on the test bed (2 SSH hosts, real Ray 2.60, stand-in engine, stop_grace 10 s)")
    print(f"  Ray registered -> vllm serve sent      : {fmt(ours)}   (target <= 1 s)")
    print(f"  Ray registered -> vllm serve pid back  : {fmt(col('ray_to_pid'))}")
    print(f"  Ray registered -> sparktui sees it     : {fmt(col('ray_to_seen'))}")
    print(f"  Ray registered -> worker `ray start` returned: {fmt(col('worker_step_end'))}")
    print(f"  naive (ray status every 2 s + 5 s)     : {fmt(naive)}")
    if ours and naive:
        ratio = statistics.median(naive) / statistics.median(ours)
        print(f"  ratio naive / sparktui                 : {ratio:.1f}x")
    print(f"  full stop, verified (sparktui)         : {fmt(stops)}   (target <= 15 s)")
    print(f"  naive stop (TERM vLLM, ray stop, serial): {fmt(naive_stops)}")
    if stops and naive_stops:
        print(f"  ratio naive / sparktui                 : "
              f"{statistics.median(naive_stops) / statistics.median(stops):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
