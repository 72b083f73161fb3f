"""Run history: the JSON-lines store, ETAs from earlier runs, and `sparktui history`."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import pytest

from sparktui.cli import main
from sparktui.domain.history import (
    STAGE_ORDER,
    HistoryStore,
    RunRecord,
    default_history_path,
    format_duration,
    format_remaining,
    ready_eta,
    record_from_timeline,
    record_run,
    runs_for,
    stage_bar_text,
    stage_eta,
)
from sparktui.domain.logs.stages import Failure, StageProgress, StageSnapshot, TimelineSnapshot
from tests.json_times import bad_times

MODEL, IMAGE = "/models/qwen3-32b", "nvcr.io/nvidia/vllm:25.11-py3"


def run(started: float, weights: float, model: str = MODEL, image: str = IMAGE, **stages: float) -> RunRecord:
    return record_run(started_at=started, model=model, image=image, outcome="ready",
                      stage_seconds={"config": 5.0, "weights": weights, **stages}, ready_seconds=weights + 60)


def test_default_path_follows_xdg(tmp_path: Path) -> None:
    assert default_history_path({"XDG_STATE_HOME": str(tmp_path), "HOME": "/h"}) == \
        tmp_path / "sparktui" / "runs.jsonl"
    assert default_history_path({"HOME": "/h"}) == Path("/h/.local/state/sparktui/runs.jsonl")
    # a relative XDG_STATE_HOME is invalid per the spec and ignored
    assert default_history_path({"XDG_STATE_HOME": "rel", "HOME": "/h"}) == \
        Path("/h/.local/state/sparktui/runs.jsonl")


def test_store_round_trip_skips_bad_lines(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "state" / "runs.jsonl")
    assert store.load() == []
    a = run(100.0, 890.0)
    b = record_run(started_at=50.0, model=MODEL, image=IMAGE, outcome="failed",
                   stage_seconds={"config": 4.0, "weights": None}, failure="oom")
    store.append(a)
    with store.path.open("a") as f:
        f.write("{not json\n\n[1,2]\n{\"model\": \"x\"}\n")
    store.append(b)
    loaded = store.load()
    assert loaded == [b, a]                    # sorted by start time, junk skipped
    assert loaded[0].stages == {"config": 4.0}
    line = store.path.read_text().splitlines()[0]
    assert json.loads(line)["v"] == 1


def test_runs_are_keyed_by_model_and_image() -> None:
    runs = [run(1, 100), run(2, 200, image="other:1"), run(3, 300, model="other")]
    assert [r.started_at for r in runs_for(runs, MODEL, IMAGE)] == [1]


def test_eta_with_progress_matches_the_issue_example() -> None:
    runs = [run(1, 890.0), run(2, 890.0), run(3, 890.0)]
    # weights 43 % after 6m20s (this run's pace agrees with history)
    eta = stage_eta(runs, "weights", elapsed=383.0, fraction=0.43)
    assert eta.runs == 3 and eta.typical_seconds == 890.0
    assert eta.remaining_seconds == pytest.approx(890 * 0.57, rel=0.02)
    assert eta.describe() == "about 8 min left; last 3 runs 14m50s"


def test_eta_blends_this_runs_pace() -> None:
    # a warm page cache: this run is twice as fast as history says
    runs = [run(1, 600.0)]
    eta = stage_eta(runs, "weights", elapsed=150.0, fraction=0.5)
    assert eta.remaining_seconds == pytest.approx((300.0 + 150.0) / 2)
    assert eta.describe().endswith("last run 10m00s")


def test_eta_without_progress_and_overdue() -> None:
    runs = [run(1, 100.0), run(2, 120.0), run(3, 500.0), run(4, 110.0)]
    eta = stage_eta(runs, "weights", elapsed=30.0)
    assert eta.typical_seconds == 120.0       # median of the newest three: 120, 500, 110
    assert eta.remaining_seconds == pytest.approx(90.0)
    late = stage_eta(runs, "weights", elapsed=200.0)
    assert late.overdue and late.remaining_seconds is None
    assert late.describe() == "taking longer than usual; last 3 runs 2m00s"


def test_no_history_no_eta() -> None:
    eta = stage_eta([], "weights", elapsed=10.0, fraction=0.2)
    assert eta.typical_seconds is None and eta.describe() == ""
    assert ready_eta([], "weights", 10.0) is None


def test_ready_eta_adds_the_stages_ahead() -> None:
    runs = [run(1, 600.0, cuda_graphs=40.0, kv_cache=20.0, api=2.0)]
    total = ready_eta(runs, "weights", elapsed_in_stage=300.0, fraction=0.5, done={"config"})
    assert total == pytest.approx(300.0 + 20.0 + 40.0 + 2.0)


def test_formatting() -> None:
    assert format_duration(3.21) == "3.2s"
    assert format_duration(42) == "42s"
    assert format_duration(890) == "14m50s"
    assert format_duration(7380) == "2h03m"
    assert format_remaining(12) == "about 10 s"
    # The last seconds are not "about 5 s" for as long as the stage overruns: that reads as stuck.
    assert format_remaining(4.9) == format_remaining(0) == "a few seconds"
    assert format_remaining(507) == "about 8 min"
    assert format_remaining(4200) == "about 1h 10m"


def test_history_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert main(["history"]) == 0
    assert "no runs recorded" in capsys.readouterr().out
    store = HistoryStore()
    store.append(run(1_790_000_000.0, 890.0, cuda_graphs=41.0))
    store.append(record_run(started_at=1_790_000_500.0, model=MODEL, image=IMAGE, outcome="failed",
                            stage_seconds={"config": 4.0}, failure="oom: CUDA out of memory"))
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert "qwen3-32b" in out and "14m50s" in out and "failed" in out and "oom" in out
    assert main(["history", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["outcome"] for r in data] == ["ready", "failed"]
    assert bad_times(data) == [] and data[0]["started_at"] == 1_790_000_000.0   # epoch seconds
    assert data[0]["stages"]["weights"] == 890.0


def test_record_and_eta_from_a_log_timeline() -> None:
    def stage(
        name: str, status: str, seconds: float | None, progress: StageProgress | None = None
    ) -> StageSnapshot:
        return StageSnapshot(name, status, None, None, seconds, progress)

    failed = TimelineSnapshot(
        outcome="failed", vllm_version="0.19.2", model=MODEL,
        stages=(stage("config", "done", 4.0), stage("placement", "done", 12.5),
                stage("weights", "failed", 30.0), stage("compile", "pending", None)),
        facts=MappingProxyType({}),
        failure=Failure("oom", "weights", "torch.OutOfMemoryError: CUDA out of memory", "lower …"),
        nodes=("spark1",), current="weights",
    )
    rec = record_from_timeline(failed, started_at=5.0, model=MODEL, image=IMAGE)
    assert rec.outcome == "failed" and rec.vllm_version == "0.19.2"
    assert rec.stages == {"config": 4.0, "placement": 12.5}
    assert rec.failure == "oom: torch.OutOfMemoryError: CUDA out of memory"

    runs = [run(1, 890.0), run(2, 890.0), run(3, 890.0)]
    loading = stage("weights", "running", 383.0, StageProgress(43, 100))
    assert stage_bar_text(runs, loading) == "weights 43% — about 8 min left; last 3 runs 14m50s"
    assert stage_bar_text([], loading) == "weights 43%"


def test_stage_order_is_the_log_timelines() -> None:
    # history keeps its own copy so that `sparktui --help` need not import the log parser; it must not drift.
    from sparktui.domain.logs import STAGES

    assert STAGE_ORDER == STAGES
