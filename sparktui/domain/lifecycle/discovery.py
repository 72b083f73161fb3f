"""What runs of ours on the nodes, judged into an engine state (pure; ``EngineController.discover``
gathers the facts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sparktui.domain.events import EngineState
from sparktui.domain.lifecycle.preflight import DockerContainer
from sparktui.domain.lifecycle.ray_state import ExpectedNode, RayState, Readiness, evaluate


@dataclass(frozen=True)
class DetachedState:
    """DETACHED_STATE_SH output for one node."""

    status: str                     # "running" | "exited" | "none"
    pid: int | None = None
    log_size: int | None = None
    log_path: str = ""

    @classmethod
    def parse(cls, text: str) -> DetachedState:
        status, pid, size, path = "none", None, None, ""
        for line in text.splitlines():
            words = line.split(" ", 2)
            if words[0] in ("running", "exited") and len(words) > 1 and words[1].isdigit():
                status, pid = words[0], int(words[1])
            elif words[0] == "log" and len(words) > 1:
                size = int(words[1]) if words[1].isdigit() else None
                path = words[2] if len(words) > 2 else ""
        return cls(status, pid, size, path)


@dataclass(frozen=True)
class Discovery:
    state: EngineState
    detail: str
    vllm: Mapping[str, DetachedState] = field(default_factory=dict)
    containers: Mapping[str, Sequence[DockerContainer]] = field(default_factory=dict)
    processes: Mapping[str, Sequence[Mapping[str, object]]] = field(default_factory=dict)
    unreachable: Mapping[str, str] = field(default_factory=dict)
    ray: RayState | None = None
    ray_readiness: Readiness | None = None

    @property
    def running(self) -> bool:
        return any(v.status == "running" for v in self.vllm.values())

    @property
    def leftovers(self) -> bool:
        return any(self.containers.values()) or any(self.processes.values())

    def to_json(self) -> dict[str, object]:
        return {
            "state": self.state.value,
            "detail": self.detail,
            "vllm": {n: {"status": v.status, "pid": v.pid, "log_path": v.log_path, "log_size": v.log_size}
                     for n, v in self.vllm.items()},
            "containers": {n: [c.name + " " + c.state for c in cs] for n, cs in self.containers.items()},
            "processes": {n: [f"{p.get('pid')} {p.get('cmdline')}" for p in ps]
                          for n, ps in self.processes.items()},
            "unreachable": dict(self.unreachable),
            "ray": self.ray.to_json() if self.ray else None,
            "ray_ready": self.ray_readiness.ready if self.ray_readiness else None,
            "ray_diagnosis": self.ray_readiness.diagnosis if self.ray_readiness else None,
        }


def classify(
    vllm: Mapping[str, DetachedState],
    containers: Mapping[str, Sequence[DockerContainer]],
    processes: Mapping[str, Sequence[Mapping[str, object]]],
    unreachable: Mapping[str, str],
    readiness: Readiness | None,
) -> tuple[EngineState, str]:
    """The engine state before the log is read: the log's timeline refines STARTING into a stage/READY."""
    running = {n: v for n, v in vllm.items() if v.status == "running"}
    exited = {n: v for n, v in vllm.items() if v.status == "exited"}
    if running:
        pids = ", ".join(f"{n} pid {v.pid}" for n, v in running.items())
        detail = f"vLLM running ({pids})"
        if readiness is not None and not readiness.ready:
            detail += f"; Ray: {readiness.diagnosis}"
        return EngineState.STARTING, detail
    if exited:
        pids = ", ".join(f"{n} pid {v.pid}" for n, v in exited.items())
        return EngineState.FAILED, f"vLLM exited ({pids}) without being stopped: see the log"
    if unreachable and not any(processes.values()) and not any(containers.values()):
        # A transport's message already starts with the node's name ("spark2 (10.0.0.2:22): …").
        said = [e if e.startswith(f"{n} ") else f"{n} ({e})" for n, e in unreachable.items()]
        return EngineState.UNKNOWN, "cannot tell what runs on " + "; ".join(said)
    left = [f"{n}: {len(ps)} process(es)" for n, ps in processes.items() if ps]
    left += [f"{n}: container {c.name}" for n, cs in containers.items() for c in cs]
    if left:
        return EngineState.STOPPED, "vLLM not running; leftovers of ours: " + "; ".join(left)
    return EngineState.STOPPED, "nothing of ours runs"


def discovery_of(
    vllm: Mapping[str, DetachedState],
    containers: Mapping[str, Sequence[DockerContainer]],
    processes: Mapping[str, Sequence[Mapping[str, object]]],
    unreachable: Mapping[str, str],
    ray: RayState | None,
    *,
    head: str,
    expected: Sequence[ExpectedNode],
) -> Discovery:
    """The gathered facts judged: Ray's reading counts only when our Ray runs on a reachable head (its
    processes or its container were found there), whoever else answers at that address."""
    ray_up = bool(processes.get(head)) or bool(containers.get(head))
    if not ray_up or head in unreachable:
        ray = None
    readiness = evaluate(ray, expected) if ray is not None else None
    state, detail = classify(vllm, containers, processes, unreachable, readiness)
    return Discovery(state, detail, vllm, containers, processes, unreachable, ray, readiness)
