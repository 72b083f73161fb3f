"""Crash detection after ready and auto-restart accounting, with an injected clock."""

from __future__ import annotations

import pytest

from sparktui.domain.readiness import (
    CrashDetector,
    Health,
    ReadyCheck,
    RestartBudget,
    VerifyStep,
)


def test_one_failed_poll_is_not_a_crash() -> None:
    d = CrashDetector(ready_at=1000.0, fail_after=15.0)
    assert d.observe(True, 1002.0).health is Health.HEALTHY
    v = d.observe(False, 1010.0, "HTTP 503")
    assert v.health is Health.FAILING and v.failing_for == 0.0
    assert d.observe(True, 1012.0).health is Health.HEALTHY
    v = d.observe(False, 1020.0, "connection refused")
    assert v.health is Health.FAILING
    assert d.observe(False, 1030.0).failing_for == 10.0


def test_failing_for_n_seconds_is_a_crash() -> None:
    d = CrashDetector(ready_at=1000.0, fail_after=15.0)
    d.observe(True, 1000.0 + 7380.0)
    d.observe(False, 8400.0, "HTTP 503")
    d.observe(False, 8410.0, "connection refused")
    v = d.observe(False, 8415.0)
    assert v.health is Health.CRASHED
    assert v.crash is not None
    assert v.crash.ready_for == pytest.approx(7400.0)
    assert v.crash.reason == "health"
    assert v.crash.detail == "/health failing for 15s (connection refused)"
    assert v.crash.describe() == "crashed after 2h03m: /health failing for 15s (connection refused)"
    assert v.crash.describe("torch.OutOfMemoryError: CUDA out of memory") == \
        "crashed after 2h03m: torch.OutOfMemoryError: CUDA out of memory"
    # stays crashed
    assert d.observe(True, 8420.0).health is Health.CRASHED


def test_process_gone_is_a_crash_at_once() -> None:
    d = CrashDetector(ready_at=0.0, fail_after=15.0)
    crash = d.process_gone(65.0, "container sparktui-vllm exited (137)")
    assert crash.ready_for == 65.0 and crash.reason == "process_exited"
    assert d.crash is crash
    assert d.observe(False, 66.0).health is Health.CRASHED


def test_fail_after_must_be_positive() -> None:
    with pytest.raises(ValueError):
        CrashDetector(0.0, 0.0)


def test_restart_budget() -> None:
    b = RestartBudget(limit=2, stable_seconds=600.0)
    assert not b.decide(auto_restart=False).restart
    d = b.decide(auto_restart=True)
    assert d.restart and d.attempt == 1 and d.message == "auto-restart 1/2"
    b.restarted()
    b.note_uptime(30.0)               # crashed again quickly: the count stays
    assert b.decide(True).attempt == 2
    b.restarted()
    d = b.decide(True)
    assert not d.restart and "limit reached (2/2)" in d.message
    b.note_uptime(900.0)              # a stable stretch earns the budget back
    assert b.decide(True).restart
    b.restarted()
    b.restarted()
    b.manual_start()
    assert b.decide(True).attempt == 1
    assert not RestartBudget(limit=0).decide(True).restart


def test_ready_check_summary() -> None:
    ok = ReadyCheck(True, (VerifyStep("health", True, 0.01), VerifyStep("models", True, 0.02),
                           VerifyStep("completion", True, 0.2)), ("qwen3-32b",), 0.21)
    assert ok.summary() == "qwen3-32b answers, TTFT 0.2s"
    bad = ReadyCheck(False, (VerifyStep("health", True, 0.01),
                             VerifyStep("completion", False, 5.0, "HTTP 500")))
    assert bad.failed_step is not None and bad.failed_step.name == "completion"
    assert bad.summary() == "completion check failed: HTTP 500"
