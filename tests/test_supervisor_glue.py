"""The supervisor between its policy and the backend, with the backend's edges faked (the test-bed tests
run it whole): the incident is kept before the action runs, a person's stop starts nothing, and "needs a
person" carries the log's own advice and is told."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sparktui.config import SparkConfig, SuperviseConfig, load_config
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    FailureView,
    Notice,
    OperationView,
    TimelineView,
)
from sparktui.domain.lifecycle.desired import Desired, DesiredState
from sparktui.domain.supervise import Cause
from sparktui.remote.supervisor import Supervisor

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"


class Controller:
    busy = None

    def __init__(self, desired: Desired) -> None:
        self.wanted = DesiredState(desired, "`sparktui start`", "laptop", time.time())

    async def desired(self) -> DesiredState:
        return self.wanted


class Events:
    def __init__(self) -> None:
        self.posted: list[Event] = []

    def post(self, event: Event) -> None:
        self.posted.append(event)


class Operations:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    async def supervised(self, operation: Callable[[Any], Awaitable[OperationView]]) -> None:
        self.order.append(f"operation {operation.__name__}")


class Backend:
    def __init__(self, desired: Desired, order: list[str]) -> None:
        self.controller = Controller(desired)
        self.events = Events()
        self.operations = Operations(order)


def supervisor(desired: Desired, config: SparkConfig | None = None) -> tuple[Supervisor, Backend, list[str],
                                                                              list[dict[str, Any]]]:
    order: list[str] = []
    lines: list[dict[str, Any]] = []
    backend = Backend(desired, order)

    async def keep(cause: Cause, node: str | None, detail: str) -> str:
        await asyncio.sleep(0)   # the evidence takes its time; the action waits for it
        order.append(f"incident {cause.value}")
        return "inc-1"

    sup = Supervisor(config or load_config(CONFIG), lines.append, on_incident=keep,
                     backend=backend)  # type: ignore[arg-type]
    return sup, backend, order, lines


async def settle(sup: Supervisor) -> None:
    await sup.decide()
    if sup.operation is not None:
        await sup.operation


async def test_the_incident_is_kept_before_the_restart_runs() -> None:
    sup, _backend, order, lines = supervisor(Desired.SERVING)
    sup.sink(EngineChanged(EngineState.READY, "serving"))
    await settle(sup)
    assert order == []
    sup.sink(EngineChanged(EngineState.FAILED, "crashed after 3m: engine process exited"))
    await settle(sup)
    assert order == ["incident crashed", "operation _supervised_restart"]
    events = [(line["event"], line.get("action") or line.get("id")) for line in lines
              if line["event"] in ("decision", "incident")]
    assert events == [("decision", "restart"), ("incident", "inc-1")]


async def test_a_persons_stop_starts_nothing_and_keeps_no_incident() -> None:
    sup, _backend, order, lines = supervisor(Desired.STOPPED)
    sup.sink(EngineChanged(EngineState.READY, "serving"))
    sup.sink(EngineChanged(EngineState.FAILED, "crashed after 3m: engine process exited"))
    await settle(sup)
    assert order == []
    assert [line["action"] for line in lines if line["event"] == "decision"] == ["hold"]


async def test_needs_a_person_says_the_logs_advice_and_is_told() -> None:
    config = load_config(CONFIG)
    config = config.model_copy(update={"supervise": SuperviseConfig(oom_retries=0)})
    sup, backend, order, lines = supervisor(Desired.SERVING, config)
    failure = FailureView("oom", "kv_cache", "CUDA out of memory", "Lower --gpu-memory-utilization")
    sup.sink(EngineChanged(EngineState.FAILED, "out of memory in KV cache",
                           TimelineView(outcome="failed", failure=failure)))
    await settle(sup)
    assert order == ["incident oom"]   # kept, and nothing run
    decision = [line for line in lines if line["event"] == "decision"][-1]
    assert decision["action"] == "needs_person"
    assert "The log's advice: Lower --gpu-memory-utilization" in decision["detail"]
    assert [e.message for e in backend.events.posted if isinstance(e, Notice) and e.severity == "error"
            and "--gpu-memory-utilization" in e.message], backend.events.posted
