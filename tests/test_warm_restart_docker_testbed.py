"""Warm restarts with ``runtime = "docker"`` on real Docker Engines (the CI image: Ray 2.60 + the stand-in).

vLLM's cache root lies on the node's disk through ``engine.cache_mounts`` (here the host's private /tmp,
mounted at the image's default ``/root/.cache/vllm``): the first start compiles and writes its entry there;
``restart = "vllm"`` keeps the containers (same IDs) and Ray, and the engine loads its compiled graphs;
after a verified stop (``docker rm -f`` of both containers) a fresh start still finds them on the disk.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from sparktui.domain.events import StepStatus
from sparktui.remote.engine_wait import wait_until_ready
from sparktui.sim.recording import DGX_SPARK_RECORDING
from tests.lifecycle_helpers import host_path, lifecycle_overrides
from tests.test_docker_testbed import PREFIX, assert_clean, explain, harness
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

HOST_CACHE = "/tmp/vllm-cache"
CACHE = [{"source": HOST_CACHE, "target": "/root/.cache/vllm"}]


def container_ids(bed: Testbed) -> dict[str, str]:
    return {n: bed.docker(n, "ps", "-q", "--no-trunc", "--filter", f"name={PREFIX}-").stdout.strip()
            for n in bed.names}


def compile_stage(timeline: dict[str, Any]) -> tuple[str, bool]:
    status = next(s["status"] for s in timeline["stages"] if s["name"] == "compile")
    return status, bool(timeline["facts"].get("compile_cache_hit"))


async def test_compiled_graphs_survive_docker_rm_and_restart_vllm_keeps_the_containers(
        docker_testbed: Testbed) -> None:
    bed = docker_testbed
    shutil.rmtree(host_path(bed, "spark1", HOST_CACHE), ignore_errors=True)
    # docker_overrides gives ``env`` as is: the test bed's block plus the recording that compiles.
    env = {**lifecycle_overrides(bed)["engine"]["env"], "SPARKTUI_STANDIN_RECORDING": DGX_SPARK_RECORDING}
    async with harness(bed, restart="vllm", cache_mounts=CACHE, env=env) as h:
        view = await h.controller.start()
        assert view.ok, explain(view)
        cold = await wait_until_ready(h.controller, timeout=240)
        assert cold.outcome == "ready", cold.detail
        assert compile_stage(cold.timeline) == ("done", False)
        entries = list(host_path(bed, "spark1", HOST_CACHE).glob(
            "torch_compile_cache/*/rank_0_0/backbone/vllm_compile_cache.py"))
        assert len(entries) == 1, entries
        ids = container_ids(bed)
        assert all(ids.values()), ids

        view = await h.controller.restart(preflight=False)
        assert view.ok, explain(view)
        keep = next(s for s in view.steps if s.name == "keep Ray and containers")
        assert keep.status is StepStatus.OK, keep.message
        warm = await wait_until_ready(h.controller, timeout=240)
        assert warm.outcome == "ready", warm.detail
        assert compile_stage(warm.timeline) == ("skipped", True)
        assert container_ids(bed) == ids

        stop = await h.controller.stop()  # docker rm -f of both containers
        assert stop.ok, explain(stop)
        assert_clean(bed)
        assert entries[0].is_file()

        view = await h.controller.start(preflight=False)
        assert view.ok, explain(view)
        again = await wait_until_ready(h.controller, timeout=240)
        assert again.outcome == "ready", again.detail
        assert compile_stage(again.timeline) == ("skipped", True)
        assert container_ids(bed) != ids  # new containers, the old cache

        stop = await h.controller.stop()
        assert stop.ok, explain(stop)
        assert_clean(bed)
