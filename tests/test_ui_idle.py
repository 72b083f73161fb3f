"""An idle dashboard does no work: with the source frozen (the engine ready, both nodes connected, no new
sample, no log line) nothing is drained and no widget is refreshed for seconds; the first new sample
wakes the drain once and repaints its node.

No test here waits a fixed time: each waits for the app's ticks (``SparkApp.ticks``, with a shorter tick
where the test counts ticks) or for its events to be applied (``events_applied``, ``drain_pending``)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widget import Widget

from sparktui.domain.events import EngineChanged, EngineState, Event, NodeLinkChanged
from sparktui.ui.app import AppSwitches, SparkApp
from tests.test_ui_panels import gb10_sample
from tests.ui_fakes import FakeBackend, make_app, settle
from tests.waiting import wait_until

#: The tick's period in the tests that count ticks: a fifth of the real 1 s, the same behaviour sooner.
FAST_TICK = 0.2
FAST = AppSwitches(tick_seconds=FAST_TICK)
#: Where samples must arrive within 1.5 ticks of each other to carry the tick: half the real tick, which
#: leaves a loaded machine's loop a quarter of a second to be late.
SAMPLED_TICK = 0.5


async def wait_for_ticks(app: SparkApp, count: int) -> None:
    """Wait until the app has ticked ``count`` more times."""
    target = app.ticks + count
    await wait_until(lambda: app.ticks >= target, f"{count} ticks", state=lambda: f"{app.ticks} of {target}")


async def post_and_apply(pilot: Pilot[Any], app: SparkApp, backend: FakeBackend, *events: Event) -> None:
    """Post ``events``, wait until a drain applied them and no further drain is armed (the one re-armed
    after writing log lines included), then for the screen to catch up."""
    target = app.events_applied + len(events)
    backend.post(*events)
    await wait_until(lambda: app.events_applied >= target and not app.drain_pending,
                     f"{len(events)} event(s) applied",
                     state=lambda: f"{app.events_applied} of {target}, drain pending: {app.drain_pending}")
    await pilot.pause()


async def test_idle_dashboard_schedules_no_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    app, backend = make_app(switches=FAST)
    refreshed: Counter[str] = Counter()
    drains = 0
    original_refresh = Widget.refresh
    original_drain = app.drain

    def counting_refresh(self: Widget, *args: Any, **kwargs: Any) -> Widget:
        refreshed[type(self).__name__ + ("#" + self.id if self.id else "")] += 1
        return original_refresh(self, *args, **kwargs)

    def counting_drain() -> int:
        nonlocal drains
        drains += 1
        return original_drain()

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        for name in ("spark1", "spark2"):
            backend.post(NodeLinkChanged(name, "connected"),
                         backend.sampled(name, gb10_sample(1, 10_000)),
                         backend.sampled(name, gb10_sample(2, 20_000)))
        backend.post(EngineChanged(EngineState.READY, "serving"))
        await settle(pilot, app)
        await wait_for_ticks(app, 2)   # what the first frames and the first ticks still lay out
        await pilot.pause()
        monkeypatch.setattr(Widget, "refresh", counting_refresh)
        monkeypatch.setattr(app, "drain", counting_drain)
        await wait_for_ticks(app, 3)   # three ticks, a dozen periods of the old 20 Hz drain
        await pilot.pause()
        assert drains == 0
        assert not app.drain_pending
        assert not refreshed, refreshed

        # The counters see work when there is some: one sample that changes what is drawn (the GPU busy),
        # one drain, its node repainted. (One that changes nothing drawn repaints nothing: the charts'
        # columns sit at fixed places in time, and the text is the same.)
        backend.post(backend.sampled("spark1", gb10_sample(3, 30_000, util=55.0)))
        await wait_until(lambda: drains == 1 and not app.drain_pending, "the sample's drain",
                         state=lambda: f"{drains} drains")
        await pilot.pause()
        assert drains == 1
        assert refreshed


async def test_a_log_line_repaints_the_log_and_lays_out_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # At ready the log grows by a metrics or access-log line every few seconds; Textual's virtual size
    # would lay the whole screen out for each. Once the scrollbar shows, a new line repaints the log only.
    from sparktui.domain.events import LogRecords
    from tests.test_ui_log import records

    app, backend = make_app()
    layouts: Counter[str] = Counter()
    original_refresh = Widget.refresh

    def counting_refresh(self: Widget, *args: Any, layout: bool = False, **kwargs: Any) -> Widget:
        if layout:
            layouts[type(self).__name__] += 1
        return original_refresh(self, *args, layout=layout, **kwargs)

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await post_and_apply(pilot, app, backend, LogRecords("vllm", records(
            [f"INFO 04-14 16:08:{i % 60:02d} [x.py:1] line {i}" for i in range(200)])))
        log = app.query_one("#log")
        await wait_until(lambda: log.show_vertical_scrollbar, "the log's scrollbar")
        await pilot.pause()
        before = log.max_scroll_y
        monkeypatch.setattr(Widget, "refresh", counting_refresh)
        for i in range(3):
            await post_and_apply(pilot, app, backend,
                                 LogRecords("vllm", records([f"INFO 04-14 16:09:0{i} [x.py:1] more {i}"])))
        assert not layouts, layouts
        assert log.max_scroll_y == before + 3          # the scroll range grew with the lines
        assert log.scroll_offset.y == log.max_scroll_y  # and the log still follows the end
        assert log.vertical_scrollbar.window_virtual_size == log.virtual_size.height


async def test_a_steps_progress_repaints_the_step_list_and_lays_out_only_a_new_height(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A start's step list changes with every step that begins or ends, its height rarely (the window keeps
    # its length): a layout of the whole screen cost a streaming start more than its frames did.
    from sparktui.domain.events import OperationChanged, OperationView, StepStatus, StepView

    def op(done: int, message: str = "") -> OperationView:
        steps = tuple(StepView(f"step {i}", "spark1", StepStatus.OK if i < done else
                               StepStatus.RUNNING if i == done else StepStatus.PENDING,
                               1.0 if i < done else None, message if i == done else "")
                      for i in range(14))
        return OperationView("start", steps)

    app, backend = make_app()
    layouts: Counter[str] = Counter()
    original_refresh = Widget.refresh

    def counting_refresh(self: Widget, *args: Any, layout: bool = False, **kwargs: Any) -> Widget:
        if layout:
            layouts[type(self).__name__ + ("#" + self.id if self.id else "")] += 1
        return original_refresh(self, *args, layout=layout, **kwargs)

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await post_and_apply(pilot, app, backend, OperationChanged(op(7)),
                             EngineChanged(EngineState.STARTING))
        box = app.query_one("#operation-steps")
        await wait_until(lambda: box.size.height > 0, "the step list laid out")
        # (the list's height is known once it has been laid out)
        await post_and_apply(pilot, app, backend, OperationChanged(op(8)))
        height = box.size.height
        monkeypatch.setattr(Widget, "refresh", counting_refresh)
        for done in (9, 10):
            await post_and_apply(pilot, app, backend, OperationChanged(op(done)))
        assert "⟳ step 10" in str(box.render()) and box.size.height == height
        assert not layouts["Static#operation-steps"], layouts
        # A step whose message wraps onto more lines: a new height, and the screen is laid out for it.
        await post_and_apply(pilot, app, backend, OperationChanged(op(10, "waiting for the GCS " * 12)))
        assert layouts["Static#operation-steps"] == 1, layouts
        assert "waiting for the GCS" in str(box.render())


async def test_stage_bars_keep_no_timers_and_a_countless_stage_sweeps_with_the_tick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Textual's ProgressBar updates itself every second (for an ETA no stage row shows) and sweeps a bar
    # without a total at 15 frames a second: during a start that was most of the frames drawn. A stage
    # bar has no timer; a running stage without a count moves on in the frame the 1 s tick draws anyway.
    from sparktui.ui.widgets.stage_bar import StageBar
    from tests.test_ui_panels import fed_timeline

    app, backend = make_app(switches=FAST, refresh_interval=FAST_TICK)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.STARTING, timeline=fed_timeline("Memory profiling takes")))
        await settle(pilot, app)
        bars = list(app.query(StageBar))
        assert len(bars) == 9
        countless = [bar for bar in bars if bar.total is None]
        assert countless, "a stage running without a count"
        for bar in bars:
            assert not [t for t in bar._timers if t._active.is_set()], bar.id
            assert bar.auto_refresh is None
        swept: list[tuple[float, bool]] = []  # (when, a countless stage's bar)
        original_refresh = Widget.refresh

        def counting_refresh(self: Widget, *args: Any, **kwargs: Any) -> Widget:
            if isinstance(self, StageBar):
                swept.append((time.monotonic(), self in countless))
            return original_refresh(self, *args, **kwargs)

        monkeypatch.setattr(Widget, "refresh", counting_refresh)
        ticks = app.ticks
        await wait_for_ticks(app, 2)
        await pilot.pause()
        ticked = app.ticks - ticks
        assert swept and all(countless_bar for _, countless_bar in swept), swept
        # The refreshes come in the ticks' moments (a bar's update and its sweep), not at a rate of their own.
        moments = [t for i, (t, _) in enumerate(swept) if i == 0 or t - swept[i - 1][0] > 0.3 * FAST_TICK]
        assert 2 <= len(moments) <= ticked, swept


async def test_a_start_draws_its_clock_in_the_node_samples_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    # During a start the engine panel's clock (stage times, a countless stage's sweep) moves once a second,
    # and so does each node's panel with its sample (on the nodes' whole seconds): one frame, not two.
    from sparktui.ui.widgets.node_panel import NodeSummary
    from sparktui.ui.widgets.stage_bar import StageBar
    from tests.test_ui_panels import fed_timeline

    app, backend = make_app(switches=AppSwitches(tick_seconds=SAMPLED_TICK),
                            refresh_interval=SAMPLED_TICK)
    moments: list[tuple[float, str]] = []
    original_refresh = Widget.refresh

    def counting_refresh(self: Widget, *args: Any, **kwargs: Any) -> Widget:
        kind = "clock" if isinstance(self, StageBar) else "sample" if isinstance(self, NodeSummary) else ""
        if kind:
            moments.append((time.monotonic(), kind))
        return original_refresh(self, *args, **kwargs)

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.STARTING, timeline=fed_timeline("Memory profiling takes")))
        await settle(pilot, app)
        await wait_for_ticks(app, 1)

        async def sample_every_tick() -> None:
            """The nodes' sampler: both nodes' samples each period, off the timer's phase."""
            await asyncio.sleep(0.4 * SAMPLED_TICK)
            for seq in range(1, 1000):
                backend.post(*(backend.sampled(name, gb10_sample(seq, seq * 10_000, util=float(seq)))
                               for name in ("spark1", "spark2")))
                await asyncio.sleep(SAMPLED_TICK)

        def count(kind: str) -> int:
            return [k for _, k in moments].count(kind)

        applied = app.events_applied
        sampler = asyncio.create_task(sample_every_tick())
        try:
            await wait_until(lambda: app.events_applied >= applied + 2, "both nodes' first samples")
            monkeypatch.setattr(Widget, "refresh", counting_refresh)
            await wait_until(lambda: count("clock") >= 3, "three ticks drawn", state=lambda: moments)
        finally:
            sampler.cancel()
        await pilot.pause()
        sample_times = [t for t, kind in moments if kind == "sample"]
        clock_times = [t for t, kind in moments if kind == "clock"]
        assert all(min(abs(t - s) for s in sample_times) < 0.05 for t in clock_times), moments

        # Samples stop (a node link down, say): the timer draws the clock again.
        moments.clear()
        await wait_until(lambda: count("clock") >= 1, "the timer's tick drawn", state=lambda: moments)


