"""One clear ETA per stage and overall (issue 15): the last seconds never read as a stuck "about 5 s", the
overall figure is left out when it says no more than the stage's, and the ETA row keeps its place for the
whole start so the buttons below never jump between stages."""

from __future__ import annotations

from sparktui.domain.events import EngineChanged, EngineState, StageView
from sparktui.domain.history import RunRecord
from sparktui.ui.app import SparkApp
from sparktui.ui.widgets.engine_panel import eta_text
from tests.ui_fakes import FakeBackend, settle

STAGES = {"config": 5.0, "placement": 10.0, "weights": 60.0, "kv_cache": 5.0, "cuda_graphs": 15.0, "api": 1.0}
RUNS = [RunRecord(1.0 + i, "m", "i", "ready", stages=STAGES) for i in range(3)]


def _views(running: str, done: float | None = None, total: float | None = None) -> list[StageView]:
    names = list(STAGES)
    at = names.index(running)
    return [StageView(n, n, "done" if i < at else ("running" if i == at else "pending"),
                      done=done if i == at else None, total=total if i == at else None)
            for i, n in enumerate(names)]


def test_the_last_seconds_do_not_stick_at_about_5_s() -> None:
    views = _views("cuda_graphs", done=34, total=35)
    running = views[4]
    text = eta_text(views, running, 14.5, RUNS).plain
    assert text.startswith("a few seconds left; last 3 runs 15s")
    late = eta_text(views, StageView("cuda_graphs", "CUDA graphs", "running"), 27.0, RUNS).plain
    assert late.startswith("taking longer than usual; last 3 runs 15s")


def test_overall_eta_only_when_it_says_more() -> None:
    early = eta_text(_views("weights", 6, 30), _views("weights", 6, 30)[2], 12.0, RUNS).plain
    assert "left; last 3 runs 1m00s · ready in about 1 min" in early
    # The last stage ahead: its time is the time to ready, said once.
    views = [*_views("api")[:-1], StageView("api", "api", "running")]
    assert " · ready in" not in eta_text(views, views[-1], 0.2, [RunRecord(1.0, "m", "i", "ready",
                                                                           stages={"api": 20.0})]).plain


async def test_the_eta_row_keeps_its_place_through_a_start() -> None:
    backend = FakeBackend()
    app = SparkApp(backend, roles={"spark1": "head", "spark2": "worker"}, history=lambda: RUNS)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        buttons_y = []
        for state in (EngineState.PREFLIGHT, EngineState.STARTING, EngineState.VERIFYING):
            backend.post(EngineChanged(state, "step"))
            await settle(pilot, app)
            assert app.query_one("#engine-eta").display
            buttons_y.append(app.query_one("#engine-buttons").region.y)
        assert len(set(buttons_y)) == 1
        backend.post(EngineChanged(EngineState.READY))
        await settle(pilot, app)
        assert not app.query_one("#engine-eta").display
