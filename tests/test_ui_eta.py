"""One clear ETA (issues 15 and 31): the line says one remaining time, the whole start's, next to the run
history it rests on (and the two agree); the last seconds never read as a stuck "about 5 s"; a stage slower
than usual says so instead; and the ETA row keeps its place for the whole start so the buttons below never
jump between stages."""

from __future__ import annotations

import re

import pytest

from sparktui.domain.events import EngineChanged, EngineState, StageView
from sparktui.domain.history import RunRecord, ready_eta
from sparktui.ui import format as fmt
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


REMAINING = re.compile(r"about \d+(?:h \d+m| s| min)|a few seconds")


def test_the_last_seconds_do_not_stick_at_about_5_s() -> None:
    views = [*_views("api")[:-1], StageView("api", "api", "running")]
    text = eta_text(views, views[-1], 0.8, RUNS).plain
    assert text == "ready in a few seconds; the last 3 runs took 1m36s"
    slow = StageView("cuda_graphs", "CUDA graphs", "running")
    late = eta_text(_views("cuda_graphs"), slow, 27.0, RUNS).plain
    assert late == "taking longer than usual; last 3 runs 15s"
    assert not REMAINING.search(late)    # slower than usual: no remaining time can be known


def test_the_eta_says_one_remaining_time_that_agrees_with_the_history() -> None:
    typical = sum(STAGES.values())
    done = 0.0
    for name, seconds in STAGES.items():
        for share in (0.0, 0.5, 0.9):
            views = _views(name, round(share * 10) if share else None, 10 if share else None)
            text = eta_text(views, views[list(STAGES).index(name)], seconds * share, RUNS).plain
            assert len(REMAINING.findall(text)) == 1, text
            assert text.endswith(f"; the last 3 runs took {fmt.duration(typical)}"), text
            # Elapsed + remaining = the history's time to ready (this start goes exactly at its pace).
            left = ready_eta(RUNS, name, seconds * share, share or None,
                             done=[v.name for v in views if v.status == "done"])
            assert left is not None and done + seconds * share + left == pytest.approx(typical, abs=0.5)
        done += seconds
    one = eta_text(_views("weights", 6, 30), _views("weights", 6, 30)[2], 12.0, RUNS[:1]).plain
    assert one == "ready in about 1 min; the last run took 1m36s"


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
