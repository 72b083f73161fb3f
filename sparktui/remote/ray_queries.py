"""Ray's node list read from the head: one reading, a watch until cancelled, and the start plan's wait for
every node and GPU (the Ray probe streamed; ``ray status`` read where the probe cannot import ray)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from sparktui.domain.backoff import Backoff
from sparktui.domain.events import StepStatus
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.output import TAIL_LINES
from sparktui.domain.lifecycle.ray_state import (
    ProbeError,
    RayState,
    Readiness,
    evaluate,
    last_probe_state,
    parse_probe_line,
    parse_ray_status,
)
from sparktui.remote.engine_nodes import EngineNodes, Outcome
from sparktui.remote.line_stream import LineStream
from sparktui.remote.transport import TransportError


class RayQueries:
    """Ray readings over the head's transport; ``last_state`` is the latest reading any of them saw."""

    def __init__(self, nodes: EngineNodes) -> None:
        self.nodes = nodes
        self.last_state: RayState | None = None

    async def state_once(self, timeout: float = 20.0) -> RayState | None:
        """One reading of Ray's node list from the head (``None`` if Ray does not answer)."""
        cfg = self.nodes.config
        rt = self.nodes.runtimes[cfg.head.name]
        argv = P.probe_argv(cfg, rt, 0.0, count=1, until_stdin_closes=False, timeout=timeout)
        try:
            res = await self.nodes.run(cfg.head.name, argv, timeout + 5)
            return last_probe_state(res.stdout)
        except (TransportError, ProbeError):
            return None

    async def watch(self, on_state: Callable[[RayState], None], *, interval: float = 1.0) -> None:
        """Ray readings from the head every ``interval`` s until cancelled or the head's link is closed
        (one connected probe, restarted by ``LineStream`` when it ends, e.g. after the connection dropped)."""
        cfg = self.nodes.config
        head = cfg.head.name
        argv = P.probe_argv(cfg, self.nodes.runtimes[head], 3600.0, interval, changes=True)
        stream = LineStream(self.nodes.transports[head], argv, name=f"{head}: Ray watch", reap_timeout=2.0)
        async with contextlib.aclosing(stream.lines()) as lines:
            async for line in lines:
                with contextlib.suppress(ProbeError):
                    state = parse_probe_line(line)
                    if state is not None:
                        self.last_state = state
                        on_state(state)

    async def wait_ready(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        """A WAIT_RAY step: stream the Ray probe (a reading every 0.2 s) until every expected node and GPU
        is there (``ray status`` read instead where the probe cannot import ray)."""
        assert step.node is not None
        t0 = time.monotonic()
        deadline = t0 + step.timeout
        last = Readiness(False, "Ray has not answered yet")
        probe_error = ""

        def ready(how: str) -> Outcome:
            return Outcome(StepStatus.OK, f"{last.diagnosis} {how}")

        # Reaped in the background: `vllm serve` should not wait for the probe's channel to close.
        stream = LineStream(self.nodes.transports[step.node], step.argv, name=f"{step.node}: Ray probe",
                            backoff=Backoff(initial=0.3, factor=1.0, maximum=0.3, jitter=0.0),
                            reap=self.nodes.reap)
        try:
            async with asyncio.timeout(step.timeout):
                async with contextlib.aclosing(stream.lines()) as lines:
                    async for line in lines:
                        try:
                            state = parse_probe_line(line)
                        except ProbeError as exc:
                            probe_error = str(exc)
                            if "cannot import ray" in probe_error:
                                break
                            continue
                        if state is None:
                            continue
                        self.last_state = state
                        last = evaluate(state, step.expected)
                        if last.ready:
                            return ready(f"after {time.monotonic() - t0:.1f} s")
                        live(last.diagnosis)
                if "cannot import ray" not in probe_error:  # the head's link was closed
                    raise TimeoutError
                live(f"{probe_error}; reading `ray status` instead")
                while time.monotonic() < deadline:
                    res = await self.nodes.run(step.node, step.fallback,
                                               min(30.0, deadline - time.monotonic() + 1))
                    state = parse_ray_status(res.stdout)
                    if state is not None:
                        last = evaluate(state, step.expected)
                        live(last.diagnosis)
                        if last.ready:
                            return ready("(from `ray status`)")
                    await asyncio.sleep(max(0.0, 1.0 - res.seconds))
        except TimeoutError:
            pass
        why = last.diagnosis
        if probe_error and not last.problems:
            why = f"{why} (probe: {probe_error})"
        return Outcome(StepStatus.FAILED, f"after {step.timeout:.0f} s: {why}", last.problems[-TAIL_LINES:])
