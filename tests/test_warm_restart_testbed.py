"""Warm restarts on the test bed (two SSH hosts, runtime host, real Ray, the stand-in engine).

``engine.restart = "vllm"`` restarts vLLM alone: Ray's raylets keep their PIDs, the engine is ready again,
and the stand-in — replaying the DGX Spark recording, which compiles — finds the torch.compile cache its
first start wrote under ``VLLM_CACHE_ROOT`` on the head's disk, so the second start loads the compiled
graphs (the timeline's compile stage is skipped, a cache hit). Ray unhealthy → a full restart, saying why.
A verified stop after each.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from sparktui.domain.events import OperationView, StepStatus
from sparktui.remote.engine_wait import wait_until_ready
from sparktui.sim.recording import DGX_SPARK_RECORDING
from tests.lifecycle_helpers import host_path
from tests.test_engine_truth_testbed import kill_ours, raylets
from tests.test_lifecycle_testbed import _explain, harness, leftovers, start_ready
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

#: In each host's private /tmp, so a run starts cold whatever ran on this machine before.
CACHE_ROOT = "/tmp/vllm-cache"
ENV = {"SPARKTUI_STANDIN_RECORDING": DGX_SPARK_RECORDING, "VLLM_CACHE_ROOT": CACHE_ROOT}


def stage(timeline: dict[str, Any], name: str) -> str:
    return next(s["status"] for s in timeline["stages"] if s["name"] == name)


def first_step(view: OperationView) -> Any:
    return next(s for s in view.steps if s.name == "keep Ray and containers")


async def test_restart_vllm_keeps_ray_and_the_second_start_loads_compiled_graphs(testbed: Testbed) -> None:
    shutil.rmtree(host_path(testbed, "spark1", CACHE_ROOT), ignore_errors=True)
    async with harness(testbed, restart="vllm", env=ENV) as h:
        view = await h.controller.start()
        assert view.ok, _explain(view)
        cold = await wait_until_ready(h.controller, timeout=180)
        assert cold.outcome == "ready", cold.detail
        assert stage(cold.timeline, "compile") == "done"
        assert not cold.timeline["facts"].get("compile_cache_hit")
        entries = list(host_path(testbed, "spark1", CACHE_ROOT).glob(
            "torch_compile_cache/*/rank_0_0/backbone/vllm_compile_cache.py"))
        assert len(entries) == 1, entries
        before = {n: raylets(testbed, n) for n in ("spark1", "spark2")}
        assert all(before.values()), before

        view = await h.controller.restart(preflight=False)
        assert view.ok, _explain(view)
        assert first_step(view).status is StepStatus.OK, first_step(view).message
        names = {s.name for s in view.steps}
        assert "stop vLLM" in names and "vllm serve" in names
        assert not names & {"stop Ray", "ray start (head)", "ray start (worker)", "nothing left"}
        warm = await wait_until_ready(h.controller, timeout=180)
        assert warm.outcome == "ready", warm.detail
        assert stage(warm.timeline, "compile") == "skipped"
        assert warm.timeline["facts"]["compile_cache_hit"] is True
        assert {n: raylets(testbed, n) for n in before} == before  # Ray was kept, not restarted

        stop = await h.controller.stop()
        assert stop.ok, _explain(stop)
        for name in ("spark1", "spark2"):
            assert leftovers(testbed, name) == [], name


async def test_restart_vllm_with_a_node_lost_from_ray_is_a_full_restart_saying_why(testbed: Testbed) -> None:
    async with harness(testbed, restart="vllm") as h:
        await start_ready(h)
        kill_ours(testbed, "spark2")  # its raylet and friends: Ray loses the node
        view = await h.controller.restart(preflight=False)
        assert view.ok, _explain(view)
        step = first_step(view)
        assert step.status is StepStatus.WARNING and step.message.startswith("full restart instead: ")
        assert "spark2" in step.message, step.message
        assert {s.name for s in view.steps} >= {"stop Ray", "ray start (worker)", "nothing left"}
        result = await wait_until_ready(h.controller, timeout=180)
        assert result.outcome == "ready", result.detail
        stop = await h.controller.stop()
        assert stop.ok, _explain(stop)