async def test_engine_changes_between_ticks_leave_the_sweep_where_it_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A start's engine changes come several times a second (each log batch moves the timeline): a countless
    # bar that swept on each of them drew a frame for each. It moves on with the tick only.
    from sparktui.ui.widgets.stage_bar import StageBar
    from tests.test_ui_panels import fed_timeline

    app, backend = make_app()
    swept: list[float] = []
    original_refresh = Widget.refresh

    def counting_refresh(self: Widget, *args: Any, **kwargs: Any) -> Widget:
        if isinstance(self, StageBar):
            swept.append(time.monotonic())
        return original_refresh(self, *args, **kwargs)

    async with app.run_test(size=(120, 40)) as pilot:
        timeline = fed_timeline("Memory profiling takes")
        backend.post(EngineChanged(EngineState.STARTING, timeline=timeline))
        await settle(pilot, app)
        await wait_for_ticks(app, 1)   # just after a tick: the real tick's second until the next
        ticks = app.ticks
        monkeypatch.setattr(Widget, "refresh", counting_refresh)
        for i in range(4):
            await post_and_apply(pilot, app, backend,
                                 EngineChanged(EngineState.STARTING, f"batch {i}", timeline=timeline))
        assert app.ticks == ticks, "no tick in the window"
        assert not swept, swept
