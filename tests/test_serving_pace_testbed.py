"""Serving slower than it should, against the stand-in engine on a test-bed host reached through real SSH:
its speed halved after a real benchmark of it, and its draft model's acceptance dropped while it serves
(``--speculative-config``; the drop staged through the stand-in's runtime file). One engine start each.

The stand-in runs from this checkout (``PYTHONPATH``): its speculative decoding is this tree's."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sparktui.domain.bench import BenchPlan, BenchRecord
from sparktui.domain.events import Event, ServingSampled, ServingSlow
from sparktui.domain.logs import timeline_from_bytes
from sparktui.domain.serving_pace import PaceSettings, ServingPace, baseline_from
from sparktui.remote.api_client import EngineApi
from sparktui.remote.bench_runner import run_builtin_sweep, timed_request
from sparktui.remote.serving_watch import ServingWatch, verify_ready
from tests.test_serving_testbed import SERVED, RunningEngine, StartEngine, ray_host, start_engine

__all__ = ["ray_host", "start_engine"]   # the fixtures, shared with the serving tests

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

ROOT = str(Path(__file__).resolve().parents[1])


async def _knob(engine: RunningEngine, path: str, text: str) -> None:
    """Write the stand-in's runtime file on its host (read at its next stats interval)."""
    result = await engine.transport.run(["sh", "-c", f"printf '%s\\n' '{text}' > {path}"], timeout=10)
    assert result.ok, result.stderr


async def _load(engine: RunningEngine) -> None:
    """One stream of short requests, back to back (the stand-in counts a request's tokens when it ends)."""
    i = 0
    while True:
        await timed_request(engine.api, SERVED, f"request {i}", 24)
        i += 1


async def _until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {seconds:.0f} s"
        await asyncio.sleep(0.2)


async def _watched(engine: RunningEngine, pace: ServingPace, events: list[Event],
                   body: Callable[[], Awaitable[None]], *, load_first: bool = True) -> None:
    """``body`` while the engine is watched (and, with ``load_first``, under load from the start)."""
    # The watch reads through a connection of its own, as the dashboard's (the head's probe) does: its
    # scrapes never wait behind the load's requests.
    api = await EngineApi.connect(engine.transport, "127.0.0.1", engine.port)
    watch = ServingWatch(api, ready_at=engine.ready_at, interval=0.5, window_seconds=2.0, pace=pace)
    tasks: list[asyncio.Task[Any]] = [asyncio.create_task(watch.run(events.append))]
    if load_first:
        tasks.append(asyncio.create_task(_load(engine)))
    try:
        await body()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await api.aclose()


def _slow(events: list[Event]) -> list[ServingSlow]:
    return [e for e in events if isinstance(e, ServingSlow)]


