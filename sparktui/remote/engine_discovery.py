"""What of ours runs on the nodes now, asked of every node at once: vLLM (its pid file and process), our
containers, our processes, and Ray's node list when our Ray runs (re-attach, and after another sparktui's
operation)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle import preflight as F
from sparktui.domain.lifecycle.discovery import DetachedState, Discovery, discovery_of
from sparktui.domain.lifecycle.gcs_wait import gcs_wait_argv
from sparktui.domain.lifecycle.ray_state import RayState
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.ray_queries import RayQueries
from sparktui.remote.transport import TransportError


async def discover_engine(nodes: EngineNodes, ray_queries: RayQueries, *, ray: bool = True) -> Discovery:
    """What of ours runs on the nodes now; ``ray``: Ray's node list too, when our Ray runs."""
    cfg = nodes.config
    # The state dir's absolute path (docker mounts it at the host's path, not the container's $HOME).
    await nodes.resolve_homes(quiet=True)
    vllm: dict[str, DetachedState] = {}
    containers: dict[str, list[F.DockerContainer]] = {}
    processes: dict[str, list[Mapping[str, object]]] = {}
    unreachable: dict[str, str] = {}

    async def one(name: str) -> None:
        rt = nodes.runtimes[name]
        try:
            listed = await nodes.run(name, P.verify_step(cfg, rt).argv, 30)
            report = last_json_object(listed.stdout) if listed.ok else None
            processes[name] = (report or {}).get("processes", [])
            if cfg.engine.runtime == "docker":
                ps = await nodes.run(name, A.docker_ps(cfg.engine.name_prefix), 30)
                containers[name] = list(F.parse_docker_ps(ps.stdout, cfg.engine.name_prefix))
            if name in {n.name for n in P.vllm_nodes(cfg)}:
                res = await nodes.run(name, P.detached_state_argv(cfg, rt, nodes.homes or None), 30)
                vllm[name] = DetachedState.parse(res.stdout)
        except TransportError as exc:
            unreachable[name] = str(exc)

    # Ray's view (the slowest part: `import ray` on the head) is asked at once, beside the listing,
    # when the head's GCS port answers; it is used only if the listing finds our Ray running.
    early_ray = (asyncio.ensure_future(_ray_if_gcs(nodes, ray_queries))
                 if ray and cfg.engine.executor == "ray" else None)
    await asyncio.gather(*(one(n.name) for n in cfg.nodes))
    ray_state: RayState | None = None
    head = cfg.head.name
    ray_up = bool(processes.get(head)) or bool(containers.get(head))
    if early_ray is not None and not (ray_up and head not in unreachable):
        early_ray.cancel()
    elif early_ray is not None:
        ray_state = await early_ray
    return discovery_of(vllm, containers, processes, unreachable, ray_state, head=head,
                        expected=P.expected_nodes(cfg))


async def _ray_if_gcs(nodes: EngineNodes, ray_queries: RayQueries) -> RayState | None:
    """Ray's node list when the head's GCS port answers now (one connect attempt), else ``None``."""
    head = nodes.config.head
    try:
        argv = gcs_wait_argv(head.python, head.address, nodes.config.engine.ray_port, 0)
        res = await nodes.run(head.name, argv, 10)
    except TransportError:
        return None
    return await ray_queries.state_once(20.0) if res.ok else None
