"""Waiting for a started engine to be ready (or to fail), for ``--wait`` and the tests.

The witnesses — the head's vLLM log read through the ``LogFollower`` into the ``Timeline`` (ready =
uvicorn's "Application startup complete."), the vLLM process on the head, Ray's node list (for the Ray
executor) and every node's SSH link — are fed to the engine session
(``sparktui.domain.engine_session.EngineSession``), whose state machine decides, as it does for the
dashboard: ready when the log says so (the dashboard then verifies with a completion), failed with the
log's diagnosis and the node any evidence points at, or a node Ray lost named. The run goes into the run
history through the session's ``record`` port, as the dashboard records it, timed from the head's start
stamp of the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.deadline import within
from sparktui.domain.engine_session import EnginePorts, EngineSession
from sparktui.domain.engine_state import Record
from sparktui.domain.events import EngineState
from sparktui.domain.history import HistoryStore, RunRecord
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.desired import Desired
from sparktui.domain.lifecycle.discovery import DetachedState
from sparktui.domain.lifecycle.ray_state import RayState
from sparktui.domain.logs import LogIngest
from sparktui.domain.perf.disk_read import DiskReadStore
from sparktui.domain.perf.start_context import start_context
from sparktui.domain.perf.start_explain import StartContext, explain_snapshot
from sparktui.domain.run_record import history_entry
from sparktui.remote.engine import EngineController
from sparktui.remote.log_follower import LogFollower
from sparktui.remote.run_logs import feed_start
from sparktui.remote.transport import LinkState, TransportError

log = logging.getLogger(__name__)

#: Seconds between checks of the vLLM process and of Ray's node list while waiting.
PROCESS_CHECK_INTERVAL = 1.0
RAY_CHECK_INTERVAL = 1.0
#: How long a failure from the log waits for evidence naming the node (Ray marks a killed node dead after
#: its health checks fail: ~15 s with Ray 2.60's defaults).
EVIDENCE_GRACE = 20.0


def _earlier(controller: EngineController) -> list[RunRecord]:
    try:
        return list(controller.history())
    except (OSError, ValueError):
        return []


def _context(controller: EngineController, earlier: list[RunRecord]) -> StartContext:
    """The explanation's context: the image's help from preflight, each disk's last measured rate."""
    try:
        reads = DiskReadStore().latest()
    except OSError:
        reads = {}
    config = controller.config
    return start_context(config, help_text=controller.help_text, disk_reads=reads, earlier=earlier,
                         image=config.engine.image)


@dataclass
class WaitResult:
    outcome: str                    # "ready" | "failed" | "timeout" | "stopped" (a person's stop)
    detail: str
    stage: str | None = None
    seconds: float = 0.0
    timeline: dict[str, Any] = field(default_factory=dict)
    #: Why the start took as long as it did (``domain.perf.start_explain``: ready only), and its one line
    #: ("" when nothing was slow).
    explanation: dict[str, Any] = field(default_factory=dict)
    slow: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "detail": self.detail, "stage": self.stage,
                "seconds": round(self.seconds, 2), "timeline": self.timeline,
                "explanation": self.explanation or None}


