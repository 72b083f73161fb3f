"""`sparktui linktest [--json] [--history]`: measure the cable between the nodes against NVIDIA's pass mark.

Runs, inside the engine's image (docker) or on the nodes (host runtime), the first tool found on the head:
NCCL's ``all_reduce_perf`` across the nodes with ``mpirun`` (one rank per node), else ``ib_write_bw`` on
each RDMA device of the cable (a server on the first worker, the client on the head, summed); else says
what is not in the image. Busbw is judged against 21.875 GB/s and kept in ``linktest.jsonl``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparktui.commands.common import config_from_args, print_json, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus
from sparktui.domain import linktest as L

if TYPE_CHECKING:
    from sparktui.config import NodeConfig, SparkConfig
    from sparktui.remote.transport import Transport


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "exit status: 0 pass, 1 below the pass mark or no tool, 2 no usable config"
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--history", action="store_true", help="list earlier linktests and exit")
    parser.add_argument("--size", default="16G", help="all_reduce_perf message size (default 16G)")


def run(args: argparse.Namespace) -> int:
    if args.history:
        results = L.LinkTestStore().load()
        if args.json:
            print_json(results)
        for r in [] if args.json else results:
            print(f"{r.get('at', 0):.0f}  {r.get('message', '')}")
        return ExitStatus.OK
    config = config_from_args(args)
    if refuse_example(args, config, "linktest", ""):
        return ExitStatus.USAGE
    result = run_async(linktest_kept(config, args.size))
    if args.json:
        print_json(result.to_json())
    else:
        print(result.message)
    if result.tool == "none":
        print("linktest: " + result.message, file=sys.stderr)
    return ExitStatus.of(result.ok)


def _in_runtime(config: SparkConfig, node: NodeConfig, argv: list[str]) -> list[str]:
    from sparktui.domain.lifecycle import plan as P

    if config.engine.runtime == "docker":
        return L.in_image_argv(config.engine.image, argv)
    return P.runtimes(config)[node.name].wrap(argv, tagged=True)


async def linktest_kept(config: SparkConfig, size: str = "16G") -> L.LinkTestResult:
    """A linktest, kept in the history when it measured something (the verb and the dashboard's key)."""
    result = await linktest(config, size)
    if result.busbw_gbs is not None:
        L.LinkTestStore().append(result)
    return result


async def linktest(config: SparkConfig, size: str = "16G") -> L.LinkTestResult:
    from sparktui.remote.cluster import close_cluster, open_cluster

    transports = await open_cluster(config)
    try:
        head = config.head
        where = f"in {config.engine.image}" if config.engine.runtime == "docker" else f"on {head.name}"
        found: dict[str, bool] = {}
        for tool in L.TOOLS:
            res = await transports[head.name].run(_in_runtime(config, head, L.which_argv(tool)), timeout=120)
            found[tool] = res.ok and bool(res.stdout.strip())
        nodes = tuple(n.name for n in config.nodes)
        if found["all_reduce_perf"] and found["mpirun"]:
            env = sorted(k for k in config.engine.env if k.startswith(("NCCL_", "UCX_", "OMPI_")))
            argv = L.all_reduce_argv([n.address for n in config.nodes], size, env)
            res = await transports[head.name].run(_in_runtime(config, head, argv), timeout=900)
            parsed = L.parse_nccl_tests(res.stdout)
            if parsed is None or parsed.peak_busbw is None:
                tail = (res.stdout + res.stderr).strip().splitlines()[-3:]
                return L.LinkTestResult("all_reduce_perf", False, "all_reduce_perf gave no result: "
                                        + " | ".join(tail), nodes=nodes)
            # A second, tiny all-reduce: its time is the latency each of a decoded token's all-reduces
            # costs (`sparktui plan`'s decode ceiling).
            small = await transports[head.name].run(
                _in_runtime(config, head, L.all_reduce_argv([n.address for n in config.nodes],
                                                            L.LATENCY_SIZE, env)), timeout=300)
            latency = L.parse_nccl_tests(small.stdout) if small.ok else None
            us = latency.latency_us if latency is not None else None
            extra = {} if us is None else {"latency_us": us}
            return L.judge("all_reduce_perf", parsed.peak_busbw, nodes, avg_busbw=parsed.avg_busbw,
                           wrong=parsed.wrong, size=size, **extra)
        if found["ib_write_bw"] and config.workers:
            return await _ib_write_bw(config, transports, nodes)
        return L.not_in_image(where, ("all_reduce_perf + mpirun", "ib_write_bw"))
    finally:
        await close_cluster(transports)


async def _ib_write_bw(config: SparkConfig, transports: Mapping[str, Transport],
                       nodes: tuple[str, ...]) -> L.LinkTestResult:
    import asyncio

    from sparktui.domain.lifecycle.links import LinkFacts, cable_ports, link_argv

    head, worker = config.head, config.workers[0]

    async def devices(node: NodeConfig) -> list[str]:
        if node.rdma_devices:
            return list(node.rdma_devices)
        res = await transports[node.name].run(link_argv(config, node), timeout=60)
        ports = cable_ports(LinkFacts.parse(res.stdout), (), node.interface) if res.ok else []
        return [str(p.get("device")) for p in ports]

    pairs = list(zip(await devices(head), await devices(worker), strict=False))
    if not pairs:
        return L.LinkTestResult("ib_write_bw", False, "ib_write_bw: no RDMA device of the cable found",
                                nodes=nodes)
    servers = [await transports[worker.name].start(
        _in_runtime(config, worker, L.ib_write_bw_argv(w, L.IB_PORT + i))) for i, (_, w) in enumerate(pairs)]
    await asyncio.sleep(2.0)
    try:
        clients = await asyncio.gather(*(
            transports[head.name].run(
                _in_runtime(config, head, L.ib_write_bw_argv(h, L.IB_PORT + i, worker.address)), timeout=120)
            for i, (h, _) in enumerate(pairs)))
    finally:
        for proc in servers:
            proc.terminate()
    gbits = [L.parse_ib_write_bw(c.stdout) for c in clients]
    if any(g is None for g in gbits):
        return L.LinkTestResult("ib_write_bw", False, "ib_write_bw gave no result on "
                                + ", ".join(h for (h, _), g in zip(pairs, gbits, strict=True) if g is None),
                                nodes=nodes)
    total = sum(g for g in gbits if g is not None)
    return L.judge("ib_write_bw", total / 8, nodes, gbits_per_device=dict(
        zip((h for h, _ in pairs), gbits, strict=True)))
