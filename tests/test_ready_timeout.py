"""vLLM's engine-ready timeout is set from the run history: the slowest recent start that reached ready
× a margin, never below vLLM's default, generous with no history, and the person's ``engine.env`` wins;
the plans carry it on the ``vllm serve`` line, visible in ``--dry-run``."""

from __future__ import annotations

import shlex
from pathlib import Path

from sparktui.config import load_config
from sparktui.domain.history import RunRecord, setup_of
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.ready_timeout import (
    ENV,
    FIRST_START_SECONDS,
    VLLM_DEFAULT_SECONDS,
    engine_ready_timeout,
)

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"


def run(outcome: str, ready: float | None, stages: dict[str, float] | None = None,
        at: float = 0.0) -> RunRecord:
    return RunRecord(at, "m", "i", outcome, stages or {}, ready)


def test_no_start_that_reached_ready_gives_the_first_start_allowance() -> None:
    timeout = engine_ready_timeout([run("failed", None), run("stopped", None)], {})
    assert timeout is not None and timeout.seconds == FIRST_START_SECONDS
    assert "no earlier start" in timeout.why


def test_the_slowest_recent_start_times_the_margin() -> None:
    runs = [run("ready", 2000.0, at=0), run("ready", 500.0, at=1), run("ready", 800.0, at=2)]
    timeout = engine_ready_timeout(runs, {})
    assert timeout is not None and timeout.seconds == 4000
    assert timeout.env() == {ENV: "4000"}


def test_only_the_recent_starts_count_and_never_below_vllms_default() -> None:
    old_slow = [run("ready", 5000.0, at=0)]
    recent_fast = [run("ready", 60.0, at=i) for i in range(1, 6)]
    timeout = engine_ready_timeout(old_slow + recent_fast, {})
    assert timeout is not None and timeout.seconds == VLLM_DEFAULT_SECONDS


def test_a_run_without_its_ready_time_counts_by_its_stages() -> None:
    timeout = engine_ready_timeout([run("ready", None, {"weights": 400.0, "compile": 300.0})], {})
    assert timeout is not None and timeout.seconds == 1400


def test_the_persons_own_value_wins() -> None:
    assert engine_ready_timeout([run("ready", 2000.0)], {ENV: "7200"}) is None


def test_the_serve_line_carries_it_in_both_plans() -> None:
    config = load_config(CONFIG)
    timeout = engine_ready_timeout([run("ready", 900.0)], {})
    assert timeout is not None
    for plan in (P.build_start_plan(config, ready_timeout=timeout),
                 P.build_vllm_restart_plan(config, ready_timeout=timeout)):
        serve = next(s for s in plan.steps if s.name == "vllm serve")
        words = list(serve.argv)
        assert f"{ENV}=1800" in words and words.index(f"{ENV}=1800") < words.index("serve"), shlex.join(words)
        assert any("vLLM waits 1800 s" in note for note in plan.notes)
    plain = next(s for s in P.build_start_plan(config).steps if s.name == "vllm serve")
    assert not any(w.startswith(f"{ENV}=") for w in plain.argv)


def test_runs_are_remembered_under_the_image_that_runs() -> None:
    engine = load_config(CONFIG).engine
    assert setup_of(engine) == (engine.model, engine.image if engine.runtime == "docker" else "host")