async def wait_until_ready(
    controller: EngineController,
    *,
    timeout: float = 3600.0,
    on_stage: Callable[[str], None] | None = None,
    on_bytes: Callable[[bytes], None] | None = None,
    history: HistoryStore | None = None,
) -> WaitResult:
    config = controller.config
    head = config.head
    transport = controller.transports[head.name]
    earlier = _earlier(controller)   # before this start is recorded: the starts it is compared with
    t0 = time.monotonic()
    began = time.time()
    # Display capacity 0: the wait shows stages, not lines (those go to ``on_bytes``).
    ingest = LogIngest(len(config.nodes), display_cap=0)
    changed = asyncio.Event()
    shown: str | None = None
    store = history if history is not None else HistoryStore()

    def record(effect: Record) -> None:
        try:
            store.append(history_entry(effect, ingest.timeline.snapshot(), config))
        except OSError as exc:
            log.warning("run history not written: %s", exc)

    # It reads the state and records the run; it restarts nothing.
    session = EngineSession.for_config(config, ports=EnginePorts(record=record))
    # The engine was launched (the start operation ended well): it runs until evidence says otherwise.
    session.discovered(EngineState.STARTING, "vllm serve launched")
    with contextlib.suppress(TransportError):
        await feed_start(session, config, transport, controller.homes or None)

    def feed(data: bytes) -> None:
        nonlocal shown
        if on_bytes is not None:
            on_bytes(data)
        ingest.feed(data, time.time())
        snap = ingest.timeline.snapshot()
        label = snap.current if snap.outcome == "incomplete" else snap.outcome
        if label != shown:
            shown = label
            if on_stage is not None and label:
                on_stage(label)
        session.timeline(snap)
        changed.set()

    def on_link(node: str, state: LinkState) -> None:
        session.link(node, state.phase.value)
        changed.set()

    for link in controller.transports.values():
        link.add_listener(on_link)
        session.link(link.name, link.state.phase.value)

    def on_ray(state: RayState) -> None:
        session.ray(state)
        changed.set()

    follower = LogFollower(transport, controller.log_path(), feed, python=(head.python,),
                           on_reset=ingest.reset)
    follow_task = asyncio.create_task(follower.run())
    rt = P.runtimes(config)[head.name]
    state_argv = P.detached_state_argv(config, rt, controller.homes or None)
    ray_task = (asyncio.create_task(controller.watch_ray(on_ray, interval=RAY_CHECK_INTERVAL))
                if config.engine.executor == "ray" else None)
    evidence_until: float | None = None
    asked_who_stopped = False
    try:
        while True:
            elapsed = time.monotonic() - t0
            session.tick()
            snap = ingest.timeline.snapshot()
            if session.state is EngineState.VERIFYING:
                session.verified()   # the log's ready, taken as is (no completion here): the run is recorded
                why = explain_snapshot(snap, _context(controller, earlier))
                return WaitResult("ready", "Application startup complete.", "api", elapsed, snap.to_json(),
                                  why.to_json(), why.short())
            if session.state in (EngineState.FAILED, EngineState.STOPPED) and not asked_who_stopped:
                # vLLM gone before ready may be a person's `stop` (it holds no lock against a wait):
                # that is reported as a stop, not as a failure.
                asked_who_stopped = True
                if (stopped := await _stopped_by_person(controller, began)) is not None:
                    return WaitResult("stopped", stopped, snap.current, elapsed, snap.to_json())
            if session.state is EngineState.STOPPED:
                return WaitResult("stopped", session.detail, snap.current, elapsed, snap.to_json())
            if session.state is EngineState.FAILED:
                waiting = False
                if session.wants_node_evidence:
                    # The log said first (a worker died, NCCL broke); Ray, the links or the container
                    # say where a little later: wait for that a bounded while, then say what is known.
                    if evidence_until is None:
                        evidence_until = elapsed + EVIDENCE_GRACE
                    waiting = elapsed < evidence_until
                if not waiting:
                    detail = session.detail
                    f = snap.failure
                    if f is not None and f.hint and f.hint not in detail:
                        detail += f"; {f.hint}"
                    return WaitResult("failed", detail, snap.current, elapsed, snap.to_json())
            elif elapsed > timeout:
                return WaitResult("timeout", f"not ready after {timeout:.0f} s", snap.current, elapsed,
                                  snap.to_json())
            changed.clear()
            with contextlib.suppress(TimeoutError):
                await within(changed.wait(), PROCESS_CHECK_INTERVAL)
                continue
            try:
                res = await transport.run(state_argv, timeout=20)
            except TransportError:
                continue  # the head is unreachable for now: the follower resumes when it is back
            session.process(DetachedState.parse(res.stdout).status == "running")
    finally:
        for link in controller.transports.values():
            link.remove_listener(on_link)
        for task in (follow_task, ray_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def _stopped_by_person(controller: EngineController, since: float) -> str | None:
    """\"stopped by `sparktui stop` on HOST" when a person's stop (its mark: the desired state kept on the
    head, set to stopped after this wait began) ended the engine — a stop, not a failure."""
    desired = await controller.desired()
    if desired is None or desired.state is not Desired.STOPPED or desired.at < since - 1.0:
        return None
    return f"stopped by {desired.by}" + (f" on {desired.host}" if desired.host else "")
