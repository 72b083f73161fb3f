"""The memory guard for ``start --wait``: every node's probe feeds ``MemoryGuard`` while the engine starts.

The dashboard's backend feeds the same guard from the samples it already streams; a headless wait has no
telemetry of its own, so this module starts the probe on each node for as long as the wait runs. On a
trip vLLM is stopped (the stop plan: vLLM, Ray, containers) before the wait is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from sparktui.domain.memory_guard import MemoryGuard, MemoryTrip
from sparktui.remote.engine import EngineController
from sparktui.remote.engine_wait import WaitResult, wait_until_ready
from sparktui.remote.probe_runner import engine_probe_args, stream_samples

#: Seconds between memory samples while waiting (a start can eat a GiB a second on a Spark).
GUARD_INTERVAL = 1.0


async def watch_memory(controller: EngineController, guard: MemoryGuard,
                       interval: float = GUARD_INTERVAL) -> MemoryTrip:
    """Stream every node's samples into ``guard`` until it trips; return the trip."""
    config = controller.config
    tripped = asyncio.Event()

    async def node_samples(name: str) -> None:
        node = config.node(name)
        async for sample in stream_samples(controller.transports[name], node, interval,
                                           name_prefix=config.engine.name_prefix,
                                           extra_args=engine_probe_args(config.engine)):
            if guard.observe(name, sample):
                tripped.set()
                return

    tasks = [asyncio.create_task(node_samples(n.name)) for n in config.nodes]
    try:
        await tripped.wait()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    assert guard.tripped is not None
    return guard.tripped


async def wait_guarded(
    controller: EngineController,
    *,
    timeout: float = 3600.0,
    on_stage: Callable[[str], None] | None = None,
    interval: float = GUARD_INTERVAL,
) -> tuple[WaitResult, MemoryTrip | None]:
    """``wait_until_ready`` with the memory guard beside it: a trip stops vLLM and fails the wait."""
    engine = controller.config.engine
    guard = MemoryGuard(engine.memory_floor, engine.memory_psi_full)
    waiting = asyncio.create_task(wait_until_ready(controller, timeout=timeout, on_stage=on_stage))
    if not guard.enabled:
        return await waiting, None
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    watching = asyncio.create_task(watch_memory(controller, guard, interval))
    try:
        await asyncio.wait({waiting, watching}, return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done() and watching.exception() is not None:
            # The guard could not watch (a fault of its own): the wait still decides, unguarded.
            await asyncio.wait({waiting})
    finally:
        for task in (waiting, watching):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    if waiting.done() and not waiting.cancelled():
        return waiting.result(), None
    trip = watching.result()
    stop = await controller.stop(by_person=False)   # the guard stopped it: what was asked for stays
    detail = trip.message + ("" if stop.ok else f" (stop: {stop.message})")
    return WaitResult("failed", detail, "memory guard", loop.time() - t0), trip
