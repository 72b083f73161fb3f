"""`sparktui status` latency on the test bed (root): two SSH hosts, runtime host, real Ray, the stand-in
engine at ready — healthy, then with the worker's link cut (its veth down: no answer at all).

Each figure is ``gather_status`` (what `sparktui status --json` does, connects included) timed from
outside, several times. Ours: one round trip per node (``sparktui/node/status.py``: facts, probe, our
processes, vLLM's state, Ray's node list over the GCS's gRPC, the head's reach, the log, all at once on
the node). The previous way runs in the same run (``one_round=False``): several commands per node —
facts and probe, then discovery's listing, the GCS check, then the Ray probe (``ray.init``), the log,
the reach. Last, where one round's time goes on each node.

    .venv/bin/python benchmarks/bench_status.py [--runs 5]
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

from sparktui.commands.status import gather_status  # noqa: E402
from sparktui.config import SparkConfig  # noqa: E402
from sparktui.remote.cluster import close_cluster, open_cluster  # noqa: E402
from sparktui.remote.engine import EngineController  # noqa: E402
from sparktui.remote.engine_wait import wait_until_ready  # noqa: E402
from sparktui.remote.status_round import status_round  # noqa: E402
from sparktui.remote.transport import TransportError  # noqa: E402
from tests.lifecycle_helpers import lifecycle_config, make_model_dirs  # noqa: E402
from tests.testbed import Testbed, unavailable_reason  # noqa: E402


def loadavg() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def timed(config: SparkConfig, runs: int, one_round: bool) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.monotonic()
        await gather_status(config, timeout=20.0, one_round=one_round)
        out.append(time.monotonic() - t0)
    return out


async def breakdown(config: SparkConfig) -> None:
    """Where one round's time goes, per node: the SSH connect (host key checked), the one command's round
    trip, the script's own time on the node and each of its parts there."""
    transports = await open_cluster(config, connect=False)
    try:
        async def one(name: str) -> str:
            node = next(n for n in config.nodes if n.name == name)
            t0 = time.monotonic()
            await transports[name].connect()
            t1 = time.monotonic()
            try:
                answer = await status_round(config, node, transports[name])
            except TransportError as exc:
                return f"    {name}: {exc}"
            t2 = time.monotonic()
            parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(answer.parts.items(), key=lambda kv: -kv[1]))
            return (f"    {name}: connect {t1 - t0:.2f} s, round trip {t2 - t1:.2f} s "
                    f"(on the node {answer.seconds:.2f} s: {parts})")
        for line in await asyncio.gather(*(one(n.name) for n in config.nodes)):
            print(line)
    finally:
        await close_cluster(transports)


def fmt(values: list[float]) -> str:
    return (f"median {statistics.median(values):.2f} s "
            f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"bench_status: needs the test bed: {reason}", file=sys.stderr)
        return 2
    with Testbed(("spark1", "spark2")) as bed:
        make_model_dirs(bed)
        config = lifecycle_config(bed, pace=1.0, ray_wait_timeout=120.0)
        transports = await open_cluster(config)
        controller = EngineController(config, transports)
        try:
            view = await controller.start(preflight=False)
            if not view.ok:
                raise SystemExit(f"start failed: {view.message}")
            if (await wait_until_ready(controller, timeout=180)).outcome != "ready":
                raise SystemExit("engine not ready")
            report = await gather_status(config, timeout=20.0)
            print(f"`sparktui status` on the test bed (2 hosts, engine {report['engine'].get('state')}), "
                  f"{loadavg()}")
            rows = {}
            for label in ("healthy", "worker link down"):
                if label != "healthy":
                    bed.link_down("spark2")
                ours, before = [], []
                for _ in range(args.runs):  # alternate, so load changes hit both alike
                    ours += await timed(config, 1, True)
                    before += await timed(config, 1, False)
                rows[label] = (ours, before)
                print(f"  {label:17}: {fmt(ours)}   previous way (several commands per node) {fmt(before)}   "
                      f"ratio {statistics.median(before) / statistics.median(ours):.2f}x   {loadavg()}",
                      flush=True)
            bed.link_up("spark2")
            print(f"  where one round goes (healthy), {loadavg()}:")
            await asyncio.sleep(5)  # the worker's link back
            await breakdown(config)
        finally:
            await controller.stop()
            await close_cluster(transports)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
