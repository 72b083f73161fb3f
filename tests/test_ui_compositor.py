"""The main screen's compositor (``sparktui/ui/compositor.py``) renders fewer widgets for a partial update
and writes the same bytes to the terminal as Textual's own: every frame of a whole demo start (stages, log
lines, node samples, the ready state) is rendered both ways and compared."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from textual._compositor import ChopsUpdate, Compositor

from sparktui.sim.demo import DemoBackend
from sparktui.ui.app import SparkApp
from sparktui.ui.compositor import LeanCompositor, MainScreen
from tests.waiting import wait_until


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_every_frame_of_a_start_is_written_as_textual_writes_it(
        monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]) -> None:
    frames: Counter[str] = Counter()
    lean_update = LeanCompositor.render_partial_update

    def both_ways(self: LeanCompositor) -> ChopsUpdate | None:
        dirty = self._dirty_regions.copy()
        stock = Compositor.render_partial_update(self)   # Textual's: every widget whose clip overlaps
        self._dirty_regions.update(dirty)
        lean = lean_update(self)
        if stock is None or lean is None:
            assert stock is lean
            return lean
        console = app.console
        assert lean.render_segments(console) == stock.render_segments(console)
        frames["compared"] += 1
        return lean

    monkeypatch.setattr(LeanCompositor, "render_partial_update", both_ways)
    backend = DemoBackend(seed=7, speed=12.0)   # the story at twelve times its pace: ready in ~6 s
    app = SparkApp(backend, roles=backend.node_roles, cluster_name="demo")
    async with app.run_test(size=size) as pilot:
        assert isinstance(app.screen, MainScreen)
        def shown() -> str:
            return str(app.query_one("#engine-state").render()).lower()

        # Through the start to ready (a loaded machine takes longer), then some frames of serving.
        await wait_until(lambda: "ready" in shown() or "serving" in shown(), "ready", timeout=60, pilot=pilot,
                         state=shown)
        at_ready = frames["compared"]
        await wait_until(lambda: frames["compared"] >= at_ready + 5, "five frames at ready", pilot=pilot)
    assert frames["compared"] > 20, frames


async def test_a_panel_frame_renders_only_what_overlaps_the_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node sample's frame at ready: the header, footer and log pane no longer render with it."""
    from textual.widget import Widget

    backend = DemoBackend(seed=7, frozen_at=75.0)   # serving, and nothing moves but what the test moves
    app = SparkApp(backend, roles=backend.node_roles, cluster_name="demo")
    rendered: Counter[str] = Counter()
    original = Widget.render_lines

    def counting(self: Widget, crop: Any) -> Any:
        rendered[type(self).__name__] += 1
        return original(self, crop)

    async with app.run_test(size=(160, 50)) as pilot:
        for _ in range(5):
            await asyncio.sleep(0.2)
            await pilot.pause()
        monkeypatch.setattr(Widget, "render_lines", counting)
        summary = app.query("NodeSummary").first()
        summary.refresh()
        await pilot.pause()
        await asyncio.sleep(0.05)
        await pilot.pause()
    assert rendered["NodeSummary"] >= 1
    assert not {"Header", "Footer", "LogPane", "EnginePanel"} & set(rendered), rendered
