"""The serving view with speculative decoding's acceptance, the figure against the last benchmark and
"slower than it should", at the smallest terminal (80×24); an engine with neither shows nothing more."""

from __future__ import annotations

from pathlib import Path

from sparktui.domain.events import EngineChanged, EngineState, ServingSampled
from sparktui.domain.pace_reading import PaceReading, SlowServing
from sparktui.domain.serving import ServingSnapshot, SpecAcceptance
from sparktui.ui.widgets.engine_panel import ServingView
from tests.ui_fakes import make_app, settle

SLOW = SlowServing("throughput", 360.0, 24.0, 40.0, 1, 0.26, 0.6,
                   "speculative decoding's acceptance dropped")


def _snap(pace: PaceReading | None, spec: SpecAcceptance | None) -> ServingSnapshot:
    return ServingSnapshot(at=0.0, requests_running=1, requests_waiting=0, kv_cache_usage=0.02,
                           generation_tokens_per_s=24.0, prompt_tokens_per_s=80.0, spec=spec, pace=pace)


async def _serving_text(snap: ServingSnapshot, tmp_path: Path | None = None) -> str:
    app, backend = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.READY), ServingSampled(snap))
        await settle(pilot, app)
        if tmp_path is not None:
            app.save_screenshot(str(tmp_path / "serving.svg"))
        return str(app.query_one(ServingView).query_one("#serving-text").render())


async def test_acceptance_bench_ratio_and_the_slowdown_at_80x24(tmp_path: Path) -> None:
    text = await _serving_text(_snap(PaceReading(SLOW, True, 0.6, 0.6), SpecAcceptance(0.26, 300.0, 1.78)),
                               tmp_path)
    assert "60 % of bench  accept 26 %  len 1.78" in text
    assert "slower than it should (6 min): 24 vs 40 tok/s, 60 %" in text


async def test_nothing_more_without_them() -> None:
    text = await _serving_text(_snap(None, None))
    assert "accept" not in text and "bench" not in text and "slower" not in text


async def test_one_stream_against_the_bench_and_the_decode_ceiling() -> None:
    text = await _serving_text(_snap(PaceReading(None, False, 0.81, None, 38.0, 55.0), None))
    assert "81 % of bench · 69 % of ceiling 55" in text
