"""How the engine's state is named from an operation's running step (no nodes needed): the rule lives in
``EngineTruth``, which the SSH backend, the demo and ``start --wait`` all feed."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.config import load_config
from sparktui.domain.engine_state import EngineTruth
from sparktui.domain.events import EngineState, OperationView, StepStatus, StepView

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"


@pytest.mark.parametrize(("step", "state"), [
    ("stop vLLM", EngineState.STOPPING),
    ("ray stop", EngineState.STOPPING),
    ("remove container", EngineState.STOPPING),
    ("nothing left", EngineState.STOPPING),
    ("preflight: model directory", EngineState.PREFLIGHT),
    ("ray start (head)", EngineState.STARTING),
    ("vllm serve", EngineState.STARTING),
])
def test_restart_state_follows_the_running_step(step: str, state: EngineState) -> None:
    # From the config, as the backend builds it: the stop plan's step names say "still stopping".
    truth = EngineTruth.from_config(load_config(CONFIG))
    view = OperationView("restart", steps=(StepView(step, "spark1", StepStatus.RUNNING),))
    truth.operation(view)
    assert truth.state is state
