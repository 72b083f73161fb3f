"""``runtime = "host"``: a sparktui killed with SIGKILL leaves no helper of ours on a node — the Ray probes of
a ``start --wait``, the follower of a ``logs -f`` — while the engine it started runs on (as on the docker
runtime, ``tests/test_docker_testbed.py``). Checked from outside, in each host's own PID namespace."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sparktui.domain.events import StepStatus
from sparktui.remote.cluster import close_cluster, open_cluster
from sparktui.remote.engine import EngineController
from sparktui.remote.engine_wait import wait_until_ready
from tests.leftovers import helpers_left, processes, sigkill_after
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]


async def test_sigkilled_start_wait_and_logs_follow_leave_no_helper(testbed: Testbed, tmp_path: Path) -> None:
    bed = testbed
    make_model_dirs(bed)
    overrides = lifecycle_overrides(bed)
    config_path = bed.write_config(tmp_path / "config.toml", **overrides)
    config = bed.spark_config(**overrides)
    assert config.engine.runtime == "host"
    c = ("--config", str(config_path))
    transports = await open_cluster(config)
    controller = EngineController(config, transports)
    try:
        sigkill_after((*c, "start", "--wait"), ("vllm serve: vLLM started detached", 240), ("stage", 60))
        assert await asyncio.to_thread(helpers_left, bed) == []
        result = await wait_until_ready(controller, timeout=180)
        assert result.outcome == "ready", result.detail
        assert await asyncio.to_thread(helpers_left, bed) == []

        sigkill_after((*c, "logs", "-f"), ("Application startup complete.", 60))
        assert await asyncio.to_thread(helpers_left, bed) == []

        stop = await controller.stop()
        failed = [f"{s.node} {s.name}: {s.message}" for s in stop.steps if s.status is StepStatus.FAILED]
        assert stop.ok, failed
        for name in bed.names:
            assert processes(bed, name) == [], name
    finally:
        await EngineController(config, transports).stop()
        await close_cluster(transports)
