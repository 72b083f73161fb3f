"""The engine panel says when vLLM loaded its compiled graphs from the cache (a warm start) instead of
calling the compile stage merely skipped; a start that compiled shows the compile's time."""

from __future__ import annotations

from pathlib import Path

from sparktui.domain.engine_view import timeline_view
from sparktui.domain.events import EngineChanged, EngineState
from sparktui.domain.logs.stages import Timeline
from sparktui.sim.recording import DGX_SPARK_RECORDING, recording_text
from sparktui.ui.widgets.engine_panel import StageRow
from tests.ui_fakes import FIXED_NOW, make_app, settle

DATA = Path(__file__).parent / "data" / "vllm-logs"


def _fed(text: str) -> Timeline:
    timeline = Timeline()
    timeline.feed_text(text, now=FIXED_NOW)
    return timeline


async def test_compile_row_says_cache_hit_on_a_warm_start() -> None:
    warm = next(DATA.glob("12_*")).read_text(errors="replace")  # "Directly load the compiled graph(s) …"
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.STARTING, timeline=timeline_view(_fed(warm).snapshot())))
        await settle(pilot, app)
        row = app.query_one("#stage-compile", StageRow)
        assert row.has_class("-skipped")
        assert str(row.query_one(".stage-info").render()) == "cache hit"
        # A cold start (the DGX Spark recording compiles): the compile's time, no "cache hit".
        backend.post(EngineChanged(EngineState.STARTING,
                                   timeline=timeline_view(_fed(recording_text(DGX_SPARK_RECORDING)).snapshot())))
        await settle(pilot, app)
        assert row.has_class("-done")
        assert "cache hit" not in str(row.query_one(".stage-info").render())
