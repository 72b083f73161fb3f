"""How the backend names the engine's state from an operation's running step (no nodes needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.config import load_config
from sparktui.domain.events import EngineChanged, EngineState, Event, OperationView, StepStatus, StepView
from sparktui.domain.history import HistoryStore
from sparktui.remote.backend import SshBackend

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
def test_restart_state_follows_the_running_step(step: str, state: EngineState, tmp_path: Path) -> None:
    events: list[Event] = []
    backend = SshBackend(load_config(CONFIG), history=HistoryStore(tmp_path / "runs.jsonl"))
    backend._sink = events.append
    view = OperationView("restart", steps=(StepView(step, "spark1", StepStatus.RUNNING),))
    backend._on_operation(view)
    engine = [e for e in events if isinstance(e, EngineChanged)]
    assert engine[-1].state is state
