"""``sparktui status``'s one round trip per node: ``sparktui/node/status.py`` asked once, over the node's
connection, for everything the report needs of that node — host facts, one probe reading, our processes
and containers, the detached vLLM's state and, on the head, Ray's node list, the head's reach of the others
and the vLLM log — each part at once on the node.

The commands it runs on the node are the ones the multi-command path runs (``plan.detached_state_argv``,
``argv.docker_ps``, ``plan.probe_argv``, ``probe_runner.probe_argv``), and their output is read by the same
parsers; only the Ray reading is cheaper: the GCS's own gRPC call from the node's python (``gcs_grpc``,
no ``import ray``), the Ray probe reading the GCS without joining as a driver where that fails.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from sparktui.config import NodeConfig, SparkConfig
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle import presence_file
from sparktui.domain.lifecycle.discovery import DetachedState
from sparktui.domain.lifecycle.preflight import DockerContainer, parse_docker_ps
from sparktui.domain.lifecycle.ray_state import ProbeError, RayState, last_probe_state
from sparktui.domain.upgrade import images
from sparktui.domain.upgrade import progress as upgrade_progress
from sparktui.node import source
from sparktui.remote.engine_status import MAX_LOG_BYTES
from sparktui.remote.host_facts import HostFacts
from sparktui.remote.peer_watch import peers_of
from sparktui.remote.probe_runner import ONCE_GAP, engine_probe_args, probe_argv, probe_source, reading_of
from sparktui.remote.transport import Transport, TransportError

#: ``sparktui/node/status.py`` (its request and output are said there).
STATUS_PY = source("status")

#: Seconds each part may take on the node (the Ray reading's bound inside the runtime too).
PART_TIMEOUT = 15.0


@dataclass(frozen=True)
class NodeRound:
    """One node's answer, parsed as the multi-command path parses each command's."""

    facts: HostFacts
    #: One probe reading (``probe_runner.sample_once``'s shape, ``"error"`` when no sample came).
    sample: dict[str, Any]
    processes: list[dict[str, object]]
    home: str | None
    #: ``None`` where not asked: containers (runtime "host"), vLLM's state (not a vLLM node).
    containers: tuple[DockerContainer, ...] | None = None
    detached: DetachedState | None = None
    #: The head only: Ray's node list (``None``: the GCS did not answer, or Ray could not be read),
    #: the head's reach of the others, the vLLM log (``None``: none, or empty).
    ray: RayState | None = None
    reach: dict[str, bool] | None = None
    log: bytes | None = None
    seconds: float = 0.0
    #: Each command's seconds on the node ("probe", "detached", …, "ray"): where the time went.
    parts: dict[str, float] = field(default_factory=dict)
    #: Why Ray's node list was not read over gRPC (then the Ray probe read it); "" when it was.
    ray_note: str = ""
    #: Parts that failed on the node, by name (their stderr): shown nowhere unless asked.
    problems: dict[str, str] = field(default_factory=dict)
    #: The head only: the supervisor's record as read (``{}``: never written; ``None``: not read).
    supervisor: str | None = None
    #: The head only (docker): the image ``sparktui upgrade`` promoted, as read (as ``supervisor``).
    image: str | None = None
    #: The head only (docker): the last upgrade's record, in progress or ended, as read (as ``supervisor``).
    upgrade: str | None = None


def round_request(config: SparkConfig, node: NodeConfig) -> dict[str, Any]:
    """What ``status.py`` is asked on ``node`` (a JSON argument: config values are never script text)."""
    e = config.engine
    rt = P.runtimes(config)[node.name]
    commands: dict[str, list[str]] = {
        "probe": probe_argv(node, ONCE_GAP, count=2, name_prefix=e.name_prefix, follow_stdin=False,
                            extra_args=engine_probe_args(e)),
    }
    if e.runtime == "docker":
        commands["docker_ps"] = A.docker_ps(e.name_prefix)
    if node.name in {n.name for n in P.vllm_nodes(config)}:
        # No homes: a ``~`` word is expanded on the node by status.py (as resolved homes would have).
        commands["detached"] = P.detached_state_argv(config, rt, None)
    req: dict[str, Any] = {"proc_root": node.proc_root, "tag": rt.tag, "commands": commands,
                           "timeout": PART_TIMEOUT,
                           # `docker exec` runs in the container's environment, tag included.
                           "list_first": e.runtime == "docker"}
    if node is config.head:
        if e.executor == "ray":
            req["ray"] = {"gcs": [node.address, e.ray_port],
                          "argv": P.probe_argv(config, rt, 0.0, count=1, until_stdin_closes=False,
                                               timeout=PART_TIMEOUT, gcs=True)}
        req["peers"] = [list(p) for p in peers_of(config)]
        # The supervisor's presence beside the desired state: one more part of the same round trip.
        commands["supervisor"] = presence_file.read_argv(config, None)
        if e.runtime == "docker":   # and the image an upgrade promoted, and the last upgrade, beside them
            commands["image"] = images.read_argv(config, None)
            commands["upgrade"] = upgrade_progress.read_argv(config, None)
        req["log"] = [P.vllm_log_path(config, None, node.name), MAX_LOG_BYTES]
    return req


def _ray(answer: dict[str, Any] | None) -> RayState | None:
    if not answer:
        return None
    try:
        return last_probe_state(str(answer.get("stdout", "")))
    except ProbeError:
        return None


def parse_round(config: SparkConfig, node: NodeConfig, text: str) -> NodeRound:
    """``status.py``'s one JSON document → ``NodeRound``; ``ValueError`` when it is not one."""
    doc = json.loads(text.strip().splitlines()[-1] if text.strip() else "")
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    commands: dict[str, dict[str, Any]] = doc.get("commands") or {}
    host = doc.get("host") or {}
    uptime = host.get("uptime_seconds")
    facts = HostFacts(hostname=host.get("hostname"), kernel=host.get("kernel"),
                      uptime_seconds=float(uptime) if isinstance(uptime, int | float) else None,
                      complete=bool(host))
    probe = commands.get("probe") or {"rc": -1, "stdout": "", "stderr": "the probe did not finish"}
    sample = reading_of(node, str(probe.get("stdout", "")), int(probe.get("rc", -1)),
                        str(probe.get("stderr", "")))
    problems = {name: str(c.get("stderr", "")).strip()[-500:] for name, c in commands.items()
                if c.get("rc") not in (0, None)}
    ps = commands.get("docker_ps")
    supervisor = commands.get("supervisor")
    image = commands.get("image")
    upgrade = commands.get("upgrade")
    prefix = config.engine.name_prefix
    detached = commands.get("detached")
    log = doc.get("log")
    data = str(log.get("data", "")).encode("utf-8", "surrogateescape") if isinstance(log, dict) else None
    reach = doc.get("reach")
    parts = {name: float(c.get("seconds") or 0.0) for name, c in commands.items()}
    if isinstance(doc.get("ray"), dict):
        parts["ray"] = float(doc["ray"].get("seconds") or 0.0)
    return NodeRound(
        facts=facts, sample=sample, processes=list(doc.get("processes") or []), home=doc.get("home"),
        containers=(None if ps is None else parse_docker_ps(str(ps.get("stdout", "")), prefix)),
        detached=None if detached is None else DetachedState.parse(str(detached.get("stdout", ""))),
        ray=_ray(doc.get("ray")),
        ray_note=str((doc.get("ray") or {}).get("stderr", "")).strip(),
        reach={str(k): bool(v) for k, v in reach.items()} if isinstance(reach, dict) else None,
        log=data or None, seconds=float(doc.get("seconds") or 0.0), parts=parts, problems=problems,
        supervisor=(str(supervisor.get("stdout", "")) if supervisor is not None and supervisor.get("rc") == 0
                    else None),
        image=str(image.get("stdout", "")) if image is not None and image.get("rc") == 0 else None,
        upgrade=str(upgrade.get("stdout", "")) if upgrade is not None and upgrade.get("rc") == 0 else None,
    )


async def status_round(config: SparkConfig, node: NodeConfig, transport: Transport) -> NodeRound:
    """The one command ``sparktui status`` runs on ``node``: its answer, parsed.

    Raises ``TransportError`` when the node cannot be reached or the answer is unreadable."""
    argv = [node.python, "-c", STATUS_PY, json.dumps(round_request(config, node))]
    # Each part is bounded on the node; the whole wait only backs that up.
    res = await transport.run(argv, input=probe_source(), timeout=math.ceil(PART_TIMEOUT) + 10)
    try:
        return parse_round(config, node, res.stdout)
    except (ValueError, TypeError, AttributeError) as exc:
        why = res.stderr.strip()[-300:] or f"exit status {res.returncode}"
        raise TransportError(f"{node.name}: status script gave no answer ({why})") from exc
