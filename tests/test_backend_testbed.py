"""The dashboard's real backend end to end on the test bed: real SSH, real Ray, the stand-in engine.

One start reaches *ready* (verified by a completion through the SSH port forward), telemetry and the log
flow as events, a second backend re-attaches to the running engine, and stop leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    LogRecords,
    NodeIdentified,
    NodeSampled,
    OperationChanged,
    OperationRefused,
    ServingSampled,
)
from sparktui.domain.history import HistoryStore
from sparktui.remote.api_client import EngineApi
from sparktui.remote.backend import SshBackend
from tests.lifecycle_helpers import lifecycle_config, make_model_dirs
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def engine_states(self) -> list[EngineState]:
        return [e.state for e in self.of(EngineChanged)]

    async def wait_for(self, test: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not test():
            if time.monotonic() > deadline:
                states = [(e.state.value, e.detail[:80]) for e in self.of(EngineChanged)][-8:]
                raise AssertionError(f"timed out waiting for {what}; last engine states: {states}")
            await asyncio.sleep(0.1)


@pytest.fixture
def bed(make_testbed: Callable[..., Testbed]) -> Testbed:
    bed = make_testbed()
    make_model_dirs(bed)
    return bed


async def test_start_ready_reattach_stop(
        bed: Testbed, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []    # the dashboard's own requests to the engine's API

    def counted(method: Callable[..., Any], name: str) -> Callable[..., Any]:
        async def call(self: EngineApi, *args: Any, **kwargs: Any) -> Any:
            asked.append(name)
            return await method(self, *args, **kwargs)
        return call

    for name in ("health", "metrics_text"):
        monkeypatch.setattr(EngineApi, name, counted(getattr(EngineApi, name), name))
    config = lifecycle_config(bed, pace=4.0)
    history = HistoryStore(tmp_path / "runs.jsonl")
    first = Recorder()
    backend = SshBackend(config, history=history)
    runner = asyncio.create_task(backend.run(first))
    try:
        await first.wait_for(lambda: EngineState.STOPPED in first.engine_states(), 60, "discovery: stopped")
        await first.wait_for(lambda: {e.node for e in first.of(NodeIdentified)} == {"spark1", "spark2"}, 30,
                             "host facts of both nodes")
        assert {e.hostname for e in first.of(NodeIdentified)} == {"spark1", "spark2"}

        start = asyncio.create_task(backend.start())
        await first.wait_for(lambda: bool(first.of(OperationChanged)), 10, "the start operation")
        with pytest.raises(OperationRefused):
            await backend.stop()          # one operation at a time
        await start
        await first.wait_for(lambda: EngineState.READY in first.engine_states(), 120, "ready")
        ready = [e for e in first.of(EngineChanged) if e.state is EngineState.READY][-1]
        assert ready.ttft_seconds is not None and ready.ttft_seconds >= 0
        assert ready.timeline is not None and ready.timeline.outcome == "ready"
        states = first.engine_states()
        assert states.index(EngineState.STARTING) < states.index(EngineState.VERIFYING) \
            < states.index(EngineState.READY)
        assert {e.node for e in first.of(NodeSampled)} == {"spark1", "spark2"}
        # Serving: the head's probe reads /health and /metrics beside the engine; the dashboard asks
        # nothing itself once ready (its verify asked /health before).
        asked_at_ready = list(asked)
        scraped = len(first.of(ServingSampled))
        await first.wait_for(lambda: len(first.of(ServingSampled)) >= scraped + 3, 15,
                             "three serving samples")
        assert asked == asked_at_ready and "metrics_text" not in asked, asked
        records = [r for e in first.of(LogRecords) for r in e.records]
        assert any("Application startup complete" in r.message for r in records)
        assert any(r.node == bed.ip("spark2") for r in records), "worker lines through Ray's forwarding"
        assert "tok/s" in await backend.smoke_test()
        assert [r.outcome for r in history.load()] == ["ready"]

        # A second dashboard (the first one quit or crashed) re-attaches to the running engine.
        second = Recorder()
        again = SshBackend(config, history=history)
        rerun = asyncio.create_task(again.run(second))
        try:
            await second.wait_for(lambda: EngineState.READY in second.engine_states(), 90,
                                  "re-attached ready")
            assert EngineState.STOPPED not in second.engine_states()
        finally:
            rerun.cancel()
            await asyncio.gather(rerun, return_exceptions=True)

        await backend.stop()
        await first.wait_for(lambda: first.engine_states()[-1] is EngineState.STOPPED, 30, "stopped")
        stop_ops = [e.operation for e in first.of(OperationChanged) if e.operation.kind == "stop"]
        assert stop_ops[-1].ok, stop_ops[-1].message
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_crash_after_ready_turns_failed_with_the_cause(bed: Testbed, tmp_path: Any) -> None:
    config = lifecycle_config(bed, pace=3.0, env={"SPARKTUI_STANDIN_FAIL": "crash_after_ready:2"})
    events = Recorder()
    backend = SshBackend(config, history=HistoryStore(tmp_path / "runs.jsonl"))
    runner = asyncio.create_task(backend.run(events))
    try:
        await events.wait_for(lambda: EngineState.STOPPED in events.engine_states(), 60, "discovery")
        await backend.start()
        await events.wait_for(lambda: EngineState.READY in events.engine_states(), 120, "ready")
        ready_at = time.monotonic()
        await events.wait_for(lambda: events.engine_states()[-1] is EngineState.FAILED, 40, "crash")
        failed = events.of(EngineChanged)[-1]
        assert failed.detail.startswith("crashed after"), failed.detail
        # The process check sees it before /health has failed for health_fail_seconds (15 s).
        assert time.monotonic() - ready_at < config.serving.health_fail_seconds + 2 + 5
        await backend.stop()
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
