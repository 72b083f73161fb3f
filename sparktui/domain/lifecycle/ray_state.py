"""Ray's cluster state as sparktui reads it, and the judgement "every node and every GPU is there".

Primary source: the ``RAYPROBE`` line of the node-side ``ray.nodes()`` probe (same keys in Ray 2.9 … 2.60,
and the only source with node IPs). Fallback: a tolerant reader of ``ray status`` text (v1 and v2
layouts, every header variant); it knows counts, not IPs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sparktui.domain.logs import strip_ansi

PROBE_PREFIX = "RAYPROBE "
PROBE_ERROR_PREFIX = "RAYPROBE_ERROR "


@dataclass(frozen=True)
class RayNode:
    ip: str
    alive: bool
    gpu: float
    node_id: str = ""
    hostname: str = ""
    is_head: bool = False


@dataclass(frozen=True)
class RayState:
    nodes: tuple[RayNode, ...]
    gpu_total: float
    ray_version: str = ""
    #: True when read from ``ray status`` text: counts only, no IPs.
    counts_only: bool = False
    counted_nodes: int = 0

    @property
    def alive(self) -> tuple[RayNode, ...]:
        return tuple(n for n in self.nodes if n.alive)

    def to_json(self) -> dict[str, object]:
        return {
            "ray_version": self.ray_version,
            "gpu_total": self.gpu_total,
            "nodes": [{"ip": n.ip, "alive": n.alive, "gpu": n.gpu, "is_head": n.is_head,
                       "hostname": n.hostname, "node_id": n.node_id} for n in self.nodes],
        }


class ProbeError(Exception):
    """The probe could not read Ray (no ``ray`` module, cluster not joinable)."""


def parse_probe_line(line: str) -> RayState | None:
    """One probe output line → state; ``None`` for lines that are not probe output.

    Raises ``ProbeError`` for a ``RAYPROBE_ERROR`` line.
    """
    line = line.strip()
    if line.startswith(PROBE_ERROR_PREFIX):
        try:
            err = json.loads(line[len(PROBE_ERROR_PREFIX):]).get("error", "")
        except (ValueError, AttributeError):
            err = line
        raise ProbeError(str(err))
    if not line.startswith(PROBE_PREFIX):
        return None
    try:
        data = json.loads(line[len(PROBE_PREFIX):])
    except ValueError:
        return None
    nodes = tuple(
        RayNode(
            ip=str(n.get("ip") or ""),
            alive=bool(n.get("alive")),
            gpu=float(n.get("gpu") or 0.0),
            node_id=str(n.get("node_id") or ""),
            hostname=str(n.get("hostname") or ""),
            is_head=bool(n.get("is_head")),
        )
        for n in data.get("nodes") or ()
    )
    return RayState(nodes=nodes, gpu_total=float(data.get("gpu_total") or 0.0),
                    ray_version=str(data.get("ray_version") or ""))


def last_probe_state(text: str) -> RayState | None:
    """The last state in a block of probe output (``ProbeError`` if it only holds an error)."""
    state: RayState | None = None
    error: ProbeError | None = None
    for line in text.splitlines():
        try:
            parsed = parse_probe_line(line)
        except ProbeError as exc:
            error = exc
            continue
        if parsed is not None:
            state = parsed
    if state is None and error is not None:
        raise error
    return state


# ---- readiness -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExpectedNode:
    name: str
    ip: str
    gpus: float


@dataclass(frozen=True)
class Readiness:
    ready: bool
    #: One line a person can act on, naming the node or GPU that is missing.
    diagnosis: str
    missing_nodes: tuple[str, ...] = ()
    short_gpus: tuple[str, ...] = ()
    problems: tuple[str, ...] = field(default=())


def evaluate(state: RayState | None, expected: Sequence[ExpectedNode]) -> Readiness:
    """Ready when every expected node is alive at its IP, once, with its GPUs, and the cluster's GPU
    total is what vLLM will ask for (``cluster_resources()["GPU"]`` is what vLLM checks)."""
    want_gpus = sum(e.gpus for e in expected)
    if state is None:
        return Readiness(False, "Ray has not answered yet (no cluster state)",
                         missing_nodes=tuple(e.name for e in expected))
    if state.counts_only:
        return _evaluate_counts(state, expected, want_gpus)
    alive = state.alive
    by_ip: dict[str, list[RayNode]] = {}
    for n in alive:
        by_ip.setdefault(n.ip, []).append(n)
    dead_ips = {n.ip for n in state.nodes if not n.alive}
    problems: list[str] = []
    missing: list[str] = []
    short: list[str] = []
    for e in expected:
        nodes = by_ip.get(e.ip, [])
        if not nodes:
            missing.append(e.name)
            why = "Ray reports it dead" if e.ip in dead_ips else "not registered with Ray"
            problems.append(f"node {e.name} ({e.ip}) is missing: {why}")
        elif len(nodes) > 1:
            problems.append(f"node {e.name} ({e.ip}) is registered {len(nodes)} times "
                            "(a second `ray start` on it): stop and start again")
        else:
            gpu = nodes[0].gpu
            if gpu < e.gpus:
                short.append(e.name)
                problems.append(
                    f"node {e.name} ({e.ip}) has {_n(gpu)} of {_n(e.gpus)} GPU(s) in Ray: its GPU is not "
                    "visible to Ray there — run its container with `--gpus all` (NVIDIA container runtime), "
                    f"or give Ray `--num-gpus {_n(e.gpus)}` (engine.ray_start_args)")
    expected_ips = {e.ip for e in expected}
    strangers = sorted(ip for ip in by_ip if ip not in expected_ips)
    if strangers:
        problems.append("Ray has nodes at unexpected addresses: " + ", ".join(strangers)
                        + " (Ray and the config disagree on node IPs: check `ip` in config.toml)")
    if not problems and state.gpu_total < want_gpus:
        problems.append(f"Ray counts {_n(state.gpu_total)} GPU(s), {_n(want_gpus)} needed")
    if problems:
        return Readiness(False, "; ".join(problems), tuple(missing), tuple(short), tuple(problems))
    return Readiness(True, f"Ray reports {len(expected)} node(s) and {_n(state.gpu_total)} GPU(s)")


def _evaluate_counts(state: RayState, expected: Sequence[ExpectedNode], want_gpus: float) -> Readiness:
    problems = []
    if state.counted_nodes < len(expected):
        problems.append(f"Ray reports {state.counted_nodes} of {len(expected)} nodes")
    if state.gpu_total < want_gpus:
        problems.append(f"Ray counts {_n(state.gpu_total)} of {_n(want_gpus)} GPU(s)")
    if problems:
        return Readiness(False, "; ".join(problems), problems=tuple(problems))
    return Readiness(True, f"Ray reports {state.counted_nodes} node(s) and {_n(state.gpu_total)} GPU(s)")


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# ---- `ray status` text (fallback) -----------------------------------------------------------------
_NODE_LINE = re.compile(r"^\s+(\d+)\s+(\S.*?)\s*$")
_GPU_LINE = re.compile(r"^\s+([0-9.]+)/([0-9.]+)\s+GPU(?:\s|$)")
_SECTIONS = {"Active:": "active", "Idle:": "idle", "Pending:": "pending", "Recent failures:": "failures"}
_USAGE = {"Usage:", "Total Usage:"}


def parse_ray_status(text: str) -> RayState | None:
    """Node count and GPU total from ``ray status`` (Ray 2.9 … 2.60, autoscaler v1 and v2).

    ``None`` while Ray says "No cluster status" or the text is not a status report.
    """
    text = strip_ansi(text).replace("\r", "\n")
    if "Node status" not in text:
        return None
    section: str | None = None
    nodes = 0
    gpu_total: float | None = None
    for raw in text.splitlines():
        s = raw.strip()
        if s in _SECTIONS:
            section = _SECTIONS[s]
            continue
        if s in _USAGE:
            section = "usage"
            continue
        if s.endswith(":") and not raw.startswith(" "):
            section = None
            continue
        if s.startswith("Node:"):  # `ray status -v` per-node blocks: cluster totals were read already
            section = None
            continue
        if not s or s.startswith("(") or set(s) <= {"-"} or s.startswith("===="):
            continue
        if section in ("active", "idle"):
            m = _NODE_LINE.match(raw)
            if m:
                nodes += int(m.group(1))
        elif section == "usage" and gpu_total is None:
            m = _GPU_LINE.match(raw)
            if m:
                gpu_total = float(m.group(2))
    return RayState(nodes=(), gpu_total=gpu_total or 0.0, counts_only=True, counted_nodes=nodes)
