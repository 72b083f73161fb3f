"""Start overhead against the number of nodes: `sparktui start` (preflight included) to `vllm serve` sent.

On the test bed (root): 2, 3 and 4 SSH hosts, runtime host, real Ray 2.60, the stand-in engine. Each
cycle is a full start from nothing — preflight on every node, Ray head, workers, the wait for every node
and GPU, `vllm serve` sent — then a verified stop. Two ways in the same run, alternating:

* **early** (sparktui's way): every worker's `ray start` goes out as soon as the head's GCS port answers;
* **serial** (the previous way): the workers go out when `ray start --head` has returned.

Printed per node count: the median of each, the phases (preflight, head to workers sent, workers sent
to Ray ready seen, to `vllm serve` sent) and the ratio serial / early.

    .venv/bin/python benchmarks/bench_start_scaling.py [--nodes 2,3,4] [--cycles 2] [--no-preflight]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sparktui.remote.cluster import close_cluster, open_cluster  # noqa: E402
from sparktui.remote.engine import EngineController  # noqa: E402
from tests.lifecycle_helpers import lifecycle_config, make_model_dirs  # noqa: E402
from tests.testbed import Testbed, unavailable_reason  # noqa: E402


async def one_start(controller: EngineController, *, early: bool, preflight: bool) -> dict[str, float]:
    controller.early_workers = early
    t0 = time.time()
    view = await controller.start(preflight=preflight)
    if not view.ok:
        raise SystemExit(f"start failed: {view.message}")
    m = controller.marks
    workers = [t for k, t in m.items() if k.startswith("begin:ray start (worker)")]
    head_begin = m["begin:ray start (head):" + controller.config.head.name]
    out = {
        "total": m["serve_launch"] - t0,
        "preflight": head_begin - t0,
        "head_to_workers": max(workers) - head_begin,
        "workers_to_ray_ready": m["ray_ready_seen"] - max(workers),
        "ray_ready_to_serve": m["serve_launch"] - m["ray_ready_seen"],
    }
    stop = await controller.stop()
    if not stop.ok:
        raise SystemExit(f"stop incomplete: {stop.message}")
    return out


def med(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


Rows = list[dict[str, float]]


async def bench(n: int, cycles: int, preflight: bool) -> tuple[Rows, Rows]:
    names = tuple(f"spark{i}" for i in range(1, n + 1))
    with Testbed(names) as bed:
        make_model_dirs(bed)
        config = lifecycle_config(bed, tensor_parallel_size=n)
        transports = await open_cluster(config)
        controller = EngineController(config, transports)
        early: list[dict[str, float]] = []
        serial: list[dict[str, float]] = []
        try:
            await controller.stop()  # nothing of an earlier run
            for _ in range(cycles):
                early.append(await one_start(controller, early=True, preflight=preflight))
                serial.append(await one_start(controller, early=False, preflight=preflight))
        finally:
            await close_cluster(transports)
    return early, serial


def loadavg() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="2,3,4", help="node counts, comma separated")
    parser.add_argument("--cycles", type=int, default=2, help="starts per way and node count")
    parser.add_argument("--no-preflight", action="store_true", help="time the start plan alone")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"bench_start_scaling: needs the test bed: {reason}", file=sys.stderr)
        return 2
    print("Start → `vllm serve` sent on the test bed (runtime host, real Ray 2.60, stand-in engine"
          + (", preflight included)" if not args.no_preflight else ", no preflight)"))
    print(f"{'nodes':>5}  {'early':>7}  {'serial':>7}  {'ratio':>5}  early phases: preflight / head→workers /"
          " workers→Ray ready / →serve   load")
    totals: dict[int, float] = {}
    for n in (int(x) for x in args.nodes.split(",")):
        early, serial = await bench(n, args.cycles, not args.no_preflight)
        totals[n] = med(early, "total")
        phases = " / ".join(f"{med(early, k):.2f}" for k in
                            ("preflight", "head_to_workers", "workers_to_ray_ready", "ray_ready_to_serve"))
        print(f"{n:>5}  {med(early, 'total'):>6.2f}s  {med(serial, 'total'):>6.2f}s  "
              f"{med(serial, 'total') / med(early, 'total'):>4.2f}x  {phases}   {loadavg()}", flush=True)
        print("       serial phases: " + " / ".join(f"{med(serial, k):.2f}" for k in
              ("preflight", "head_to_workers", "workers_to_ray_ready", "ray_ready_to_serve")), flush=True)
    ns = sorted(totals)
    if len(ns) > 1:
        per = (totals[ns[-1]] - totals[ns[0]]) / (ns[-1] - ns[0])
        print(f"growth per extra node (early): {per:+.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
