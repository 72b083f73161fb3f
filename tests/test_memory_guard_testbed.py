"""The memory guard on the test bed: a scripted memory squeeze on spark2 while the engine starts → vLLM is
stopped before MemAvailable reaches 1 GiB, and the diagnosis names spark2 with its last minute.

How the squeeze is made visible (and why not a real one): this machine is shared, so the test never drives
its real MemAvailable down. Each host's probe reads a fixture copy of ``/proc`` (``proc_root``, as the probe
tests do), and the squeeze rewrites that copy's ``MemAvailable`` in place every half second — falling at
0.25 GiB/s for as long as the stand-in vLLM process runs on the head, as a start that over-commits unified
memory does, and back up once it is gone. The lowest figure written while vLLM still ran must stay above
1 GiB. Ray, SSH, the probe, the stop plan and the stand-in are all real."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import uuid

import pytest

from sparktui.remote.cluster import close_cluster, open_cluster
from sparktui.remote.engine import EngineController
from sparktui.remote.memory_watch import wait_guarded
from tests.fixtures.telemetry import sparks
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.test_lifecycle_testbed import leftovers
from tests.testbed import Testbed
from tests.testbed.bed import _cmdline

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

GIB = 1024**3


def vllm_running(bed: Testbed) -> bool:
    return any("vllm_standin" in " ".join(_cmdline(pid)) for pid in bed.pids("spark1"))


async def test_memory_squeeze_stops_vllm_before_1_gib_and_names_the_node(testbed: Testbed) -> None:
    make_model_dirs(testbed)
    run = f"squeeze-{uuid.uuid4().hex[:8]}"
    trees = {}
    node_overrides = {}
    for name, spark in (("spark1", "spark-a"), ("spark2", "spark-b")):
        local = testbed.host_tmp(name) / run
        local.mkdir(parents=True)
        trees[name] = sparks.copy_spark(spark, local)
        remote = f"/tmp/{run}/{spark}"
        node_overrides[name] = {"proc_root": f"{remote}/proc", "sys_root": f"{remote}/sys"}
    start_at = 10 * GIB
    sparks.set_mem_available(trees["spark2"], start_at)
    # A 60 s replay: long enough that the squeeze, not "ready", ends the wait.
    config = testbed.spark_config(**lifecycle_overrides(testbed, pace=60.0), nodes=node_overrides)
    assert int(config.engine.memory_floor) == 4 * GIB
    transports = await open_cluster(config)
    lowest_while_running = [float(start_at)]
    stop_squeeze = asyncio.Event()

    async def squeeze() -> None:
        available = float(start_at)
        while not stop_squeeze.is_set():
            await asyncio.sleep(0.5)
            if await asyncio.to_thread(vllm_running, testbed):
                available = max(0.25 * GIB, available - 0.125 * GIB)
                lowest_while_running[0] = min(lowest_while_running[0], available)
            else:
                available = float(start_at)      # what vLLM held is free again
            sparks.set_mem_available(trees["spark2"], int(available))

    controller = EngineController(config, transports)
    squeezer: asyncio.Task[None] | None = None
    try:
        view = await controller.start()
        assert view.ok, view.message
        squeezer = asyncio.create_task(squeeze())
        result, trip = await wait_guarded(controller, timeout=150)
        assert result.outcome == "failed", result.detail
        assert trip is not None and trip.node == "spark2" and trip.reason == "floor"
        assert trip.available is not None and trip.available < 4 * GIB
        assert "memory guard: spark2" in result.detail and "over the last minute" in result.detail
        print(f"lowest MemAvailable while vLLM ran: {lowest_while_running[0] / GIB:.2f} GiB; {result.detail}")
        assert lowest_while_running[0] > 1 * GIB, f"vLLM still ran at {lowest_while_running[0] / GIB:.2f} GiB"
        assert not vllm_running(testbed)
        assert leftovers(testbed, "spark1") == [] and leftovers(testbed, "spark2") == []
    finally:
        stop_squeeze.set()
        if squeezer is not None:
            with contextlib.suppress(Exception):
                await squeezer
        with contextlib.suppress(Exception):
            await EngineController(config, transports).stop()
        await close_cluster(transports)
        for name in trees:
            shutil.rmtree(testbed.host_tmp(name) / run, ignore_errors=True)
