"""The start's ETA as numbers (``sparktui.domain.start_eta``); the panel's words: tests/test_ui_eta.py."""

from __future__ import annotations

import pytest

from sparktui.domain.events import StageView
from sparktui.domain.history import RunRecord
from sparktui.domain.start_eta import StartEta, start_eta

STAGES = {"config": 5.0, "placement": 10.0, "weights": 60.0, "kv_cache": 5.0, "cuda_graphs": 15.0, "api": 1.0}
RUNS = [RunRecord(1.0 + i, "m", "i", "ready", stages=STAGES) for i in range(3)]


def views(running: str, done: float | None = None, total: float | None = None) -> list[StageView]:
    names = list(STAGES)
    at = names.index(running)
    return [StageView(n, n, "done" if i < at else ("running" if i == at else "pending"),
                      done=done if i == at else None, total=total if i == at else None)
            for i, n in enumerate(names)]


def test_no_eta_without_a_running_stage_or_an_earlier_run() -> None:
    rows = views("weights")
    assert start_eta(rows, None, None, RUNS) is None
    assert start_eta(rows, rows[2], 5.0, []) is None


def test_the_remaining_time_is_the_running_stage_and_every_stage_ahead() -> None:
    rows = views("weights")
    eta = start_eta(rows, rows[2], 20.0, RUNS)
    # 40 s left of weights, then kv_cache 5 + cuda_graphs 15 + api 1; the runs took 96 s to ready.
    assert eta == StartEta(ready_in=pytest.approx(61.0), typical=96.0, runs=3)


def test_progress_blends_the_history_with_this_runs_pace() -> None:
    rows = views("weights", 6, 12)    # half the shards in 10 s: this run is faster than the usual 60 s
    eta = start_eta(rows, rows[2], 10.0, RUNS)
    assert eta is not None and eta.ready_in == pytest.approx((30.0 + 10.0) / 2 + 21.0)


def test_a_stage_slower_than_usual_gives_no_remaining_time() -> None:
    rows = views("cuda_graphs")
    eta = start_eta(rows, rows[4], 27.0, RUNS)
    assert eta is not None and eta.ready_in is None
    assert eta.overdue == "taking longer than usual; last 3 runs 15s"


def test_one_earlier_run_is_counted_as_one() -> None:
    rows = views("api")
    eta = start_eta(rows, rows[-1], 0.5, RUNS[:1])
    assert eta is not None and eta.runs == 1 and eta.typical == 96.0
