"""Issue 6's end-to-end test: the dashboard against the test bed — real SSH, real Ray, the stand-in engine.

The app is driven as a person would: wait for the nodes, press ``s``, watch the engine reach *ready* on the
screen, stop it with ``x`` and confirm.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from sparktui.domain.events import EngineState
from sparktui.domain.history import HistoryStore
from sparktui.remote.backend import SshBackend
from sparktui.ui.app import SparkApp
from tests.lifecycle_helpers import lifecycle_config, make_model_dirs
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]


async def wait_until(pilot: Pilot[int], test: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            app = pilot.app
            assert isinstance(app, SparkApp)
            engine = app.state.engine
            raise AssertionError(f"timed out waiting for {what}; "
                                 f"engine {engine.state.value}: {engine.detail}")
        await pilot.pause(0.2)


async def test_press_s_and_see_ready(make_testbed: Callable[..., Testbed], tmp_path: Path) -> None:
    bed = make_testbed()
    make_model_dirs(bed)
    config = lifecycle_config(bed, pace=4.0)
    backend = SshBackend(config, history=HistoryStore(tmp_path / "runs.jsonl"))
    app = SparkApp(backend, config.ui, roles={n.name: n.role for n in config.nodes},
                   cluster_name=config.cluster.name)
    async with app.run_test(size=(160, 48)) as pilot:
        state = app.state
        await wait_until(pilot, lambda: all(n.link_phase == "connected" for n in state.nodes.values()), 30,
                         "both nodes connected")
        await wait_until(pilot, lambda: state.engine.state is EngineState.STOPPED, 60, "discovered: stopped")
        await wait_until(pilot, lambda: all(n.reading is not None for n in state.nodes.values()), 30,
                         "a telemetry sample from each node")

        await pilot.press("s")
        # The backend's gate says at once that it took the start on (before the lock and the first step).
        await wait_until(pilot, lambda: state.busy == "start", 10, "the start taken on")
        await wait_until(pilot, lambda: state.engine.state is EngineState.READY, 150, "ready")
        screen = app.export_screenshot()
        assert "ready" in screen.lower()
        assert "spark1" in screen and "spark2" in screen

        await pilot.press("x")                  # stop asks first (Cancel has the focus) …
        await pilot.pause(0.3)
        await pilot.press("y")                  # … and "y" says yes
        await wait_until(pilot, lambda: state.engine.state is EngineState.STOPPED, 60, "stopped")
        assert state.operation is not None and state.operation.kind == "stop" and state.operation.ok
        await wait_until(pilot, lambda: state.running_kind is None, 10, "the stop done")
