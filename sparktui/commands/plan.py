"""`sparktui plan [--json] [--model-config PATH] [--offline]`: will the configured start fit, how long until
ready, how fast can it decode — per node, each figure with its inputs, before anything starts.

Reads each node's ``/proc/meminfo`` and the head's model directory (config.json and safetensors headers, as
preflight does) over SSH; ``--offline`` (or a node that does not answer) assumes a GB10's memory, all of it
free, and says so. ``--model-config`` plans a model that is not on the head yet from its config.json (the
weights are then counted from it). The time to ready comes from the run history, the all-reduce latency
from the linktest history. Exit status 1 when the start will not fit, with the fix.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktui.commands.common import config_from_args, print_json, run_async
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.domain.model_files import ModelDir
    from sparktui.domain.serve_plan import StartPlan

#: Seconds to wait for a node's answer before planning it with assumed figures.
NODE_TIMEOUT = 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "exit status: 0 it fits, 1 it will not fit (the fix is printed), 2 no usable config or " \
                    "no model config.json to plan with"
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--model-config", metavar="PATH",
                        help="the model's config.json (default: read from the head's model directory)")
    parser.add_argument("--offline", action="store_true",
                        help="do not reach the nodes: assume a GB10's memory (121.7 GiB, all free)")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    model_config: dict[str, Any] | None = None
    if args.model_config:
        try:
            model_config = json.loads(Path(args.model_config).expanduser().read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"sparktui plan: {args.model_config}: {exc}", file=sys.stderr)
            return ExitStatus.USAGE
    memory: dict[str, tuple[int, int]] = {}
    model_dir: ModelDir | None = None
    reach_error = None
    if not args.offline:
        try:
            memory, model_dir = run_async(read_nodes(config, want_model=model_config is None))
        except Exception as exc:   # unreachable cluster: plan with assumed figures, said in the output
            reach_error = f"nodes not read ({exc}): memory assumed"
    try:
        plan = build(config, memory, model_dir, model_config, reach_error,
                     config_source=args.model_config)
    except ValueError as exc:
        print(f"sparktui plan: {exc}", file=sys.stderr)
        return ExitStatus.USAGE
    if args.json:
        print_json(plan.to_json())
    else:
        print(plan.render())
    return ExitStatus.OK if plan.fits else ExitStatus.NOT_WELL


async def read_nodes(config: SparkConfig, *, want_model: bool) -> tuple[dict[str, tuple[int, int]],
                                                                         ModelDir | None]:
    """Each node's (MemTotal, MemAvailable) that could be read, and the head's model directory."""
    import asyncio

    from sparktui.domain.lifecycle.preflight_plan import model_argv
    from sparktui.domain.model_files import parse_model_info
    from sparktui.domain.serve_plan import parse_meminfo
    from sparktui.remote.cluster import close_cluster, open_cluster

    transports = await open_cluster(config, connect=False)
    try:
        async def meminfo(name: str, proc_root: str) -> tuple[str, tuple[int, int] | None]:
            try:
                t = transports[name]
                await asyncio.wait_for(t.connect(), NODE_TIMEOUT)
                res = await t.run(["cat", f"{proc_root}/meminfo"], timeout=NODE_TIMEOUT)
                return name, parse_meminfo(res.stdout) if res.ok else None
            except Exception:   # one node down must not stop the plan of the others
                return name, None

        found = await asyncio.gather(*(meminfo(n.name, n.proc_root) for n in config.nodes))
        model_dir = None
        if want_model:
            try:
                res = await transports[config.head.name].run(model_argv(config, config.head), timeout=60)
                model_dir = parse_model_info(res.stdout) if res.ok else None
            except Exception:
                model_dir = None
        return {n: m for n, m in found if m is not None}, model_dir
    finally:
        await close_cluster(transports)


def build(config: SparkConfig, memory: dict[str, tuple[int, int]], model_dir: ModelDir | None,
          model_config: dict[str, Any] | None, reach_error: str | None = None, *,
          config_source: str | None = None) -> StartPlan:
    """The plan from what was read; ``ValueError`` with the fix when there is no config.json to plan with."""
    from sparktui.domain.history import HistoryStore, setup_of
    from sparktui.domain.lifecycle.memory_fit import settings_of
    from sparktui.domain.linktest import LinkTestStore
    from sparktui.domain.model_params import count_params
    from sparktui.domain.perf.disk_read import DiskReadStore
    from sparktui.domain.serve_plan import (
        GB10_MEMTOTAL_BYTES,
        StartPlan,
        decode_ceiling,
        plan_node,
        ready_estimate,
    )
    from sparktui.domain.sizing import SizingError, shape_from_config

    e = config.engine
    cfg = model_config if model_config is not None else (model_dir.config if model_dir else None)
    if cfg is None:
        where = (f"{model_dir.path}/config.json: {model_dir.config_error or 'missing'}" if model_dir
                 else f"{e.model} could not be read on {config.head.name}")
        raise ValueError(f"no config.json to plan with ({where}): give --model-config PATH (the model's "
                         "config.json, e.g. from its Hugging Face page)")
    try:
        shape = shape_from_config(cfg)
        settings = settings_of(config)
        params = count_params(cfg)
    except SizingError as exc:
        raise ValueError(f"cannot plan: {exc}") from None
    tp, pp = settings.tensor_parallel, settings.pipeline_parallel
    files = model_dir.weights_bytes if model_dir is not None and model_config is None else 0
    per_gpu = None
    if files:
        where = model_dir.path if model_dir else "?"
        weights_source = f"{files / 2**30:.1f} GiB of safetensors in {where}, ÷ TP {tp} × PP {pp}"
    else:
        per_gpu = params.gpu_weight_bytes(tp, pp)
        weights_source = (f"counted from config.json: {params.total / 1e9:.1f} B parameters × "
                          f"{params.weight_bytes:g} bytes, the heaviest GPU {per_gpu / 2**30:.1f} GiB")
    notes = [reach_error] if reach_error else []
    if config_source:
        notes.append(f"model shape from {config_source} (--model-config), not from the head")
    try:   # each node's last `sparktui model read-test` (domain.perf.disk_read)
        reads = DiskReadStore().latest()
    except OSError:
        reads = {}
    nodes = []
    for node in config.nodes:
        mem = memory.get(node.name)
        source = "read on the node"
        if mem is None:
            mem, source = (GB10_MEMTOTAL_BYTES, GB10_MEMTOTAL_BYTES), "assumed: a GB10, all free"
        nodes.append(plan_node(node.name, shape, files, mem[0], mem[1], settings,
                               floor_bytes=int(e.memory_floor), memory_source=source,
                               disk_read_gibs=reads[node.name].gib_s if node.name in reads else None,
                               weights_per_gpu_bytes=per_gpu))
    model, image = setup_of(e)
    return StartPlan(model=e.model, settings=settings, weights_source=weights_source, nodes=tuple(nodes),
                     ceiling=decode_ceiling(params, tp, pp, LinkTestStore().load()),
                     ready=ready_estimate(HistoryStore().runs_for(model, image), model, image),
                     notes=tuple(notes))
