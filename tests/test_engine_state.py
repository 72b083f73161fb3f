"""The engine state machine (``sparktui.domain.engine_state``): every transition, with an injected clock.

Timelines come from real (synthetic) vLLM logs read by the real ``Timeline``; Ray states, serving
snapshots and telemetry samples are the project's own types with real names and units.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sparktui.domain.engine_state import (
    PEER_FAILURE_KINDS,
    RAY_LOST_AFTER,
    EngineTruth,
    Record,
    Restart,
    Tell,
    Unwatch,
    Verify,
)
from sparktui.domain.events import EngineState, OperationView, StepStatus, StepView
from sparktui.domain.lifecycle.ray_state import ExpectedNode, RayNode, RayState
from sparktui.domain.logs import Timeline, TimelineSnapshot
from sparktui.domain.readiness import Crash, RestartBudget
from sparktui.domain.serving import ServingSnapshot
from sparktui.domain.telemetry import GpuDevice, GpuSample, Sample

LOGS = Path(__file__).parent / "data" / "synthetic-logs"
HAPPY = LOGS / "happy_v0.17.1-ngc_v1-ray-tp2_slurm.log"
AFTER_READY = LOGS / "fail_worker_died_v0.19.1_after-ready_plain.log"
FAILED_START = LOGS / "fail_nccl_v0.12.0_ray_docker.log"
OOM_START = LOGS / "fail_oom_v0.21.0_mp-cudagraphs_plain.log"
STOPPED_BY_SIGNAL = LOGS / "happy_v0.33.0_stopped-by-sigterm_plain.log"
RAY_FATAL_AFTER_READY = LOGS / "fail_ray_fatal_v0.26.0_ray-check-failed-after-ready_plain.log"
REMOTE_WORKER_SEGV = LOGS / "fail_worker_died_v0.26.0_ray-remote-segfault-nccl-init_plain.log"
NODES = (ExpectedNode("spark1", "10.0.0.1", 1.0), ExpectedNode("spark2", "10.0.0.2", 1.0))
WALL0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def wall(self) -> float:
        return WALL0 + self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def snapshot(path: Path, fraction: float = 1.0) -> TimelineSnapshot:
    text = path.read_text(encoding="utf-8")
    if fraction < 1.0:
        lines = text.splitlines(keepends=True)
        text = "".join(lines[: int(len(lines) * fraction)])
    timeline = Timeline(expected_nodes=2)
    timeline.feed_text(text)
    return timeline.snapshot()


def ray(*alive: str, dead: tuple[str, ...] = ()) -> RayState:
    ips = {n.name: n.ip for n in NODES}
    nodes = (*(RayNode(ips[n], True, 1.0) for n in alive), *(RayNode(ips[n], False, 0.0) for n in dead))
    return RayState(nodes, float(len(alive)))


def serving(running: float, tokens: float, waiting: float = 0.0) -> ServingSnapshot:
    return ServingSnapshot(at=time.time(), requests_running=running, requests_waiting=waiting,
                           generation_tokens_total=tokens)


def gpu_sample(watts: float, util: float) -> Sample:
    return Sample(seq=1, mono=0.0, wall=0.0, gpu=GpuSample("nvml", (GpuDevice(0, "NVIDIA GB10",
                                                                                util_percent=util,
                                                                                power_w=watts),)))


def machine(clock: Clock, **kwargs: object) -> EngineTruth:
    options: dict[str, object] = {"tensor_parallel": 2, "wedge_seconds": 60.0, "wedge_power_w": 30.0,
                                  "stop_steps": frozenset({"stop vLLM", "ray stop"})}
    options.update(kwargs)
    return EngineTruth(NODES, clock=clock, wall=clock.wall, **options)  # type: ignore[arg-type]


def kinds(effects: list[object]) -> list[type]:
    return [type(e) for e in effects]


def ready(clock: Clock, **kwargs: object) -> EngineTruth:
    """A machine that re-attached to a running engine and verified it."""
    truth = machine(clock, **kwargs)
    truth.timeline(snapshot(HAPPY))
    truth.discovered(EngineState.STARTING, "vLLM running (spark1 pid 7)")
    assert truth.state is EngineState.VERIFYING
    truth.verified(0.25, "0.17.1")
    truth.ray(ray("spark1", "spark2"))
    truth.take_effects()
    assert truth.state is EngineState.READY
    return truth


# ---- discovery and the log --------------------------------------------------------------------------
def test_unknown_until_discovery_and_the_log_alone_changes_nothing() -> None:
    truth = machine(Clock())
    assert truth.state is EngineState.UNKNOWN
    truth.timeline(snapshot(HAPPY))          # the first log flush says "ready": not a state yet
    assert truth.state is EngineState.UNKNOWN and truth.take_effects() == []
    truth.unreachable("head unreachable: timed out")
    assert truth.state is EngineState.UNKNOWN and "unreachable" in truth.detail


def test_stopped_engine_whose_log_reached_ready_stays_stopped() -> None:
    clock = Clock()
    truth = machine(clock)
    truth.timeline(snapshot(HAPPY))
    truth.discovered(EngineState.STOPPED, "nothing of ours runs")
    assert truth.state is EngineState.STOPPED
    truth.timeline(snapshot(HAPPY))          # later flushes of the same log
    truth.timeline(snapshot(AFTER_READY))    # even a failed one
    clock.advance(90)
    truth.tick()
    assert truth.state is EngineState.STOPPED
    assert not [e for e in truth.take_effects() if isinstance(e, Verify)]


def test_running_engine_with_a_ready_log_is_verified() -> None:
    truth = machine(Clock())
    truth.discovered(EngineState.STARTING, "vLLM running")
    assert truth.state is EngineState.STARTING
    truth.timeline(snapshot(HAPPY, 0.5))
    assert truth.state is EngineState.STARTING and truth.detail   # the stage the log is in
    truth.timeline(snapshot(HAPPY))
    assert truth.state is EngineState.VERIFYING
    assert kinds(truth.take_effects()) == [Verify]
    truth.verified(0.2, "0.17.1")
    assert truth.state is EngineState.READY and truth.detail == "can generate (first token 200 ms)"
    assert truth.ttft_seconds == 0.2 and truth.vllm_version == "0.17.1"
    records = [e for e in truth.take_effects() if isinstance(e, Record)]
    assert [r.outcome for r in records] == ["ready"]


def test_failed_log_outranks_discovery() -> None:
    truth = machine(Clock())
    truth.timeline(snapshot(FAILED_START))
    truth.discovered(EngineState.STARTING, "vLLM running")
    assert truth.state is EngineState.FAILED and truth.detail.startswith("nccl during ")
    truth2 = machine(Clock())
    truth2.timeline(snapshot(FAILED_START))
    truth2.discovered(EngineState.FAILED, "vLLM exited")
    assert truth2.state is EngineState.FAILED and "nccl" in truth2.detail


def test_verify_failed_and_a_later_state_cancels_the_check() -> None:
    truth = machine(Clock())
    truth.timeline(snapshot(HAPPY))
    truth.discovered(EngineState.STARTING, "vLLM running")
    truth.take_effects()
    truth.verify_failed("not serving: health check failed")
    assert truth.state is EngineState.FAILED and Unwatch in kinds(truth.take_effects())
    # A check that returns after a stop began changes nothing.
    other = machine(Clock())
    other.timeline(snapshot(HAPPY))
    other.discovered(EngineState.STARTING, "vLLM running")
    other.take_effects()
    other.operation(OperationView("stop", (StepView("stop vLLM", "spark1", StepStatus.RUNNING),)))
    assert other.state is EngineState.STOPPING and Unwatch in kinds(other.take_effects())
    other.verified(0.1)
    other.verify_failed("connection dropped")
    assert other.state is EngineState.STOPPING


# ---- operations ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "step", "state"), [
    ("stop", "stop vLLM", EngineState.STOPPING),
    ("restart", "ray stop", EngineState.STOPPING),
    ("restart", "preflight: model directory", EngineState.PREFLIGHT),
    ("restart", "vllm serve", EngineState.STARTING),
    ("preflight", "reach", EngineState.PREFLIGHT),
    ("start", "ray start (head)", EngineState.STARTING),
])
def test_running_operation_names_the_state(kind: str, step: str, state: EngineState) -> None:
    truth = machine(Clock())
    truth.operation(OperationView(kind, (StepView(step, "spark1", StepStatus.RUNNING),)))
    assert truth.state is state and step in truth.detail
    truth.timeline(snapshot(HAPPY))       # an operation outranks the log
    assert truth.state is state


def test_finished_operations() -> None:
    truth = machine(Clock())
    truth.operation(OperationView("start", running=True))
    truth.operation(OperationView("start", running=False, ok=True, message="launched"))
    assert truth.state is EngineState.STARTING
    truth.operation(OperationView("stop", running=True))
    truth.operation(OperationView("stop", running=False, ok=True))
    assert truth.state is EngineState.STOPPED
    truth.operation(OperationView("start", running=True))
    truth.operation(OperationView("start", running=False, ok=False, message="preflight failed"))
    assert truth.state is EngineState.FAILED and truth.detail == "preflight failed"
    truth.operation(OperationView("preflight", running=True))
    truth.operation(OperationView("preflight", running=False, ok=True, message="all checks pass"))
    assert truth.detail == "all checks pass"
    truth.operation(OperationView("stop", running=True))
    truth.operation(OperationView("stop", running=False, ok=False, message="1 remain"))
    assert truth.state is EngineState.FAILED and truth.detail == "1 remain"


def test_stopping_a_start_midway_records_it_stopped() -> None:
    truth = machine(Clock())
    truth.operation(OperationView("start", running=True))
    truth.operation(OperationView("start", running=False, ok=True))
    truth.timeline(snapshot(HAPPY, 0.5))
    truth.take_effects()
    truth.operation(OperationView("stop", running=True))
    records = [e for e in truth.take_effects() if isinstance(e, Record)]
    assert [r.outcome for r in records] == ["stopped"]


# ---- before ready -------------------------------------------------------------------------------
def test_failed_start_names_the_node_the_evidence_points_at() -> None:
    clock = Clock()
    truth = machine(clock)
    truth.discovered(EngineState.STARTING, "vllm serve launched")
    truth.link("spark2", "connected")
    truth.link("spark2", "retrying")
    truth.timeline(snapshot(FAILED_START))
    assert truth.state is EngineState.FAILED
    assert "spark2 (10.0.0.2)" in truth.detail and "SSH link retrying" in truth.detail
    assert [r.outcome for r in truth.take_effects() if isinstance(r, Record)] == ["failed"]


def test_evidence_after_the_logs_verdict_still_names_the_node() -> None:
    # The log says a worker died before Ray has marked the killed node dead: the failure names the node
    # once Ray does, and stays failed (one record).
    clock = Clock()
    truth = machine(clock)
    truth.discovered(EngineState.STARTING, "vllm serve launched")
    truth.ray(ray("spark1", "spark2"))
    truth.timeline(snapshot(FAILED_START))
    assert truth.state is EngineState.FAILED and truth.wants_node_evidence   # NCCL broke: which node?
    assert "spark2" not in truth.detail
    verdict = truth.detail
    truth.ray(ray("spark1", dead=("spark2",)))
    assert truth.state is EngineState.FAILED and not truth.wants_node_evidence
    assert truth.detail.startswith(verdict)
    assert "evidence points at spark2 (10.0.0.2): missing from Ray (Ray reports it dead)" in truth.detail
    assert [r.outcome for r in truth.take_effects() if isinstance(r, Record)] == ["failed"]


def test_a_failure_of_the_heads_own_kind_wants_no_node_evidence() -> None:
    # An out-of-memory or a config error says where it is: the headless wait answers at once.
    clock = Clock()
    truth = machine(clock)
    truth.discovered(EngineState.STARTING, "vllm serve launched")
    truth.timeline(snapshot(OOM_START))
    assert truth.state is EngineState.FAILED
    assert truth.snapshot is not None and truth.snapshot.failure is not None
    assert truth.snapshot.failure.kind not in PEER_FAILURE_KINDS
    assert not truth.wants_node_evidence


def test_node_lost_from_ray_while_starting_fails_the_start() -> None:
    clock = Clock()
    truth = machine(clock)
    truth.discovered(EngineState.STARTING, "vllm serve launched")
    truth.ray(ray("spark1"))                 # not registered: a blip until RAY_LOST_AFTER
    assert truth.state is EngineState.STARTING
    clock.advance(RAY_LOST_AFTER)
    truth.tick()
    assert truth.state is EngineState.FAILED
    assert truth.detail.startswith("Ray lost a node while vLLM was starting: Ray lost spark2 (10.0.0.2)")


def test_a_blip_in_ray_is_not_a_lost_node() -> None:
    clock = Clock()
    truth = machine(clock)
    truth.discovered(EngineState.STARTING, "vllm serve launched")
    truth.ray(ray("spark1"))
    clock.advance(1)
    truth.ray(ray("spark1", "spark2"))
    clock.advance(10)
    truth.tick()
    assert truth.state is EngineState.STARTING


def test_process_gone_before_ready() -> None:
    clock = Clock()
    truth = machine(clock)
    truth.discovered(EngineState.STARTING, "vllm serve launched")
    truth.process(True)
    truth.process(False)
    assert truth.state is EngineState.STARTING      # the log gets a moment to say why
    clock.advance(0.6)
    truth.tick()
    assert truth.state is EngineState.FAILED and truth.detail.startswith("vLLM exited before it was ready")


# ---- after ready: a node lost -------------------------------------------------------------------
def test_node_reported_dead_after_ready_is_degraded_at_once_and_named() -> None:
    clock = Clock()
    truth = ready(clock)
    clock.advance(5)
    truth.ray(ray("spark1", dead=("spark2",)))
    at = time.strftime("%H:%M:%S", time.localtime(clock.wall()))
    assert truth.state is EngineState.DEGRADED
    assert truth.detail.startswith(f"degraded: Ray lost spark2 (10.0.0.2) at {at} (Ray reports it dead)")
    assert "a TP 2 engine cannot serve; restart when it is back" in truth.detail
    assert truth.detail.endswith("auto-restart is off")
    effects = truth.take_effects()
    assert Restart not in kinds(effects) and Tell in kinds(effects)
    # Back in Ray: still degraded (its workers are gone), and the detail says to restart.
    truth.ray(ray("spark1", "spark2"))
    assert truth.state is EngineState.DEGRADED and "spark2 is back in Ray: restart the engine" in truth.detail


def test_node_missing_with_its_link_down_is_degraded_at_once() -> None:
    clock = Clock()
    truth = ready(clock)
    truth.link("spark2", "connected")
    truth.link("spark2", "retrying")
    assert truth.state is EngineState.READY       # the SSH link alone: Ray still has it
    truth.ray(ray("spark1"))
    assert truth.state is EngineState.DEGRADED and "its SSH link is retrying too" in truth.detail


def test_node_missing_for_a_while_is_degraded() -> None:
    clock = Clock()
    truth = ready(clock)
    truth.ray(ray("spark1"))
    assert truth.state is EngineState.READY
    clock.advance(RAY_LOST_AFTER)
    truth.tick()
    assert truth.state is EngineState.DEGRADED and "not registered with Ray" in truth.detail


def test_node_out_of_the_heads_reach_is_degraded_before_ray_declares_it_dead() -> None:
    clock = Clock()
    truth = ready(clock)
    truth.peer("spark2", False)
    assert truth.state is EngineState.READY               # one round: a blip
    clock.advance(1)
    truth.peer("spark2", True)
    clock.advance(RAY_LOST_AFTER)
    truth.tick()
    assert truth.state is EngineState.READY
    truth.peer("spark2", False)
    clock.advance(RAY_LOST_AFTER)
    truth.tick()
    assert truth.state is EngineState.DEGRADED
    assert "Ray lost spark2 (10.0.0.2)" in truth.detail and "the head cannot reach it" in truth.detail
    # With the SSH link down too, at once.
    other = ready(Clock())
    other.link("spark2", "connected")
    other.link("spark2", "retrying")
    other.peer("spark2", False)
    assert other.state is EngineState.DEGRADED and "its SSH link is retrying too" in other.detail


def test_a_raylet_gone_from_its_nodes_process_list_is_degraded_at_once() -> None:
    clock = Clock()
    truth = ready(clock)
    truth.raylet("spark2", True)
    clock.advance(2)
    truth.raylet("spark2", False)
    at = time.strftime("%H:%M:%S", time.localtime(clock.wall()))
    # Ray still lists it alive (its health check takes 15 s): the node's own process list is enough.
    truth.ray(ray("spark1", "spark2"))
    assert truth.state is EngineState.DEGRADED
    assert truth.detail.startswith(
        f"degraded: Ray lost spark2 (10.0.0.2) at {at} (its raylet is not running; Ray has not declared it "
        "dead yet)"), truth.detail
    # Its raylet back (Ray restarted on it): still degraded, its workers are gone.
    truth.raylet("spark2", True)
    assert truth.state is EngineState.DEGRADED and "spark2 is back in Ray: restart the engine" in truth.detail


def test_a_raylet_never_seen_is_no_evidence_unless_the_reading_is_the_only_one() -> None:
    truth = ready(Clock())
    truth.raylet("spark2", False)          # a probe that cannot see it: nothing was lost
    assert truth.state is EngineState.READY
    truth.raylet("spark2", False, settled=True)   # status: one reading of a node that answered
    assert truth.state is EngineState.DEGRADED and "its raylet is not running" in truth.detail


def test_raylets_going_away_during_a_stop_or_restart_are_not_a_lost_node() -> None:
    clock = Clock()
    truth = ready(clock)
    truth.raylet("spark2", True)
    truth.operation(OperationView(kind="restart", running=True,
                                  steps=(StepView("ray stop", status=StepStatus.RUNNING),)))
    truth.raylet("spark2", False)
    truth.operation(OperationView(kind="restart", running=False, ok=True))
    truth.raylet("spark2", False)           # not seen since the restart began: no evidence yet
    assert truth.state is EngineState.STARTING


def test_a_discovery_after_another_sparktuis_operation_forgets_the_run_before_it() -> None:
    """A dashboard that saw a node lost while vLLM was starting, then another sparktui's restart: what
    the restart left is judged afresh (issue 33: it stayed on the stale failure for over a minute)."""
    clock = Clock()
    truth = machine(clock)
    truth.discovered(EngineState.STARTING, "vllm serve launched")
    truth.ray(ray("spark1"))
    clock.advance(RAY_LOST_AFTER)
    truth.tick()
    assert truth.state is EngineState.FAILED and truth.detail.startswith("Ray lost a node while vLLM")
    # Ray is not watched while failed: no reading clears spark2's absence. The other restart ends, its
    # run's log reached ready, and discovery finds vLLM running.
    assert not truth.watching_ray
    # Followed as running while its lock is held: no verdict of ours on the vLLM it stops.
    held = "held by another sparktui: restart by alice@laptop (pid 42) since 10:00:00"
    truth.operation(OperationView(kind="restart", running=True, message=held))
    assert truth.state is EngineState.STARTING and truth.detail == held
    truth.timeline(snapshot(STOPPED_BY_SIGNAL))
    assert truth.state is EngineState.STARTING and truth.detail == held
    clock.advance(60)
    truth.timeline(snapshot(HAPPY))
    truth.discovered(EngineState.STARTING, "vLLM running (spark1 pid 9)", again=True)
    assert truth.state is EngineState.VERIFYING, truth.detail
    assert Verify in kinds(truth.take_effects())
    truth.verified(0.3)
    truth.ray(ray("spark1", "spark2"))
    assert truth.state is EngineState.READY, truth.detail
    assert truth.run_started == clock.wall()      # the run the other restart left, from now


def test_out_of_reach_while_starting_is_evidence_not_a_failure() -> None:
    clock = Clock()
    truth = machine(clock)
    truth.discovered(EngineState.STARTING, "vllm serve launched")
    truth.peer("spark2", False)
    clock.advance(40)
    truth.tick()
    assert truth.state is EngineState.STARTING
    truth.timeline(snapshot(FAILED_START))
    assert truth.state is EngineState.FAILED and "spark2 (10.0.0.2): out of the head's reach" in truth.detail


def test_degraded_triggers_auto_restart_within_the_budget() -> None:
    clock = Clock()
    budget = RestartBudget(1)
    truth = ready(clock, auto_restart=True, budget=budget)
    truth.ray(ray("spark1", dead=("spark2",)))
    effects = truth.take_effects()
    assert Restart in kinds(effects) and truth.detail.endswith("auto-restart 1/1")
    assert budget.used == 1
    # The restart runs; it comes back ready; the node is lost again: the budget is spent.
    truth.operation(OperationView("restart", running=True))
    truth.operation(OperationView("restart", running=False, ok=True))
    truth.timeline(snapshot(HAPPY))
    truth.verified(0.3)
    truth.take_effects()
    truth.ray(ray("spark1", dead=("spark2",)))
    assert truth.state is EngineState.DEGRADED and "limit reached" in truth.detail
    assert Restart not in kinds(truth.take_effects())


def test_settled_reading_counts_a_missing_node_at_once() -> None:
    truth = machine(Clock())
    truth.timeline(snapshot(HAPPY))
    truth.discovered(EngineState.STARTING, "vLLM running")
    truth.verified(None)
    assert truth.state is EngineState.READY and truth.detail == "the log says ready"
    truth.ray(ray("spark1"), settled=True)
    assert truth.state is EngineState.DEGRADED and "spark2" in truth.detail


# ---- after ready: wedged ------------------------------------------------------------------------
def test_wedged_when_requests_run_and_tokens_stand_still() -> None:
    clock = Clock()
    truth = ready(clock, wedge_seconds=20.0)
    truth.serving(serving(2, 100))
    clock.advance(2)
    truth.serving(serving(2, 140))
    truth.gpu("spark1", gpu_sample(22.0, 96.0))
    truth.gpu("spark2", gpu_sample(21.0, 95.0))
    for _ in range(9):
        clock.advance(2)
        truth.serving(serving(2, 180, waiting=1))
    assert truth.state is EngineState.READY        # 16 s at 180
    clock.advance(2)
    truth.serving(serving(2, 180, waiting=1))
    assert truth.state is EngineState.READY        # 18 s
    clock.advance(2)
    truth.gpu("spark1", gpu_sample(22.0, 96.0))
    truth.gpu("spark2", gpu_sample(21.0, 95.0))
    truth.serving(serving(2, 180, waiting=1))
    assert truth.state is EngineState.WEDGED
    detail = truth.detail
    assert detail.startswith("wedged: 2 request(s) running, 1 waiting, and "
                             "generation_tokens_total stuck at 180")
    assert "tokens 100 → 180" in detail and "spark1 22 W at 96 % util" in detail
    assert "below 30 W at high util on spark1, spark2" in detail and "stuck on GB10" in detail
    assert detail.endswith("auto-restart is off")
    # Tokens flow again: ready.
    clock.advance(2)
    truth.serving(serving(2, 200))
    assert truth.state is EngineState.READY and "recovered" in truth.detail


def test_idle_engine_is_not_wedged() -> None:
    clock = Clock()
    truth = ready(clock, wedge_seconds=5.0)
    for _ in range(10):
        clock.advance(2)
        truth.serving(serving(0, 180))
    assert truth.state is EngineState.READY
    # Busy and generating: not wedged either.
    for i in range(10):
        clock.advance(2)
        truth.serving(serving(3, 200 + 50 * i))
    assert truth.state is EngineState.READY


def test_wedge_without_gpu_data_says_so_and_asymmetry_is_noted() -> None:
    clock = Clock()
    truth = ready(clock, wedge_seconds=4.0)
    truth.gpu("spark1", gpu_sample(120.0, 95.0))
    truth.gpu("spark2", gpu_sample(20.0, 0.0))
    for _ in range(4):
        clock.advance(2)
        truth.serving(serving(1, 10))
    assert truth.state is EngineState.WEDGED and "GPU util asymmetric" in truth.detail
    other = ready(Clock(), wedge_seconds=4.0)
    for _ in range(4):
        other.clock.advance(2)  # type: ignore[attr-defined]
        other.serving(serving(1, 10))
    assert other.state is EngineState.WEDGED and "GPU power not known" in other.detail


# ---- after ready: failures ----------------------------------------------------------------------
def test_log_failure_after_ready_is_labelled_after_ready() -> None:
    clock = Clock()
    truth = ready(clock)
    clock.advance(125)
    truth.timeline(snapshot(AFTER_READY))
    assert truth.state is EngineState.FAILED
    assert truth.detail.startswith("crashed after 2m05s: worker_died after ready: ")
    assert "engine init" not in truth.detail and "during" not in truth.detail
    assert Unwatch in kinds(truth.take_effects())


def test_a_fatal_ray_check_in_the_engine_after_ready_ends_ready() -> None:
    """Ray's "[... C pid tid] core_worker.cc:N: Check failed: ..." in the EngineCore: Ray aborts it, so the
    engine is gone although the log said ready (issue 31)."""
    clock = Clock()
    truth = ready(clock)
    clock.advance(200)
    truth.timeline(snapshot(RAY_FATAL_AFTER_READY))
    assert truth.state is EngineState.FAILED
    assert truth.detail.startswith("crashed after 3m20s: ray_fatal after ready: "), truth.detail
    assert "Check failed" in truth.detail
    assert Unwatch in kinds(truth.take_effects())


def test_a_remote_workers_crash_names_its_node_from_the_ip_in_the_report() -> None:
    """The raylet's "worker died" report carries the dead worker's IP: the configured node with that IP is
    named; without configured nodes (an mp engine) the IP is."""
    truth = machine(Clock())
    truth.discovered(EngineState.STARTING, "vLLM running")
    truth.timeline(snapshot(REMOTE_WORKER_SEGV))
    assert truth.state is EngineState.FAILED
    assert truth.detail.startswith("worker_died during distributed: "), truth.detail
    assert "(on spark2, 10.0.0.2)" in truth.detail
    assert not truth.wants_node_evidence  # the log already names the node
    bare = EngineTruth((), clock=Clock(), wall=Clock().wall)
    bare.discovered(EngineState.STARTING, "vLLM running")
    bare.timeline(snapshot(REMOTE_WORKER_SEGV))
    assert "(on 10.0.0.2)" in bare.detail


def test_a_stop_by_signal_not_ours_is_stopped_not_failed() -> None:
    clock = Clock()
    truth = ready(clock)
    truth.timeline(snapshot(STOPPED_BY_SIGNAL))
    assert truth.state is EngineState.STOPPED
    assert truth.detail.startswith("vLLM stopped by SIGTERM after serving "), truth.detail
    assert "not by sparktui" in truth.detail
    effects = truth.take_effects()
    assert Unwatch in kinds(effects)
    # The run was recorded at ready: what follows is its end (by whom), not a second start.
    (end,) = [e for e in effects if isinstance(e, Record)]
    assert end.end == "stopped" and end.ready_seconds is None and "SIGTERM" in (end.cause or "")


def test_crash_from_the_serving_watch_asks_the_budget() -> None:
    clock = Clock()
    truth = ready(clock, auto_restart=True, budget=RestartBudget(2))
    truth.crashed(Crash(clock(), 30.0, "health", "/health failing for 15s (HTTP 503)"))
    assert truth.state is EngineState.FAILED and truth.detail.startswith("crashed after 30s")
    effects = truth.take_effects()
    assert Restart in kinds(effects)
    assert any(isinstance(e, Tell) and e.message == "auto-restart 1/2" for e in effects)


def test_crash_before_ready_is_ignored_and_degraded_can_still_crash() -> None:
    truth = machine(Clock())
    truth.crashed(Crash(1.0, 0.0, "health", "x"))
    assert truth.state is EngineState.UNKNOWN
    clock = Clock()
    truth = ready(clock)
    truth.ray(ray("spark1", dead=("spark2",)))
    truth.crashed(Crash(clock(), 3.0, "process_exited", "engine process exited"))
    assert truth.state is EngineState.FAILED


def test_from_config_reads_the_serving_keys() -> None:
    from sparktui.config import load_config

    config = load_config(Path(__file__).resolve().parents[1] / "config.toml")
    truth = EngineTruth.from_config(config)
    assert truth.wedge_seconds == config.serving.wedge_seconds == 60.0
    assert truth.wedge_power_w == config.serving.wedge_power_w
    assert {n.name for n in truth.expected} == {n.name for n in config.nodes}
    assert truth.stop_steps
