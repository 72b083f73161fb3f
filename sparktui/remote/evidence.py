"""An incident's evidence, taken from every node at once before anything is restarted.

Each piece is bounded in time; a node that does not answer costs only its own pieces, and each missing
piece is written down with why — every file of an incident says something. What is taken:

- ``vllm.log.tail``: the head's vLLM log, its last lines;
- ``ray-worker.<node>.log.tail``: each node's Ray worker log (the vLLM worker output there);
- ``stacks.<node>.json``: every process of ours on each node, with ``py-spy dump`` stacks when py-spy is
  there (said clearly when it is not) and /proc's state of each;
- ``kernel.<node>.json``: each node's kernel and watchdog messages since the engine started, and how its
  previous boot ended (``sparktui postmortem``'s reading);
- ``nccl.txt``: the NCCL lines of the log and the engine's NCCL/UCX/GLOO environment on each node;
- ``ray-nodes.json``: Ray's node list; ``engine.txt``: the engine's argv and config; ``timeline.json``: the
  start-up timeline; ``telemetry.jsonl``: the last minutes of each node's readings.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain.deadline import within
from sparktui.domain.incidents import EvidenceFile, Incident, IncidentStore, new_id
from sparktui.domain.lifecycle import plan as P
from sparktui.node import source
from sparktui.remote.engine import EngineController
from sparktui.remote.kernel_read import read_kernel
from sparktui.remote.ray_logs import ray_worker_log_path
from sparktui.remote.transport import Transport, TransportError

LOG_LINES = 400
WORKER_LINES = 200
#: Seconds for each piece (a py-spy dump of every process may take a few).
PIECE_SECONDS = 60.0
STACK_SECONDS = 10.0


async def collect_incident(
    config: SparkConfig, transports: Mapping[str, Transport], controller: EngineController | None, *,
    cause: str, node: str | None, detail: str, engine_started: float | None,
    timeline: Mapping[str, Any] | None = None, telemetry: Sequence[Mapping[str, Any]] = (),
    store: IncidentStore | None = None,
) -> Incident:
    """Take every piece at once, write them into a new incident, and return it (saved)."""
    store = store or IncidentStore()
    now = time.time()
    incident = Incident(new_id(now), now, cause, node, detail)
    store.open(incident)
    files: list[EvidenceFile] = []
    missing: list[str] = []

    def keep(name: str, what: str, text: str) -> None:
        written = store.write_file(incident, name, text if text.strip() else f"(empty: {what})\n")
        files.append(EvidenceFile(name, written.bytes, what))

    async def piece(name: str, what: str, take: Callable[[], Awaitable[str]]) -> None:
        try:
            text = await within(take(), PIECE_SECONDS)
        except (TransportError, TimeoutError, OSError) as exc:
            why = str(exc) or type(exc).__name__
            missing.append(f"{name}: {why}")
            text = f"not taken: {why}\n"
        keep(name, what, text)

    homes = controller.homes if controller is not None else None
    head = config.head.name
    log_path = P.vllm_log_path(config, homes or None, head)
    jobs = [piece("vllm.log.tail", f"the head's vLLM log, last {LOG_LINES} lines",
                  lambda: _tail(transports[head], log_path, LOG_LINES))]
    for n in config.nodes:
        t = transports[n.name]
        jobs.append(piece(f"ray-worker.{n.name}.log.tail",
                          f"{n.name}'s Ray worker log, last {WORKER_LINES} lines",
                          _bind(_worker_log, config, t, n.name, homes)))
        jobs.append(piece(f"stacks.{n.name}.json", f"the stacks and state of our processes on {n.name}",
                          _bind(_stacks, config, t, n.name)))
        jobs.append(piece(f"kernel.{n.name}.json", f"{n.name}'s kernel messages since the start, and its "
                          "previous boot", _bind(_kernel, config, t, n.name, engine_started)))
    jobs.append(piece("ray-nodes.json", "Ray's node list", _bind(_ray_nodes, controller)))
    await asyncio.gather(*jobs)
    keep("nccl.txt", "the NCCL lines of the log and the engine's NCCL environment", _nccl(store, incident))
    keep("engine.txt", "the engine's argv and config", _engine(config))
    keep("timeline.json", "the start-up timeline", json.dumps(timeline or {}, indent=1, default=str))
    keep("telemetry.jsonl", "the last minutes of each node's readings",
         "".join(json.dumps(t, default=str) + "\n" for t in telemetry))
    saved = Incident(incident.id, incident.at, cause, node, detail, files=tuple(files),
                     missing=tuple(missing))
    store.save(saved)
    return saved


def _bind(fn: Callable[..., Awaitable[str]], *args: Any) -> Callable[[], Awaitable[str]]:
    return lambda: fn(*args)


async def _tail(transport: Transport, path: str, lines: int) -> str:
    res = await transport.run(["tail", "-n", str(lines), path], timeout=PIECE_SECONDS)
    return res.stdout if res.ok else f"tail {path}: {res.stderr.strip() or f'exit {res.returncode}'}\n"


async def _worker_log(config: SparkConfig, transport: Transport, node: str,
                      homes: dict[str, str] | None) -> str:
    path = await ray_worker_log_path(config, transport, node, dict(homes) if homes else None)
    if path is None:
        return f"no Ray worker log on {node} (Ray not running there, or no worker started)\n"
    return await _tail(transport, path, WORKER_LINES)


async def _stacks(config: SparkConfig, transport: Transport, node: str) -> str:
    tag = P.runtimes(config)[node].tag
    argv = [config.node(node).python, "-c", source("stacks"), tag, str(STACK_SECONDS)]
    res = await transport.run(argv, timeout=PIECE_SECONDS)
    if not res.ok:
        return f"stacks on {node}: exit {res.returncode}: {res.stderr.strip()[-500:]}\n"
    return json.dumps(json.loads(res.stdout), indent=1) + "\n"


async def _kernel(config: SparkConfig, transport: Transport, node: str, since: float | None) -> str:
    found = await read_kernel(transport, config.node(node), since)
    if isinstance(found, str):
        return f"kernel log on {node}: {found}\n"
    return json.dumps(found.to_json(), indent=1) + "\n"


async def _ray_nodes(controller: EngineController | None) -> str:
    if controller is None:
        return "not connected: no controller\n"
    state = await controller.ray_state_once()
    if state is None:
        return "Ray did not answer on the head\n"
    return json.dumps(state.to_json(), indent=1, default=str) + "\n"


def _nccl(store: IncidentStore, incident: Incident) -> str:
    lines = []
    try:
        log = store.read(incident, "vllm.log.tail")
    except OSError:
        log = ""
    lines += [line for line in log.splitlines() if "NCCL" in line or "nccl" in line]
    for path in sorted((store.root / incident.id).glob("stacks.*.json")):
        try:
            env = json.loads(path.read_text()).get("engine_env") or {}
        except (OSError, ValueError):
            continue
        node = path.name[len("stacks."):-len(".json")]
        nccl = {k: v for k, v in env.items() if k.startswith(("NCCL_", "UCX_", "GLOO_"))}
        if nccl:
            lines.append(f"-- the engine's environment on {node}:")
            lines += [f"{k}={v}" for k, v in sorted(nccl.items())]
    return "\n".join(lines) + "\n" if lines else "no NCCL line in the log's tail, no NCCL environment found\n"


def _engine(config: SparkConfig) -> str:
    argv = " ".join(P.serve_argv(config, 0))
    return f"vllm serve argv (rank 0):\n{argv}\n\nconfig:\n{config.model_dump_json(indent=1)}\n"
