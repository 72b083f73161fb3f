"""Each run's true outcome in the history (issue 33): a run that reached ready and then crashed, wedged,
lost a node or was stopped is updated with its end; durations count from the head's start stamp, not from
when a process attached; the lines of one run written by several processes merge into one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.config import load_config
from sparktui.domain.engine_state import Record
from sparktui.domain.events import EngineState, OperationView
from sparktui.domain.history import HistoryStore, RunRecord
from sparktui.domain.readiness import Crash
from sparktui.domain.run_record import history_entry
from tests.test_engine_state import AFTER_READY, HAPPY, WALL0, Clock, machine, ray, serving, snapshot

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"


def records(effects: list[object]) -> list[Record]:
    return [e for e in effects if isinstance(e, Record)]


def started_and_ready(clock: Clock, *, stamp_age: float = 30.0) -> tuple[object, Record]:
    """A process that attached to an engine the head stamped ``stamp_age`` s ago, watched it reach ready."""
    truth = machine(clock)
    truth.discovered(EngineState.STARTING, "vLLM running (spark1 pid 7)")
    truth.engine_started(5000.0, clock.wall() - stamp_age)     # the head's clock differs: only age counts
    truth.timeline(snapshot(HAPPY, 0.5))
    clock.advance(12)
    truth.timeline(snapshot(HAPPY))
    truth.verified(0.25, "0.17.1")
    truth.ray(ray("spark1", "spark2"))
    return truth, records(truth.take_effects())[0]


def test_an_attached_start_is_timed_from_the_heads_stamp_not_from_the_attach() -> None:
    clock = Clock()
    _, start = started_and_ready(clock, stamp_age=30.0)
    assert start.outcome == "ready" and start.stamp == 5000.0
    assert start.ready_seconds == 42.0          # 30 s before the attach + 12 s watched, not 12 s
    assert start.started_at == WALL0 + 100.0 - 30.0


def test_attached_after_ready_the_ready_time_is_the_logs_not_the_attach() -> None:
    clock = Clock()
    truth = machine(clock)
    truth.engine_started(5000.0, clock.wall() - 3600.0)        # ready long ago
    truth.timeline(snapshot(HAPPY))                             # the log read whole: ready already
    truth.discovered(EngineState.STARTING, "vLLM running (spark1 pid 7)")
    truth.verified(0.25)
    (start,) = records(truth.take_effects())
    stages = sum(s.seconds or 0.0 for s in snapshot(HAPPY).stages if s.status == "done")
    assert start.ready_seconds == stages and start.ready_seconds < 3600.0
    # …and the serving watch's "crashed after" counts from that ready, not from the attach.
    assert truth.ready_at == clock() - (3600.0 - stages)


def test_a_crash_after_ready_updates_the_run_with_its_end_and_cause() -> None:
    clock = Clock()
    truth, _ = started_and_ready(clock)
    clock.advance(200)
    truth.timeline(snapshot(AFTER_READY))
    assert truth.state is EngineState.FAILED
    (end,) = records(truth.take_effects())
    assert end.end == "crashed" and end.stamp == 5000.0 and end.ended_at == clock.wall()
    assert end.cause and "worker_died" in end.cause
    assert end.ready_seconds is None       # the start's line keeps its ready time


def test_a_wedge_updates_the_run_once() -> None:
    clock = Clock()
    truth, _ = started_and_ready(clock)
    truth.serving(serving(running=2, tokens=500))
    clock.advance(61)
    truth.serving(serving(running=2, tokens=500))
    truth.tick()
    assert truth.state is EngineState.WEDGED
    (end,) = records(truth.take_effects())
    assert end.end == "wedged" and end.cause and end.cause.startswith("wedged: 2 request(s) running")
    truth.crashed(Crash(clock(), 90.0, "health", "/health failing"))
    assert records(truth.take_effects()) == []     # one end per run


def test_a_restart_begins_a_new_run_with_no_stamp_until_it_is_read() -> None:
    clock = Clock()
    truth, _ = started_and_ready(clock)

    truth.operation(OperationView("restart", running=True))
    (end,) = records(truth.take_effects())
    assert end.end == "restarted"
    assert truth.run_stamp is None and truth.run_started == clock.wall()
    truth.engine_started(6000.0, clock.wall() + 5)
    assert truth.run_stamp is None           # ignored while the operation runs (the previous run's stamp)


def test_history_merges_a_runs_lines_and_keeps_its_end(tmp_path: Path) -> None:
    config = load_config(CONFIG)
    store = HistoryStore(tmp_path / "runs.jsonl")
    start = Record("ready", WALL0, 42.0, 5000.0)
    # start --wait writes the start; the dashboard, attached, writes the same start (later) and the end.
    store.append(history_entry(start, snapshot(HAPPY), config))
    store.append(history_entry(Record("ready", WALL0 + 0.4, 44.0, 5000.0), snapshot(HAPPY), config))
    end = Record("ready", WALL0 + 0.4, None, 5000.0, end="crashed", ended_at=WALL0 + 300.0,
                 cause="worker_died after ready: Worker died")
    store.append(history_entry(end, snapshot(AFTER_READY), config))
    store.append(history_entry(Record("ready", WALL0 + 400.0, 30.0, 5400.0), snapshot(HAPPY), config))
    first, second = store.load()
    assert first.stamp == 5000.0 and first.outcome == "ready" and first.ready_seconds == 42.0
    assert first.end == "crashed" and first.failure == "crashed: worker_died after ready: Worker died"
    assert first.up_seconds == 300.0 and first.stages      # the start's stages kept
    assert first.log_file == "vllm-19700101-012320.log"
    assert second.end is None and second.ready_seconds == 30.0


def test_history_reads_lines_written_before_runs_had_stamps(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    old = RunRecord(WALL0, "m", "host", "ready", {"weights": 3.0}, 40.0)
    path.write_text(old.to_json().replace(',"stamp":null,"end":null,"ended_at":null,"log_file":null', "")
                    + "\n")
    (run,) = HistoryStore(path).load()
    assert run == old


def test_history_says_how_a_run_that_served_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from sparktui.cli import main

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    config = load_config(CONFIG)
    store = HistoryStore()
    store.append(history_entry(Record("ready", WALL0, 42.0, 5000.0), snapshot(HAPPY), config))
    store.append(history_entry(Record("ready", WALL0, None, 5000.0, end="wedged", ended_at=WALL0 + 600.0,
                                      cause="wedged: 2 request(s) running"), snapshot(HAPPY), config))
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert "ready, wedged after 10m00s (wedged: 2 request(s) running)" in out, out
    assert main(["history", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["outcome"] == "ready" and run["end"] == "wedged" and run["ready_seconds"] == 42.0
    assert run["ended_at"] == WALL0 + 600.0 and run["log_file"] == "vllm-19700101-012320.log"
