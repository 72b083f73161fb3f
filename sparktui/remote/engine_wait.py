"""Waiting for a started engine to be ready (or to fail), for ``--wait`` and the tests.

Three witnesses: the head's vLLM log read through the ``LogFollower`` into the ``Timeline`` (ready =
uvicorn's "Application startup complete."; failed = a diagnosed failure), the vLLM process on the head
(gone without a ready log = crashed), and, for the Ray executor, Ray's node list (a node that leaves the
cluster while vLLM waits for its placement group is named).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.discovery import DetachedState
from sparktui.domain.lifecycle.ray_state import RayState, evaluate
from sparktui.domain.logs import LogReader, Timeline
from sparktui.remote.engine import EngineController
from sparktui.remote.log_follower import LogFollower
from sparktui.remote.transport import TransportError

#: Seconds between checks of the vLLM process and of Ray's node list while waiting.
PROCESS_CHECK_INTERVAL = 1.0
RAY_CHECK_INTERVAL = 1.0
#: A node missing from Ray this long while vLLM starts fails the wait (Ray itself needs a few seconds to
#: declare a node dead, so this only filters single readings).
RAY_LOST_AFTER = 3.0


@dataclass
class WaitResult:
    outcome: str                    # "ready" | "failed" | "timeout"
    detail: str
    stage: str | None = None
    seconds: float = 0.0
    timeline: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "detail": self.detail, "stage": self.stage,
                "seconds": round(self.seconds, 2), "timeline": self.timeline}


async def wait_until_ready(
    controller: EngineController,
    *,
    timeout: float = 3600.0,
    on_stage: Callable[[str], None] | None = None,
    on_bytes: Callable[[bytes], None] | None = None,
) -> WaitResult:
    config = controller.config
    head = config.head
    transport = controller.transports[head.name]
    t0 = time.monotonic()
    reader = LogReader()
    timeline = Timeline(expected_nodes=len(config.nodes))
    changed = asyncio.Event()
    shown: str | None = None

    def reset() -> None:
        nonlocal reader, timeline
        reader = LogReader()
        timeline = Timeline(expected_nodes=len(config.nodes))

    def feed(data: bytes) -> None:
        nonlocal shown
        if on_bytes is not None:
            on_bytes(data)
        now = time.time()
        for record in reader.feed(data):
            timeline.feed(record, now)
        snap = timeline.snapshot()
        label = snap.current if snap.outcome == "incomplete" else snap.outcome
        if label != shown:
            shown = label
            if on_stage is not None and label:
                on_stage(label)
        if snap.outcome != "incomplete":
            changed.set()

    follower = LogFollower(transport, controller.log_path(), feed, python=(head.python,), on_reset=reset)
    follow_task = asyncio.create_task(follower.run())
    rt = P.runtimes(config)[head.name]
    state_argv = P.detached_state_argv(config, rt, controller.homes or None)
    expected = P.expected_nodes(config)
    missing_since: dict[str, float] = {}
    lost: list[str] = []

    def on_ray(state: RayState) -> None:
        readiness = evaluate(state, expected)
        now = time.monotonic()
        for name in list(missing_since):
            if name not in readiness.missing_nodes:
                del missing_since[name]
        for name in readiness.missing_nodes:
            missing_since.setdefault(name, now)
        # Missing for a few seconds in a row: not a blip.
        if not lost and any(now - since >= RAY_LOST_AFTER for since in missing_since.values()):
            lost.append(readiness.diagnosis)
            changed.set()

    ray_task = (asyncio.create_task(controller.watch_ray(on_ray, interval=RAY_CHECK_INTERVAL))
                if config.engine.executor == "ray" else None)
    try:
        while True:
            elapsed = time.monotonic() - t0
            snap = timeline.snapshot()
            if snap.outcome == "ready":
                return WaitResult("ready", "Application startup complete.", "api", elapsed, snap.to_json())
            if snap.outcome == "failed":
                f = snap.failure
                detail = f"{f.kind} during {f.stage}: {f.message}; {f.hint}" if f else "failed"
                return WaitResult("failed", detail, snap.current, elapsed, snap.to_json())
            if elapsed > timeout:
                return WaitResult("timeout", f"not ready after {timeout:.0f} s", snap.current, elapsed,
                                  snap.to_json())
            if lost:
                return WaitResult("failed", f"Ray lost a node while vLLM was starting: {lost[0]}",
                                  snap.current, elapsed, snap.to_json())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), PROCESS_CHECK_INTERVAL)
                continue
            try:
                res = await transport.run(state_argv, timeout=20)
            except TransportError:
                continue  # the head is unreachable for now: the follower resumes when it is back
            state = DetachedState.parse(res.stdout)
            if state.status != "running":
                await asyncio.sleep(0.5)  # let the follower deliver the log's last bytes
                snap = timeline.snapshot()
                if snap.outcome == "ready":
                    continue
                f = snap.failure
                why = f"{f.kind}: {f.message}; {f.hint}" if f else "see the log"
                return WaitResult("failed", f"vLLM exited before it was ready ({why})", snap.current,
                                  time.monotonic() - t0, snap.to_json())
    finally:
        for task in (follow_task, ray_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
