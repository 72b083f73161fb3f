"""A failure explained in full at every size (issue 31): the ``oom`` demo's diagnosis — the node (spark2) and
the whole hint — on the screen at 120×40 and 80×24 without scrolling; the engine column scrolls to the raw
message by keyboard (``e`` gives it the keys) and by the mouse wheel."""

from __future__ import annotations

from typing import Any

import pytest
from textual import events
from textual.pilot import Pilot

from sparktui.sim.demo import DemoBackend
from sparktui.ui.app import SparkApp
from sparktui.ui.widgets.engine_panel import EnginePanel
from sparktui.ui.widgets.log_pane import LogPane


def oom_app() -> SparkApp:
    backend = DemoBackend(seed=7, frozen_at=70.0, scenario="oom")
    return SparkApp(backend, roles=backend.node_roles, cluster_name="demo")


async def failed(pilot: Pilot[Any]) -> EnginePanel:
    """The demo's start has failed and the screen shows it."""
    app = pilot.app
    assert isinstance(app, SparkApp)
    engine = app.query_one(EnginePanel)
    for _ in range(50):
        await pilot.pause()
        app.drain()
        if engine.query_one("#engine-failure").display:
            break
    await pilot.pause()
    engine.scroll_home(animate=False, immediate=True)
    await pilot.pause()
    return engine


def engine_text(app: SparkApp) -> str:
    """What the screen shows inside the engine column, its lines' words joined (the hint wraps)."""
    box = app.query_one(EnginePanel).region
    strips = app.screen._compositor.render_strips()[box.y:box.bottom]
    return " ".join(" ".join(strip.crop(box.x, box.right).text.strip("│ ") for strip in strips).split())


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_oom_hint_and_its_node_are_on_screen(size: tuple[int, int]) -> None:
    app = oom_app()
    async with app.run_test(size=size) as pilot:
        await failed(pilot)
        text = engine_text(app)
        assert "oom on spark2 · in KV cache" in text
        assert "hint: Out of GPU memory during kv_cache. Lower --gpu-memory-utilization" in text
        assert "stop other GPU processes first." in text   # the hint's last words: all of it shows
        # The column scrolls inside its own box: the screen itself never overflows (no scrollbar of its own
        # taking two columns from the log).
        assert app.screen.max_scroll_y == 0 and not app.screen.show_vertical_scrollbar


async def test_the_engine_column_scrolls_by_keyboard() -> None:
    app = oom_app()
    async with app.run_test(size=(120, 40)) as pilot:
        engine = await failed(pilot)
        assert engine.max_scroll_y > 0   # the raw message and the stage bars run past the column
        await pilot.press("e")
        assert engine.has_focus
        await pilot.press("pagedown")
        await pilot.wait_for_scheduled_animations()
        assert engine.scroll_y > 0
        await pilot.press("home")
        await pilot.wait_for_scheduled_animations()
        assert engine.scroll_y == 0
        await pilot.press("j")
        await pilot.wait_for_scheduled_animations()
        assert engine.scroll_y == 1
        await pilot.press("e")   # the keys back to the log
        assert app.query_one(LogPane).log_widget.has_focus


async def test_the_engine_column_scrolls_by_mouse_wheel() -> None:
    app = oom_app()
    async with app.run_test(size=(120, 40)) as pilot:
        engine = await failed(pilot)
        x, y = engine.region.center
        for _ in range(3):   # as the terminal reports a wheel turn: at the pointer's place on the screen
            app.post_message(events.MouseScrollDown(None, x, y, 0, 1, 0, False, False, False, x, y))
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        assert engine.scroll_y > 0
        assert not engine.has_focus   # the wheel scrolls what is under it; the keys stay with the log
