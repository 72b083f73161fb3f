"""Ray's node list read from the head: one reading, a watch until cancelled, and the start plan's wait for
every node and GPU (the Ray probe streamed; ``ray status`` read where the probe cannot import ray)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

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
        """Ray readings from the head every ``interval`` s until cancelled (one connected probe, restarted
        when it ends, e.g. after the connection dropped)."""
        cfg = self.nodes.config
        head = cfg.head.name
        argv = P.probe_argv(cfg, self.nodes.runtimes[head], 3600.0, interval)
        transport = self.nodes.transports[head]
        while True:
            try:
                await transport.wait_connected()
                proc = await transport.start(argv)
            except TransportError:
                await asyncio.sleep(1.0)
                continue
            buf = b""
            try:
                async for chunk in proc.chunks():
                    *lines, buf = (buf + chunk).split(b"\n")
                    for raw in lines:
                        with contextlib.suppress(ProbeError):
                            state = parse_probe_line(raw.decode("utf-8", "replace"))
                            if state is not None:
                                self.last_state = state
                                on_state(state)
            finally:
                proc.terminate()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 2.0)
            await asyncio.sleep(1.0)

    async def wait_ready(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        """A WAIT_RAY step: stream the Ray probe (a reading every 0.2 s) until every expected node and GPU
        is there."""
        assert step.node is not None
        transport = self.nodes.transports[step.node]
        t0 = time.monotonic()
        deadline = t0 + step.timeout
        last = Readiness(False, "Ray has not answered yet")
        use_status_text = False
        probe_error = ""
        while time.monotonic() < deadline:
            if use_status_text:
                left = deadline - time.monotonic()
                res = await self.nodes.run(step.node, step.fallback, min(30.0, left + 1))
                state = parse_ray_status(res.stdout)
                if state is not None:
                    last = evaluate(state, step.expected)
                    live(last.diagnosis)
                    if last.ready:
                        return Outcome(StepStatus.OK, last.diagnosis + " (from `ray status`)")
                await asyncio.sleep(max(0.0, 1.0 - res.seconds))
                continue
            proc = await transport.start(step.argv)
            buf = b""
            try:
                async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                    async for chunk in proc.chunks():
                        buf += chunk
                        *lines, rest = buf.split(b"\n")
                        buf = rest
                        for raw in lines:
                            try:
                                state = parse_probe_line(raw.decode("utf-8", "replace"))
                            except ProbeError as exc:
                                probe_error = str(exc)
                                continue
                            if state is None:
                                continue
                            self.last_state = state
                            last = evaluate(state, step.expected)
                            if last.ready:
                                return Outcome(StepStatus.OK, f"{last.diagnosis} after "
                                               f"{time.monotonic() - t0:.1f} s")
                            live(last.diagnosis)
            except TimeoutError:
                break
            finally:
                # Reaped in the background: `vllm serve` should not wait for the probe's channel to close.
                proc.terminate()
                self.nodes.reap(proc)
            if "cannot import ray" in probe_error:
                use_status_text = True
                live(f"{probe_error}; reading `ray status` instead")
                continue
            await asyncio.sleep(0.3)
        why = last.diagnosis
        if probe_error and not last.problems:
            why = f"{why} (probe: {probe_error})"
        return Outcome(StepStatus.FAILED, f"after {step.timeout:.0f} s: {why}", last.problems[-TAIL_LINES:])