async def test_serving_slower_than_its_benchmark(start_engine: StartEngine) -> None:
    knobs = f"/tmp/standin-knobs-{time.time_ns()}"
    engine = await start_engine("--standin-stats-interval", "1",
                                env={"PYTHONPATH": ROOT, "SPARKTUI_STANDIN_RUNTIME_FILE": knobs})
    assert (await verify_ready(engine.api, model=SERVED, retry_interval=0.2)).ok
    pace = ServingPace(PaceSettings(slow_ratio=0.8, slow_seconds=4.0))
    events: list[Event] = []
    bench_tok_s = 0.0
    knob_at = 0.0

    async def body() -> None:
        nonlocal bench_tok_s, knob_at
        # The baseline: a real benchmark of this engine (one stream), as `sparktui bench` records it, taken
        # while the engine is watched (as in the dashboard, whose probe reads /metrics all along).
        plan = BenchPlan(concurrency=(1,), input_len=16, output_len=24, requests=12, warmup=1)
        outcome = await run_builtin_sweep(engine.api, SERVED, plan)
        record = BenchRecord(time.time(), "/models/standin-model", "", tuple(outcome.levels), 16, 24,
                             "builtin")
        pace.baseline = baseline_from([record], "/models/standin-model", "", ())
        assert pace.baseline is not None
        bench_tok_s = pace.baseline.levels[0][1]
        load = asyncio.create_task(_load(engine))
        try:
            # At full speed first: as fast as its benchmark, and no verdict.
            await _until(lambda: len(_ratios(events)) >= 6, 20, "comparable samples")
            knob_at = time.time()
            await _knob(engine, knobs, "speed=0.5")
            await _until(lambda: bool(_slow(events)), 40, '"slower than it should"')
        finally:
            load.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await load

    await _watched(engine, pace, events, body, load_first=False)
    before = [ratio for at, ratio in _ratios(events) if at < knob_at]
    assert before and sorted(before)[len(before) // 2] > 0.8, before   # serving at its benchmark's speed
    slow_events = _slow(events)
    assert len(slow_events) == 1
    slow = slow_events[0].slow
    assert slow.rule == "throughput" and slow.concurrency == 1
    assert slow.expected_tok_s == pytest.approx(bench_tok_s)
    assert slow.ratio is not None and 0.3 < slow.ratio < 0.8, slow.describe()
    assert slow.describe().startswith("serving slower than it should for ")
    assert f"vs {bench_tok_s:.1f} at c=1 in the last benchmark" in slow.describe()
    slow_at = next(e.snapshot.at for e in events if isinstance(e, ServingSampled) and e.snapshot.pace
                   and e.snapshot.pace.raised)
    assert slow_at > knob_at


def _ratios(events: list[Event]) -> list[tuple[float, float]]:
    """(wall time, output tok/s ÷ the benchmark's) of each comparable snapshot."""
    return [(e.snapshot.at, e.snapshot.pace.ratio) for e in events if isinstance(e, ServingSampled)
            and e.snapshot.pace is not None and e.snapshot.pace.ratio is not None]


async def test_speculative_acceptance_reported_and_its_drop_detected(
        start_engine: StartEngine) -> None:
    knobs = f"/tmp/standin-knobs-{time.time_ns()}"
    engine = await start_engine(
        "--standin-stats-interval", "1",
        "--speculative-config", '{"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": 3}',
        env={"PYTHONPATH": ROOT, "SPARKTUI_STANDIN_RUNTIME_FILE": knobs,
             "SPARKTUI_STANDIN_ACCEPTANCE": "0.8"})
    assert (await verify_ready(engine.api, model=SERVED, retry_interval=0.2)).ok
    pace = ServingPace(PaceSettings(slow_seconds=3.0, early_seconds=3.0))   # no benchmark: acceptance alone
    events: list[Event] = []

    async def body() -> None:
        # Past the early span (3 s of drafting): the early level is set.
        await _until(lambda: len([e for e in events if isinstance(e, ServingSampled)
                                  and e.snapshot.spec is not None]) >= 10, 30, "acceptance from /metrics")
        await _knob(engine, knobs, "acceptance=0.5")
        await _until(lambda: bool(_slow(events)), 40, '"slower than it should"')

    await _watched(engine, pace, events, body)
    spec = [e.snapshot.spec for e in events if isinstance(e, ServingSampled) and e.snapshot.spec is not None]
    # α = 0.8, k = 3: 65 % of drafted tokens accepted, 2.95 tokens a step; α = 0.5: 29 %, 1.88.
    assert spec[0].rate == pytest.approx(0.65, abs=0.05)
    assert spec[0].mean_length == pytest.approx(2.95, abs=0.1)
    assert len(spec[0].per_position) == 3
    slow = _slow(events)[0].slow
    assert slow.rule == "acceptance"
    assert slow.early_acceptance == pytest.approx(0.65, abs=0.05)
    assert slow.acceptance is not None and slow.acceptance < 0.4
    assert "draft model" in (slow.cause or "")
    # The log says the same: vLLM's SpecDecoding lines, read by the log parser.
    facts = timeline_from_bytes(bytes(engine.output)).facts
    assert facts["spec_first_acceptance_rate"] == pytest.approx(0.65, abs=0.05)
    assert facts["spec_acceptance_rate"] < 0.4
