"""The bench chart in the dashboard: the demo's ``b`` runs its (simulated) benchmark and the chart opens on
it, against the previous run of the same setup; ``B`` opens it again; ``B`` says why not while a benchmark
runs, and when nothing was saved yet. One snapshot of the chart (the demo, serving, at 120×40)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from textual.pilot import Pilot

from sparktui.sim.demo import DemoBackend
from sparktui.sim.demo_bench import DemoBench
from sparktui.ui.app import SparkApp
from sparktui.ui.screens.bench_chart import BenchChartScreen
from tests.ui_fakes import notifications
from tests.waiting import wait_until


def demo_app(bench: DemoBench) -> SparkApp:
    backend = DemoBackend(seed=7, frozen_at=75.0)   # serving, frozen: the same picture every run
    return SparkApp(backend, roles=backend.node_roles, cluster_name="demo: two simulated DGX Sparks",
                    bench=lambda: bench.run(backend.clock()), bench_history=bench.history)


async def _serving(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)

    def ready() -> bool:
        app.drain()
        return app.state.engine.state.value == "ready"

    await wait_until(ready, "the demo serves", pilot=pilot)


async def test_b_opens_the_chart_of_its_run_and_B_opens_it_again() -> None:
    bench = DemoBench(instant=True)
    app = demo_app(bench)
    async with app.run_test(size=(120, 40)) as pilot:
        await _serving(pilot)
        await pilot.press("b")
        await wait_until(lambda: isinstance(app.screen, BenchChartScreen), "the chart opens", pilot=pilot)
        screen = app.screen
        assert isinstance(screen, BenchChartScreen)
        chart = screen.chart
        assert chart.record is bench.records[-1] and chart.previous is bench.records[-2]
        assert chart.runs_of_setup == 4 and [r.concurrency for r in chart.rows] == [1, 4]
        assert all(r.previous_tok_s and r.ceiling_percent for r in chart.rows)
        assert not any("(simulated)" in n for n in notifications(app))   # the chart says it all
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.screen_stack[0], "the chart closes", pilot=pilot)
        await pilot.press("B")
        await wait_until(lambda: isinstance(app.screen, BenchChartScreen), "B opens it", pilot=pilot)
        assert app.screen.chart.record is bench.records[-1]   # type: ignore[attr-defined]
        await pilot.press("B")
        await wait_until(lambda: app.screen is app.screen_stack[0], "B closes it", pilot=pilot)


async def test_B_says_why_not_while_a_benchmark_runs_and_when_none_was_saved() -> None:
    bench = DemoBench(instant=False)     # takes 1.5 s: long enough to press B meanwhile
    bench.records.clear()
    app = demo_app(bench)
    async with app.run_test(size=(120, 40)) as pilot:
        await _serving(pilot)
        await pilot.press("B")
        await wait_until(lambda: any(n.startswith("no benchmark saved yet: b runs one") for n in
                                     notifications(app)), "told none was saved", pilot=pilot)
        await pilot.press("b")
        await wait_until(lambda: any(w.group == "bench" and w.is_running for w in app.workers),
                         "the benchmark runs", pilot=pilot)
        assert app.unavailable("bench_chart") == "a benchmark is running: its chart opens when it ends"
        await pilot.press("B")
        assert not isinstance(app.screen, BenchChartScreen)
        await wait_until(lambda: isinstance(app.screen, BenchChartScreen), "its chart opens", pilot=pilot)
        assert app.screen.chart.previous is None   # type: ignore[attr-defined]


def test_without_a_bench_history_B_says_so() -> None:
    backend = DemoBackend(seed=7, frozen_at=75.0)
    app = SparkApp(backend, roles=backend.node_roles)
    assert "needs a bench history" in (app.unavailable("bench_chart") or "")


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chart shows local times: UTC here, so the snapshot is the same on every machine."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def test_bench_chart_120x40(snap_compare: Any, utc: None) -> None:
    bench = DemoBench(instant=True)

    async def open_chart(pilot: Pilot[Any]) -> None:
        await _serving(pilot)
        # The newest saved run, as `B` opens it (`b` would add a toast over it for 30 s).
        await pilot.press("B")
        await wait_until(lambda: isinstance(pilot.app.screen, BenchChartScreen), "the chart opens",
                         pilot=pilot)

    assert snap_compare(demo_app(bench), terminal_size=(120, 40), run_before=open_chart)




async def test_a_dialog_open_when_the_benchmark_ends_is_not_covered() -> None:
    bench = DemoBench(instant=False)
    app = demo_app(bench)
    async with app.run_test(size=(120, 40)) as pilot:
        await _serving(pilot)
        await pilot.press("b")
        await pilot.press("question_mark")
        said = "(simulated) — B shows its chart"
        await wait_until(lambda: any(n.endswith(said) for n in notifications(app)),
                         "the summary says where the chart is", pilot=pilot)
        assert not isinstance(app.screen, BenchChartScreen)
