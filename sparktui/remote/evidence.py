"""Taking an incident's evidence from every node at once, before anything is done about the failure.

One entry point, :func:`collect_incident`: the supervisor calls it before it restarts anything
(:class:`IncidentKeeper` is the supervisor's ``on_incident``), ``sparktui incidents collect`` calls it
by hand. Each node answers within ``[incidents] node_timeout``; a node that does not (or whose command
fails) loses nothing of the others' evidence and is itself recorded (``missing``). The node-side readers
are constant scripts with positional arguments (``sparktui/node/evidence.py``, ``kernel_log.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain import evidence_files as F
from sparktui.domain.deadline import within
from sparktui.domain.incidents import Incident, IncidentStore
from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.postmortem import NEEDLES
from sparktui.domain.supervise import Cause
from sparktui.node import source
from sparktui.remote.engine_nodes import EngineNodes, failure_text
from sparktui.remote.ray_queries import RayQueries
from sparktui.remote.transport import Transport, TransportError

log = logging.getLogger(__name__)

#: Seconds Ray's node list may take (it is one reading from the head).
RAY_SECONDS = 20.0


@dataclass
class _NodeEvidence:
    node: str
    answer: dict[str, Any] | None = None
    kernel: dict[str, Any] | None = None
    dmesg: list[str] | None = None
    since: float | None = None
    missing: list[str] = field(default_factory=list)


def store_for(config: SparkConfig) -> IncidentStore:
    """The user's incident store with the config's retention bounds."""
    return IncidentStore(keep=config.incidents.keep, max_size=int(config.incidents.max_size))


async def collect_incident(
    config: SparkConfig, transports: Mapping[str, Transport], *, cause: str, node: str | None = None,
    detail: str = "", action: str = "", timeline_text: str | None = None, config_text: str | None = None,
    store: IncidentStore | None = None, now: Callable[[], float] = time.time,
    extra: Mapping[str, str] | None = None,
) -> Incident:
    """Take the evidence from every node at once, keep it as a new incident in ``store`` (the user's, with
    the config's retention, by default) and return the incident. Never raises for a node's failure.
    ``extra``: evidence the caller holds already (the supervisor's recent telemetry), by file name."""
    store = store or store_for(config)
    at = now()
    nodes = EngineNodes(config, transports)
    budget = config.incidents.node_timeout
    # Unresolved homes are no loss: paths keep their ``~``, which the node scripts expand.
    with contextlib.suppress(TimeoutError):
        await within(nodes.resolve_homes(quiet=True), budget)
    per_node, ray_text = await asyncio.gather(
        asyncio.gather(*(_node_evidence(config, nodes, n.name) for n in config.nodes)), _ray_nodes(nodes))
    evidence = {**_files(config, per_node, ray_text, timeline_text, config_text), **(extra or {})}
    missing = [m for ev in per_node for m in ev.missing]
    if missing:
        evidence["missing.txt"] = "".join(f"{m}\n" for m in missing)
    incident = Incident(id=store.new_id(at), at=at, cause=cause, node=node, detail=detail, action=action,
                        missing=tuple(missing), cluster=config.cluster.name)
    return store.save(incident, {name: text.encode("utf-8", "replace") for name, text in evidence.items()})


class IncidentKeeper:
    """The supervisor's ``on_incident``: ``await keeper(cause, node, detail)`` keeps an incident with its
    evidence before the supervisor acts; ``acted(action)`` records what it then did and ``serving_again()``
    how long after the incident the engine served again (called at the next verified ready).
    ``transports`` and ``timeline_text`` are read at the moment of the failure (the backend's links, the
    dashboard's timeline rendered as text)."""

    def __init__(self, config: SparkConfig, transports: Callable[[], Mapping[str, Transport]], *,
                 timeline_text: Callable[[], str | None] = lambda: None, store: IncidentStore | None = None,
                 clock: Callable[[], float] = time.time,
                 extra: Callable[[], Mapping[str, str]] = dict) -> None:
        self.config = config
        self.transports = transports
        self.timeline_text = timeline_text
        self.extra = extra
        self.store = store or store_for(config)
        self.clock = clock
        #: The incident whose "serving again" is still to come.
        self.open: Incident | None = None

    async def __call__(self, cause: Cause | str, node: str | None, detail: str, *,
                       evidence: Mapping[str, str] | None = None, action: str = "") -> Incident:
        """``evidence``: files the caller holds already; ``action``: known at once (a reboot is recorded),
        then the incident is complete and not the one whose outcome comes next."""
        name = cause.value if isinstance(cause, Cause) else str(cause)
        incident = await collect_incident(self.config, self.transports(), cause=name, node=node,
                                          detail=detail, action=action, timeline_text=self.timeline_text(),
                                          store=self.store, now=self.clock,
                                          extra={**self.extra(), **(evidence or {})})
        log.info("incident %s kept (%d files)", incident.id, len(incident.files))
        if not action:
            self.open = incident
        return incident

    def acted(self, action: str) -> None:
        if self.open is not None:
            with contextlib.suppress(LookupError, ValueError, OSError):   # pruned meanwhile: nothing to fill
                self.open = self.store.update(self.open.id, action=action)

    def serving_again(self) -> None:
        if self.open is not None:
            with contextlib.suppress(LookupError, ValueError, OSError):
                self.store.update(self.open.id, serving_again_s=max(0.0, self.clock() - self.open.at))
            self.open = None


async def _node_evidence(config: SparkConfig, nodes: EngineNodes, name: str) -> _NodeEvidence:
    out = _NodeEvidence(name)
    budget = config.incidents.node_timeout
    try:
        await within(_ask(config, nodes, name, out, budget), budget)
    except TimeoutError:
        out.missing.append(f"{name}: no complete answer within {budget:.0f} s")
    except TransportError as exc:
        out.missing.append(f"{name}: not reached: {exc}")
    return out


async def _ask(config: SparkConfig, nodes: EngineNodes, name: str, out: _NodeEvidence, budget: float) -> None:
    node = config.node(name)
    runtime = nodes.runtimes[name]
    vllm_nodes = {n.name for n in P.vllm_nodes(config)}
    vllm_log = P.vllm_log_path(config, nodes.homes, name) if name in vllm_nodes else ""
    argv = [node.python, "-c", source("evidence"), name, runtime.tag, vllm_log,
            str(config.incidents.log_lines), P.ray_log_root(config, nodes.homes, name),
            runtime.container if runtime.docker else ""]
    res = await nodes.run(name, argv, budget)
    report = last_json_object(res.stdout) if res.ok else None
    if report is None:
        out.missing.append(f"{name}: evidence reader failed: {failure_text(res)}")
    else:
        out.answer = report
    # The kernel's lines since the engine's oldest process started (the last hour when none runs).
    out.since = F.engine_started_at([report] if report else []) or time.time() - 3600
    kernel = await nodes.run(name, [node.python, "-c", source("kernel_log"), f"{out.since:.0f}", *NEEDLES],
                             budget)
    try:
        out.kernel = json.loads(kernel.stdout) if kernel.ok else None
    except ValueError:
        out.kernel = None
    current = (out.kernel or {}).get("current") or {}
    if out.kernel is None or current.get("error"):
        dmesg = await nodes.run(name, ["dmesg"], budget)
        out.dmesg = F.dmesg_matching(dmesg.stdout, NEEDLES) if dmesg.ok else None
        if not dmesg.ok:
            out.missing.append(f"{name}: kernel messages: journal and dmesg both unreadable "
                               f"(dmesg: {failure_text(dmesg)})")


async def _ray_nodes(nodes: EngineNodes) -> str:
    try:
        state = await within(RayQueries(nodes).state_once(timeout=RAY_SECONDS), RAY_SECONDS + 10)
    except (TimeoutError, TransportError) as exc:
        return f"Ray's node list not read: {exc or 'no answer in time'}\n"
    if state is None:
        return "Ray did not answer on the head (not running, or not joinable)\n"
    lines = [f"Ray {state.ray_version or '?'}: {len(state.alive)} of {len(state.nodes)} node(s) alive, "
             f"{state.gpu_total:g} GPU(s)"]
    lines += [f"  {n.ip}  {'alive' if n.alive else 'DEAD'}  gpu {n.gpu:g}  "
              f"{'head' if n.is_head else 'worker'}  {n.hostname}  {n.node_id}" for n in state.nodes]
    return "\n".join(lines) + "\n" + json.dumps(state.to_json(), indent=2) + "\n"


def _files(config: SparkConfig, per_node: Sequence[_NodeEvidence], ray_text: str, timeline_text: str | None,
           config_text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    answers = {ev.node: ev.answer for ev in per_node if ev.answer is not None}
    for ev in per_node:
        part = F.file_part(ev.node)
        if ev.answer is not None:
            vllm = F.vllm_log_text(ev.answer)
            if vllm is not None:
                out[f"vllm-{part}.log"] = vllm
            out[f"ray-{part}.log"] = F.ray_logs_text(ev.answer)
            out[f"stacks-{part}.txt"] = F.stacks_text(ev.answer)
        if ev.kernel is not None or ev.dmesg is not None:
            out[f"kernel-{part}.txt"] = F.kernel_text(ev.node, ev.kernel, ev.dmesg, ev.since)
    out["nccl.txt"] = F.nccl_text(answers)
    out["ray-nodes.txt"] = ray_text
    planned = {n.name: P.serve_argv(config, rank) for rank, n in enumerate(P.vllm_nodes(config))}
    out["argv.txt"] = F.argv_text(answers, planned)
    out["config.toml" if config_text is not None else "config.json"] = (
        config_text if config_text is not None else config.model_dump_json(indent=2) + "\n")
    out["timeline.txt"] = timeline_text or _timeline_from_tail(answers.get(config.head.name))
    return out


def _timeline_from_tail(answer: Mapping[str, Any] | None) -> str:
    """No timeline given (a manual collection): the one the head log's last lines give."""
    from sparktui.domain.logs.timeline import render_human, timeline_from_bytes

    log_part = (answer or {}).get("vllm_log") or {}
    lines = log_part.get("lines") or []
    if not lines:
        return "no timeline: the head's vLLM log was not read\n"
    snap = timeline_from_bytes("\n".join(lines).encode() + b"\n")
    return f"(from the head log's last {len(lines)} lines)\n" + render_human(snap) + "\n"
