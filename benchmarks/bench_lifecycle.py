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

3. **Full restart vs `restart = "vllm"`**, engine ready → `restart` → ready again: stop + start of everything
   against vLLM alone (Ray and the containers kept).
4. **Cold vs warm start** (start → ready), the stand-in replaying the DGX Spark recording, which compiles
   (``--warm-pace`` s for the whole start-up, the recording's proportions): the first start with an empty
   vLLM cache root compiles, the next one (after a verified stop: with docker after ``docker rm -f``, the
   cache on the node's disk through ``engine.cache_mounts``) loads the compiled graphs.
5. **Image sync** (``--runtime docker``): ``sparktui image sync``'s bytes/s (head → this process → node over
   the SSH connections) against a plain ``docker save | docker load`` piped between the two hosts' daemons
   on this machine (no SSH at all), the image removed from the node before each.

    sudo .venv/bin/python benchmarks/bench_lifecycle.py [--runtime host|docker] [--cycles 3] [--pace 4]
        [--warm-pace 60]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sparktui.config import SparkConfig  # noqa: E402
from sparktui.domain.lifecycle import plan as P  # noqa: E402
from sparktui.domain.lifecycle.ray_state import ExpectedNode, evaluate, parse_ray_status  # noqa: E402
from sparktui.remote.cluster import close_cluster, open_cluster  # noqa: E402
from sparktui.remote.engine import EngineController  # noqa: E402
from sparktui.remote.engine_wait import wait_until_ready  # noqa: E402
from sparktui.remote.image_sync import sync_image  # noqa: E402
from sparktui.remote.transport import Transport  # noqa: E402
from sparktui.sim.recording import DGX_SPARK_RECORDING  # noqa: E402
from tests.lifecycle_helpers import host_path, lifecycle_overrides, make_model_dirs  # noqa: E402
from tests.testbed import Testbed, docker_image, docker_unavailable_reason, unavailable_reason  # noqa: E402

#: "[2026-11-29 18:01:02,345 I 12 12] gcs_node_manager.cc:…: Registering new node, node id = …"
_GCS_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?(?:Registering|registered)", re.I)
NAIVE_POLL = 2.0
NAIVE_SETTLE = 5.0


#: vLLM's cache root on each test host (its private /tmp): host runtime through VLLM_CACHE_ROOT, docker
#: through the cache mount at the image's default /root/.cache/vllm.
CACHE_ROOT = "/tmp/vllm-cache"


def bench_config(bed: Testbed, runtime: str, pace: float, **engine: Any) -> SparkConfig:
    env = {**engine.pop("env", {})}
    if runtime == "host":
        env["VLLM_CACHE_ROOT"] = CACHE_ROOT
    data = lifecycle_overrides(bed, pace=pace, env=env, stop_grace=10.0, **engine)
    if runtime == "docker":  # as tests/test_docker_testbed.py runs it: the CI image's vllm, ray, python3
        data["engine"].update({
            "runtime": "docker", "image": docker_image.IMAGE, "vllm_command": ["vllm"],
            "ray_command": ["ray"], "ray_python": ["python3"],
            "mounts": [{"source": "/tmp/models", "target": "/tmp/models", "read_only": True}],
            "cache_mounts": [{"source": CACHE_ROOT, "target": "/root/.cache/vllm"}],
        })
    config: SparkConfig = bed.spark_config(**data)
    return config


def gcs_registrations(bed: Testbed, config: SparkConfig) -> list[float]:
    # Ray's temp dir as the head host sees it (docker: the host side of its mount).
    root = host_path(bed, config.head.name, P.ray_log_root(config, None, config.head.name))
    logs = sorted(root.glob("session_2*/logs/gcs_server.out"), key=lambda p: p.stat().st_mtime)
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
    # In the head's container with docker (where `ray` is), on the host otherwise.
    address = f"{config.head.address}:{config.engine.ray_port}"
    head_rt = P.runtimes(config)[config.head.name]
    ray = head_rt.wrap([*config.engine.ray_command, "status", "--address", address])
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
    if config.engine.runtime == "docker":
        # run_cluster.sh's cleanup, node by node: `docker stop` (TERM, 10 s, KILL), then `docker rm`.
        rts = P.runtimes(config)
        for node in config.nodes:
            name = rts[node.name].container
            await transports[node.name].run(["sh", "-c", 'docker stop "$1" && docker rm "$1"', "sh", name],
                                            timeout=120)
        return time.monotonic() - t0
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
    registered = gcs_registrations(bed, config)
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


async def ready_after(controller: EngineController, operation: str) -> tuple[float, dict[str, Any]]:
    """Seconds from asking for ``operation`` (start / restart) to ready, and the ready timeline."""
    t0 = time.monotonic()
    view = await (controller.start(preflight=False) if operation == "start"
                  else controller.restart(preflight=False))
    if not view.ok:
        raise SystemExit(f"{operation} failed: {view.message}")
    result = await wait_until_ready(controller, timeout=300)
    if result.outcome != "ready":
        raise SystemExit(f"engine not ready after {operation}: {result.detail}")
    return time.monotonic() - t0, result.timeline


async def restarts(bed: Testbed, runtime: str, pace: float, transports: dict[str, Transport],
                   cycles: int) -> dict[str, list[float]]:
    """Engine ready → restart → ready, ``cycles`` times each way: full, then vLLM alone."""
    out: dict[str, list[float]] = {"full": [], "vllm": []}
    for mode in ("full", "vllm"):
        controller = EngineController(bench_config(bed, runtime, pace, restart=mode), transports)
        await ready_after(controller, "start")
        for _ in range(cycles):
            seconds, _ = await ready_after(controller, "restart")
            out[mode].append(seconds)
        await _stopped(controller)
    return out


async def cold_warm(bed: Testbed, runtime: str, pace: float, transports: dict[str, Transport],
                    ) -> dict[str, Any]:
    """Start → ready with an empty cache root, then (after a verified stop) with the cache it wrote."""
    shutil.rmtree(host_path(bed, "spark1", CACHE_ROOT), ignore_errors=True)
    config = bench_config(bed, runtime, pace, env={"SPARKTUI_STANDIN_RECORDING": DGX_SPARK_RECORDING})
    controller = EngineController(config, transports)
    out: dict[str, Any] = {}
    for kind in ("cold", "warm"):
        seconds, timeline = await ready_after(controller, "start")
        compile_stage = next(s for s in timeline["stages"] if s["name"] == "compile")
        out[kind] = seconds
        out[kind + "_compile"] = (compile_stage["status"], timeline["facts"].get("compile_seconds"))
        await _stopped(controller)
    return out


async def _stopped(controller: EngineController) -> None:
    stop = await controller.stop()
    if not stop.ok:
        raise SystemExit(f"stop incomplete: {stop.message}")


async def image_sync_vs_plain(bed: Testbed, config: SparkConfig, transports: dict[str, Transport],
                              rounds: int) -> dict[str, list[float]]:
    """MB/s of `sparktui image sync` and of `docker save | docker load` between the hosts, image removed
    from spark2 before each."""
    image = config.engine.image
    out: dict[str, list[float]] = {"sync": [], "plain": [], "size": []}
    for _ in range(rounds):
        bed.docker("spark2", "rmi", image)
        outcomes = await sync_image(config, transports)
        copied = next(o for o in outcomes if o.node == "spark2")
        if copied.action != "copied":
            raise SystemExit(f"image sync: {copied.message}")
        out["sync"].append(copied.bytes / copied.seconds / 1e6)
        out["size"].append(copied.bytes / 1e6)
        bed.docker("spark2", "rmi", image)
        save = shlex.join([*bed._nsenter("spark1"), "docker", "save", image])
        load = shlex.join([*bed._nsenter("spark2"), "docker", "load", "-q"])
        t0 = time.monotonic()
        subprocess.run(["bash", "-o", "pipefail", "-c", f"{save} | {load}"], check=True,
                       capture_output=True, timeout=900)
        out["plain"].append(copied.bytes / (time.monotonic() - t0) / 1e6)
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
    parser.add_argument("--runtime", choices=("host", "docker"), default="host")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--pace", type=float, default=4.0, help="stand-in start-up length, seconds")
    parser.add_argument("--warm-pace", type=float, default=60.0,
                        help="stand-in start-up length for the cold/warm starts (the DGX Spark recording)")
    parser.add_argument("--sync-rounds", type=int, default=2)
    args = parser.parse_args()
    reason = unavailable_reason() or (docker_unavailable_reason() if args.runtime == "docker" else None)
    if reason:
        print(f"bench_lifecycle: needs the test bed: {reason}", file=sys.stderr)
        return 2
    docker = args.runtime == "docker"
    with Testbed(("spark1", "spark2"), docker=docker) as bed:
        if docker:
            docker_image.install(bed, progress=True)
        make_model_dirs(bed)
        config = bench_config(bed, args.runtime, args.pace)
        transports = await open_cluster(config)
        try:
            rows = [await cycle(config, transports, bed, naive=False) for _ in range(args.cycles)]
            rows.append(await cycle(config, transports, bed, naive=True))
            restart = await restarts(bed, args.runtime, args.pace, transports, args.cycles)
            warm = await cold_warm(bed, args.runtime, args.warm_pace, transports)
            sync = await image_sync_vs_plain(bed, config, transports, args.sync_rounds) if docker else None
        finally:
            await close_cluster(transports)

    def col(key: str) -> list[float]:
        return [float(v) for r in rows if (v := r.get(key)) is not None]

    def ratio(slow: list[float], fast: list[float]) -> str:
        return f"{statistics.median(slow) / statistics.median(fast):.1f}x" if slow and fast else "n/a"

    ours, naive = col("ray_to_launch"), col("naive_ray_to_launch")
    stops, naive_stops = col("stop"), col("naive_stop")
    print(f"Lifecycle on the test bed (runtime {args.runtime}; 2 SSH hosts, real Ray 2.60, stand-in engine, "
          f"pace {args.pace:g} s, stop_grace 10 s)")
    print(f"  Ray registered -> vllm serve sent      : {fmt(ours)}   (target <= 1 s)")
    print(f"  Ray registered -> vllm serve pid back  : {fmt(col('ray_to_pid'))}")
    print(f"  Ray registered -> sparktui sees it     : {fmt(col('ray_to_seen'))}")
    print(f"  Ray registered -> worker `ray start` returned: {fmt(col('worker_step_end'))}")
    print(f"  naive (ray status every 2 s + 5 s)     : {fmt(naive)}")
    print(f"  ratio naive / sparktui                 : {ratio(naive, ours)}")
    print(f"  full stop, verified (sparktui)         : {fmt(stops)}   (target <= 15 s)")
    naive_how = "docker stop + rm, serial" if docker else "TERM vLLM, ray stop, serial"
    print(f"  naive stop ({naive_how}): {fmt(naive_stops)}")
    print(f"  ratio naive / sparktui                 : {ratio(naive_stops, stops)}")
    print(f"  restart -> ready, full (stop + start)  : {fmt(restart['full'])}")
    print(f"  restart -> ready, restart = \"vllm\"     : {fmt(restart['vllm'])}")
    print(f"  ratio full / vllm                      : {ratio(restart['full'], restart['vllm'])}")
    print(f"  cold start -> ready (compiles)         : {warm['cold']:.2f} s   compile {warm['cold_compile']}")
    print(f"  warm start -> ready (cache hit)        : {warm['warm']:.2f} s   compile {warm['warm_compile']}"
          f"   (pace {args.warm_pace:g} s, DGX Spark recording)")
    print(f"  ratio cold / warm                      : {warm['cold'] / warm['warm']:.2f}x")
    if sync is not None:
        size = statistics.median(sync["size"])
        ours_mb, plain_mb = statistics.median(sync["sync"]), statistics.median(sync["plain"])
        print(f"  image sync ({size:,.0f} MB, head -> node over SSH): median {ours_mb:.1f} MB/s  "
              f"{[round(x, 1) for x in sync['sync']]}")
        print(f"  plain docker save | docker load (no SSH): median {plain_mb:.1f} MB/s  "
              f"{[round(x, 1) for x in sync['plain']]}")
        print(f"  ratio sync / plain                     : "
              f"{statistics.median(sync['sync']) / statistics.median(sync['plain']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
