"""`sparktui supervise` on the test bed, where it must stop trying: an out-of-memory at start is tried once
more (``oom_retries``), then "needs a person" with the log's sizing advice, never a loop into the same OOM;
an engine that keeps crashing spends the budget (``max_restarts`` in ``window``), then "given up", told."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_helpers import run_sparktui
from tests.supervise_helpers import Supervise, supervised_bed, vllm_running
from tests.testbed import Testbed
from tests.waiting import wait_until_sync

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

ACTIONS = ("start", "restart", "full_restart")


def nothing_more_for(supervisor: Supervise, seconds: float) -> None:
    """No start or restart decided for ``seconds`` after its last line (bounded by a clock, not a sleep)."""
    before = len(supervisor.lines)
    deadline = time.monotonic() + seconds
    wait_until_sync(lambda: time.monotonic() >= deadline, f"{seconds:.0f} s of watching", timeout=seconds + 5,
                    interval=0.5)
    later = [line for line in supervisor.lines[before:]
             if line.get("event") == "decision" and line.get("action") in ACTIONS]
    assert not later, later


def test_an_oom_at_start_is_tried_once_more_then_needs_a_person(make_testbed: Callable[..., Testbed],
                                                               tmp_path: Path) -> None:
    bed, config, _port = supervised_bed(make_testbed, tmp_path, env={"SPARKTUI_STANDIN_FAIL": "oom"},
                                        oom_retries=1)
    out = run_sparktui("--config", str(config), "start", "--wait", timeout=300)
    assert out.returncode != 0, out.stdout
    supervisor = Supervise(config)
    try:
        supervisor.wait(lambda line: line.get("event") == "decision" and line.get("action") == "needs_person",
                        "needs a person", timeout=240)
        tries = [line for line in supervisor.lines
                 if line.get("event") == "decision" and line.get("action") in ACTIONS]
        # The failed start seen as an OOM gets one retry; a start seen first as "not running" is the other.
        assert 1 <= len(tries) <= 2, tries
        needs = supervisor.decisions("needs_person")[0]
        assert needs["cause"] == "oom", needs
        assert "gpu_memory_utilization" in needs["detail"] or "max_model_len" in needs["detail"], needs
        supervisor.wait(lambda line: line.get("event") == "notice"
                        and "out of memory again" in line.get("detail", ""),
                        "needing a person told (a notice, sent to [notify])", timeout=30)
        nothing_more_for(supervisor, 8)
        assert not vllm_running(bed)
    finally:
        assert supervisor.end() == 0
    supervisor.ended(bed)
    assert run_sparktui("--config", str(config), "stop", timeout=300).returncode == 0


def test_a_crash_loop_spends_the_budget_then_gives_up_and_says_so(make_testbed: Callable[..., Testbed],
                                                                 tmp_path: Path) -> None:
    bed, config, _port = supervised_bed(make_testbed, tmp_path,
                                        env={"SPARKTUI_STANDIN_FAIL": "crash_after_ready:2"},
                                        max_restarts=1, window=600.0)
    out = run_sparktui("--config", str(config), "start", "--wait", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    supervisor = Supervise(config)
    try:
        supervisor.wait(lambda line: line.get("event") == "decision" and line.get("action") == "give_up",
                        "given up", timeout=300)
        given_up = supervisor.decisions("give_up")[0]
        assert "given up" in given_up["detail"], given_up
        tries = [line for line in supervisor.lines
                 if line.get("event") == "decision" and line.get("action") in ACTIONS]
        assert len(tries) == 1, tries
        supervisor.wait(lambda line: line.get("event") == "notice" and "given up" in line.get("detail", ""),
                        "the give-up told (a notice, sent to [notify])", timeout=30)
        nothing_more_for(supervisor, 8)
    finally:
        assert supervisor.end() == 0
    supervisor.ended(bed)
    assert run_sparktui("--config", str(config), "stop", timeout=300).returncode == 0
