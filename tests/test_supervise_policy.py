"""The supervisor's policy per cause, with a fake clock: what it does about each state, when it waits, when
it stops trying, and that a person's stop is never undone; the desired state as kept on the head."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sparktui.config import SuperviseConfig
from sparktui.domain.events import EngineState
from sparktui.domain.lifecycle.desired import Desired, DesiredState
from sparktui.domain.supervise import Action, Cause, SupervisePolicy, cause_of
from sparktui.node import source

S = EngineState


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def policy(**config: float) -> tuple[SupervisePolicy, Clock]:
    clock = Clock()
    return SupervisePolicy(SuperviseConfig(**config), clock), clock


def test_causes_from_the_state_and_the_logs_failure() -> None:
    assert cause_of(S.READY, "", None, was_ready=True) is None
    assert cause_of(S.STARTING, "weights", None, was_ready=False) is None
    assert cause_of(S.WEDGED, "tokens stuck", None, was_ready=True) is Cause.WEDGED
    assert cause_of(S.DEGRADED, "spark2 lost", None, was_ready=True) is Cause.WORKER_LOST
    crashed = cause_of(S.FAILED, "crashed after 3m: engine process exited", None, was_ready=True)
    assert crashed is Cause.CRASHED
    assert cause_of(S.FAILED, "start failed at ray start", None, was_ready=False) is Cause.START_FAILED
    assert cause_of(S.FAILED, "oom in KV cache", "oom", was_ready=False) is Cause.OOM
    assert cause_of(S.FAILED, "nccl: unhandled system error", "nccl", was_ready=True) is Cause.NCCL
    guard = cause_of(S.STOPPED, "stopped by the memory guard: spark2 1.2 GiB", None, was_ready=True)
    assert guard is Cause.OOM
    assert cause_of(S.STOPPED, "", None, was_ready=False) is Cause.NOT_RUNNING


def test_serving_needs_nothing_and_a_crash_restarts() -> None:
    p, _ = policy()
    assert p.decide(S.READY, None, desired_serving=True, busy=False).action is Action.NONE
    verdict = p.decide(S.FAILED, Cause.CRASHED, desired_serving=True, busy=False)
    assert verdict.action is Action.RESTART and "crashed" in verdict.why
    assert p.decide(S.FAILED, Cause.CRASHED, desired_serving=True, busy=True).action is Action.NONE


def test_a_lost_worker_gets_its_grace_then_everything_restarts() -> None:
    p, clock = policy(worker_grace=60)
    first = p.decide(S.DEGRADED, Cause.WORKER_LOST, desired_serving=True, busy=False)
    assert first.action is Action.WAIT and "60 s" in first.why
    clock.now += 59
    assert p.decide(S.DEGRADED, Cause.WORKER_LOST, desired_serving=True, busy=False).action is Action.WAIT
    clock.now += 2
    after = p.decide(S.DEGRADED, Cause.WORKER_LOST, desired_serving=True, busy=False)
    assert after.action is Action.FULL_RESTART
    # It came back within the grace: nothing to do, and the next loss gets a whole grace again.
    p2, clock2 = policy(worker_grace=60)
    p2.decide(S.DEGRADED, Cause.WORKER_LOST, desired_serving=True, busy=False)
    clock2.now += 30
    assert p2.decide(S.READY, None, desired_serving=True, busy=False).action is Action.NONE
    clock2.now += 40
    assert p2.decide(S.DEGRADED, Cause.WORKER_LOST, desired_serving=True, busy=False).action is Action.WAIT


def test_nccl_restarts_every_rank_and_a_wedge_restarts() -> None:
    p, _ = policy()
    assert p.decide(S.FAILED, Cause.NCCL, desired_serving=True, busy=False).action is Action.FULL_RESTART
    assert p.decide(S.WEDGED, Cause.WEDGED, desired_serving=True, busy=False).action is Action.RESTART


def test_what_a_restart_did_not_bring_back_is_restarted_in_full() -> None:
    p, _ = policy()
    wedge = p.decide(S.WEDGED, Cause.WEDGED, desired_serving=True, busy=False)
    assert wedge.action is Action.RESTART
    p.acted(wedge)
    # vLLM's restart was not ready in time: its start failed, so everything goes, Ray and every rank.
    again = p.decide(S.FAILED, Cause.START_FAILED, desired_serving=True, busy=False)
    assert again.action is Action.FULL_RESTART and "did not bring it back" in again.why
    p.acted(again)
    assert p.decide(S.WEDGED, Cause.WEDGED, desired_serving=True, busy=False).action is Action.FULL_RESTART
    # Ready again: the next failure starts from the lightest step.
    assert p.decide(S.READY, None, desired_serving=True, busy=False).action is Action.NONE
    assert p.decide(S.FAILED, Cause.CRASHED, desired_serving=True, busy=False).action is Action.RESTART
    # A boot's start that failed is not met again with a plain start over what it left behind.
    boot, clock = policy(start_delay=0)
    first = boot.decide(S.STOPPED, Cause.NOT_RUNNING, desired_serving=True, busy=False)
    assert first.action is Action.START
    boot.acted(first)
    clock.now += 5
    assert boot.decide(S.FAILED, Cause.START_FAILED, desired_serving=True,
                       busy=False).action is Action.FULL_RESTART


def test_out_of_memory_is_retried_once_then_needs_a_person() -> None:
    p, _ = policy(oom_retries=1)
    first = p.decide(S.FAILED, Cause.OOM, desired_serving=True, busy=False)
    assert first.action is Action.RESTART
    p.acted(first)
    second = p.decide(S.FAILED, Cause.OOM, desired_serving=True, busy=False)
    assert second.action is Action.NEEDS_PERSON and "gpu_memory_utilization" in second.why
    # Stopped trying: nothing more until a person starts it again.
    assert p.decide(S.FAILED, Cause.CRASHED, desired_serving=True, busy=False).action is Action.NONE
    p.person_started()
    assert p.decide(S.FAILED, Cause.OOM, desired_serving=True, busy=False).action is Action.RESTART


def test_the_budget_gives_up_and_the_window_earns_it_back() -> None:
    p, clock = policy(max_restarts=2, window=600)
    for _ in range(2):   # each restart serves a while, then it crashes again: ready does not reset the budget
        verdict = p.decide(S.FAILED, Cause.CRASHED, desired_serving=True, busy=False)
        assert verdict.action is Action.RESTART
        p.acted(verdict)
        clock.now += 10
        assert p.decide(S.READY, None, desired_serving=True, busy=False).action is Action.NONE
    given_up = p.decide(S.FAILED, Cause.CRASHED, desired_serving=True, busy=False)
    assert given_up.action is Action.GIVE_UP and "2 starts and restarts within 600 s" in given_up.why
    p2, clock2 = policy(max_restarts=2, window=600)
    for _ in range(2):
        p2.acted(p2.decide(S.FAILED, Cause.CRASHED, desired_serving=True, busy=False))
        p2.decide(S.READY, None, desired_serving=True, busy=False)
    clock2.now += 601
    assert p2.decide(S.FAILED, Cause.CRASHED, desired_serving=True, busy=False).action is Action.RESTART


def test_a_persons_stop_is_never_undone_and_no_wish_starts_nothing() -> None:
    p, clock = policy(start_delay=10)
    held = p.decide(S.STOPPED, Cause.NOT_RUNNING, desired_serving=False, busy=False)
    assert held.action is Action.HOLD and "a person stopped it" in held.why
    clock.now += 3600
    assert p.decide(S.FAILED, Cause.CRASHED, desired_serving=False, busy=False).action is Action.HOLD
    never = p.decide(S.STOPPED, Cause.NOT_RUNNING, desired_serving=None, busy=False)
    assert never.action is Action.HOLD and "sparktui start" in never.why


def test_not_running_while_it_should_serve_starts_after_the_delay() -> None:
    p, clock = policy(start_delay=10)
    assert p.decide(S.STOPPED, Cause.NOT_RUNNING, desired_serving=True, busy=False).action is Action.WAIT
    clock.now += 11
    assert p.decide(S.STOPPED, Cause.NOT_RUNNING, desired_serving=True, busy=False).action is Action.START
    assert p.decide(S.FAILED, Cause.START_FAILED, desired_serving=True, busy=False).action is Action.RESTART


def test_the_desired_state_on_the_head_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "state" / "desired.json"
    desired = DesiredState(Desired.STOPPED, "`sparktui stop`", "laptop", 1_796_000_000.0)
    script = source("json_file")
    empty = subprocess.run([sys.executable, "-c", script, "read", str(path)], capture_output=True, text=True,
                           check=True)
    assert DesiredState.parse(empty.stdout) is None
    wrote = subprocess.run([sys.executable, "-c", script, "write", str(path), desired.to_json()],
                           capture_output=True, text=True, check=True)
    assert wrote.stdout.strip() == "OK" and json.loads(path.read_text())["state"] == "stopped"
    read = subprocess.run([sys.executable, "-c", script, "read", str(path)], capture_output=True, text=True,
                          check=True)
    assert DesiredState.parse(read.stdout) == desired
    assert "stopped (set by `sparktui stop` on laptop at" in desired.describe()
    for garbage in ("", "not json", "[1, 2]", '{"state": "dancing"}'):
        assert DesiredState.parse(garbage) is None


def test_nothing_is_tried_while_a_node_cannot_be_reached() -> None:
    p, clock = policy(start_delay=0, max_restarts=1)
    waiting = p.decide(S.STOPPED, Cause.NOT_RUNNING, desired_serving=True, busy=False, nodes_down=("spark2",))
    assert waiting.action is Action.WAIT and "spark2 cannot be reached" in waiting.why
    clock.now += 600
    assert p.decide(S.FAILED, Cause.START_FAILED, desired_serving=True, busy=False,
                    nodes_down=("spark2",)).action is Action.WAIT
    # Back: the budget was not spent while it waited.
    assert p.decide(S.FAILED, Cause.START_FAILED, desired_serving=True, busy=False).action is Action.RESTART
