"""The engine's state from all the evidence: one pure state machine (no I/O, clocks passed in).

Whoever collects evidence feeds it here and shows what comes out: the SSH backend (the dashboard), the
headless wait (``start --wait``) and ``status`` (one reading of everything), and the demo (simulated
evidence, same calls). Inputs, each a method:

- ``discovered`` — what runs of ours on the nodes (re-attach discovery); the state starts from it;
- ``operation`` — the lifecycle operation (preflight/start/stop/restart) running or finished;
- ``timeline`` — the head's vLLM log read into a ``TimelineSnapshot`` (stage, ready, failed);
- ``verified`` / ``verify_failed`` — the readiness check (health, models, one completion);
- ``crashed`` — ``/health`` failing past ``health_fail_seconds`` or the vLLM process gone after ready;
- ``process`` — the detached vLLM process on the head, alive or not (before ready);
- ``ray`` — Ray's node list (``RayState``): every configured node alive with its GPU;
- ``link`` — each node's SSH link phase (``LinkPhase`` value);
- ``peer`` — whether the head reaches each other node (Ray needs 30–40 s to declare a cut node dead);
- ``raylet`` — whether a node's raylet process runs, from the node's own process list (Ray needs 15 s
  of failed health checks to declare a node whose raylet was killed dead);
- ``serving`` — ``/metrics`` snapshots (requests running/waiting, ``generation_tokens_total``);
- ``gpu`` — GPU power and util per node from telemetry samples;
- ``tick`` — time passing (the rules that need "for N seconds").

Outputs: ``state``/``detail`` (what ``EngineChanged`` carries) and ``take_effects()``: what the driver must
do (run the readiness check, cancel it, write the run to history, restart, tell the person).

The rules, in one place:

- the state on attach comes from discovery; the log refines a *running* engine only (a stopped engine
  whose last log reached ready stays stopped, and a readiness check runs only for a running engine and
  is cancelled by any later state);
- an operation running outranks the log; the log's failure outranks discovery's "starting";
- after ready: a node lost from Ray (reported dead, missing for ``RAY_LOST_AFTER`` s, or missing while
  its SSH link is down), out of the head's reach (for ``RAY_LOST_AFTER`` s, or at once while its SSH
  link is down too) or with its raylet gone from its process list → *degraded*, naming the node;
  requests running or waiting while ``generation_tokens_total`` does not move for ``wedge_seconds`` →
  *wedged*, with the numbers;
  a crash (health/process) or the log's failure → *failed* "crashed after …: … after ready"; each of
  these asks the restart budget (``serving.auto_restart``);
- before ready: a node lost from Ray fails the start naming it; a failure in the log names the node any
  evidence (Ray, the SSH link) points at; the process gone without a ready log → *failed*;
- a failure the log places on a node (an IP in a remote worker's crash report, a Ray ``ip=`` prefix) names
  that node by the configured node's name where one has that IP, else by the IP.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparktui.domain.durations import format_duration
from sparktui.domain.events import EngineState, OperationView, StepStatus
from sparktui.domain.lifecycle.ray_state import ExpectedNode, RayState, evaluate
from sparktui.domain.logs.diagnosis import node_label
from sparktui.domain.logs.nccl import SOCKET_WARNING
from sparktui.domain.readiness import Crash, RestartBudget, RestartDecision

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.domain.logs import TimelineSnapshot
    from sparktui.domain.serving import ServingSnapshot
    from sparktui.domain.telemetry import Sample

Clock = Callable[[], float]

#: The log's failure kinds that blame a node other than what the head's log shows (its process and GPU).
PEER_FAILURE_KINDS = frozenset({"worker_died", "nccl", "placement_timeout", "engine_timeout"})
#: A node missing from Ray's list this long (not reported dead, SSH link up) counts as lost: Ray itself
#: takes a few seconds to settle, so this only filters single readings.
RAY_LOST_AFTER = 3.0
#: After the vLLM process is seen gone, the log gets this long to deliver its last lines (the cause).
PROCESS_GONE_GRACE = 0.5
#: GPU util at or above this with power below ``wedge_power_w``: busy-looking but doing nothing (GB10).
HIGH_UTIL_PERCENT = 80.0
#: Evidence kept for the wedge rule and its report ("the numbers over the last minute").
EVIDENCE_SECONDS = 60.0
#: Utils further apart than this between nodes while requests run: one GPU waits for the other.
ASYMMETRY_PERCENT = 50.0

#: States in which the engine runs (the log and the evidence refine them).
RUNNING = frozenset({EngineState.STARTING, EngineState.VERIFYING, EngineState.READY,
                     EngineState.DEGRADED, EngineState.WEDGED})
#: States reached through ready: failures in them are "after ready".
AFTER_READY = frozenset({EngineState.READY, EngineState.DEGRADED, EngineState.WEDGED})


# ---- effects: what the driver does ----------------------------------------------------------------
@dataclass(frozen=True)
class Verify:
    """Run the readiness check now (the log reached ready on a running engine)."""


@dataclass(frozen=True)
class Unwatch:
    """Cancel the readiness check and the serving watch: a later state outranks them."""


@dataclass(frozen=True)
class Record:
    """Write this run to the history — or, with ``end``, update it: a run that reached ready ended."""

    outcome: str                      # "ready" | "failed" | "stopped"
    started_at: float                 # wall clock of the start (this process's clock)
    ready_seconds: float | None = None
    #: The head's start stamp of this run (``sparktui/node/run_logs.py``): names the run and its kept log.
    stamp: float | None = None
    #: How a run that reached ready ended ("crashed" | "wedged" | "lost a node" | "stopped"), when, and why.
    end: str | None = None
    ended_at: float | None = None
    cause: str | None = None


@dataclass(frozen=True)
class Restart:
    """Restart the engine now (the budget allowed it); ``decision.message`` says which attempt."""

    decision: RestartDecision


@dataclass(frozen=True)
class Tell:
    """Tell the person once (a toast)."""

    message: str
    severity: str = "information"


Effect = Verify | Unwatch | Record | Restart | Tell


@dataclass
class _Missing:
    since: float          # monotonic
    wall: float           # when it was first missing, for "lost spark2 at 10:02:13"
    why: str


class EngineTruth:
    """The engine state machine. One instance per watched cluster; feed it, then read ``state``,
    ``detail`` and ``take_effects()``."""

    def __init__(
        self,
        expected: Sequence[ExpectedNode],
        *,
        tensor_parallel: int = 1,
        wedge_seconds: float = 60.0,
        wedge_power_w: float = 30.0,
        auto_restart: bool = False,
        budget: RestartBudget | None = None,
        stop_steps: frozenset[str] = frozenset(),
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
    ) -> None:
        self.expected = tuple(expected)
        self.tensor_parallel = tensor_parallel
        self.wedge_seconds = wedge_seconds
        self.wedge_power_w = wedge_power_w
        self.auto_restart = auto_restart
        self.budget = budget or RestartBudget(3)
        #: The stop plan's step names: while one of them runs, a restart is still stopping.
        self.stop_steps = stop_steps
        self.clock = clock
        self.wall = wall
        self.state = EngineState.UNKNOWN
        self.detail = ""
        self.ttft_seconds: float | None = None
        self.vllm_version: str | None = None
        #: Bumped on every change of state or detail: a driver publishes when it moved.
        self.version = 0
        self.discovered_once = False
        self.busy: str | None = None
        self.snapshot: TimelineSnapshot | None = None
        self.ready_at: float | None = None
        self.run_started = wall()
        #: The head's stamp of this run's start, once read (``engine_started``).
        self.run_stamp: float | None = None
        self.recorded = False
        #: This run's end after ready was recorded (once per run).
        self.ended = False
        #: This process saw the run's log before ready (so "now" at ready is when it became ready).
        self._watched_start = False
        self._effects: list[Effect] = []
        self._missing: dict[str, _Missing] = {}
        self._lost: str | None = None            # the node that made the state degraded / failed
        self._lost_text = ""
        #: FAILED from the log's verdict before ready: evidence that comes later still names the node.
        self._failed_by_log = False
        self._links: dict[str, tuple[str, float]] = {}   # node → (phase, wall since)
        self._link_drops: dict[str, float] = {}  # node → wall of the last drop (this run)
        self._out_of_reach: dict[str, tuple[float, float]] = {}   # node → (mono, wall) since
        #: Nodes whose raylet was seen running this run; those seen without it since (node → wall).
        self._raylets: set[str] = set()
        self._raylet_gone: dict[str, float] = {}
        self._process_gone_at: float | None = None
        self._serving: deque[tuple[float, float, float, float | None]] = deque()  # at, run, wait, tokens
        self._gpu: dict[str, tuple[float, float | None, float | None]] = {}        # node → at, W, %
        self._wedged_since: float | None = None

    @classmethod
    def from_config(cls, config: SparkConfig, *, budget: RestartBudget | None = None,
                    clock: Clock = time.monotonic, wall: Clock = time.time) -> EngineTruth:
        from sparktui.domain.lifecycle.plan import build_stop_plan, expected_nodes

        serving = config.serving
        return cls(expected_nodes(config) if config.engine.executor == "ray" else (),
                   tensor_parallel=config.engine.tensor_parallel_size, wedge_seconds=serving.wedge_seconds,
                   wedge_power_w=serving.wedge_power_w, auto_restart=serving.auto_restart,
                   budget=budget or RestartBudget(serving.auto_restart_limit),
                   stop_steps=frozenset(step.name for step in build_stop_plan(config, None).steps),
                   clock=clock, wall=wall)

    # -- reading -----------------------------------------------------------------------------------
    def take_effects(self) -> list[Effect]:
        out, self._effects = self._effects, []
        return out

    @property
    def ready_for(self) -> float | None:
        return None if self.ready_at is None else max(0.0, self.clock() - self.ready_at)

    @property
    def watching_ray(self) -> bool:
        """Whether Ray's node list is evidence now (the driver watches it only then)."""
        return bool(self.expected) and self.busy is None and self.state in RUNNING

    # -- inputs ------------------------------------------------------------------------------------
    def discovered(self, state: EngineState, detail: str, *, again: bool = False) -> None:
        """Re-attach discovery's classification (``sparktui.domain.lifecycle.discovery.classify``).
        ``again``: a discovery after another sparktui's operation ended — what it left outranks what we
        believed before it, and the evidence of the run before it (a node lost, a wedge) is history."""
        first = not self.discovered_once
        self.discovered_once = True
        if again:
            self.busy = None     # the other sparktui's operation, followed as running, is over
            self._new_run(watched=False)
        if self.busy is not None or (not again and not first and self.state not in (EngineState.UNKNOWN,)):
            return  # an operation (or an earlier discovery) already decided
        snap = self.snapshot
        if state is EngineState.STARTING:
            if snap is not None and snap.outcome == "ready":
                self._begin_verify()
                return
            if snap is not None and snap.outcome == "failed" and snap.failure is not None:
                self._set(EngineState.FAILED, self._failure_text(snap))
                return
            self._set(state, snap.current if snap is not None and snap.current else detail)
            return
        if state is EngineState.FAILED and snap is not None and snap.outcome == "failed" \
                and snap.failure is not None:
            self._set(EngineState.FAILED, self._failure_text(snap))
            return
        self._set(state, detail)

    def unreachable(self, detail: str) -> None:
        """Discovery could not reach the head (it is tried again)."""
        if not self.discovered_once and self.busy is None:
            self._set(EngineState.UNKNOWN, detail)

    def operation(self, view: OperationView) -> None:
        """Every progress view of an operation, running and finished (another sparktui's, seen by its
        lock on the head, as running only: its end is the discovery after it, ``discovered(again=True)``)."""
        if view.running:
            if self.busy is None:
                self._operation_begins(view.kind)
            self.busy = view.kind
            self._operation_step(view)
            return
        self.busy = None
        self.discovered_once = True   # an operation's end is as good as a discovery
        if view.kind in ("stop", "clean"):
            self._set(EngineState.STOPPED if view.ok else EngineState.FAILED, "" if view.ok else view.message)
        elif view.kind in ("start", "restart"):
            if view.ok:
                snap = self.snapshot
                current = snap.current if snap is not None else None
                self._set(EngineState.STARTING, current or "vllm serve launched")
            else:
                self._set(EngineState.FAILED, view.message)
        elif view.kind == "preflight":
            self._set(self.state, view.message)

    def timeline(self, snapshot: TimelineSnapshot) -> None:
        """The head's log as read so far (a new snapshot whenever it changed)."""
        self.snapshot = snapshot
        if snapshot.outcome == "incomplete":
            self._watched_start = True
        if not self.discovered_once or self.busy is not None or self.state not in RUNNING:
            # Before discovery the log says nothing about now; an operation outranks it; a stopped (or
            # already failed) engine's last log stays history.
            return
        if snapshot.outcome == "failed":
            if not self.recorded:
                self._record("failed")
            if self.state in AFTER_READY:
                failure = snapshot.failure
                cause = failure.message if failure is not None else "see the log"
                kind = f"{failure.kind} after ready: " if failure is not None else ""
                uptime = format_duration(self.ready_for or 0.0)
                on = self._failure_node(failure.node) if failure is not None else ""
                self._fail_after_ready(f"crashed after {uptime}: {kind}{cause}{on}",
                                       f"{kind}{cause}{on}")
            else:
                self._set(EngineState.FAILED, self._failure_text(snapshot))
                self._failed_by_log = True
            return
        if snapshot.outcome == "ready":
            if self.state is EngineState.STARTING:
                self._begin_verify()
            return
        if snapshot.outcome == "stopped":
            # vLLM shut down on a signal that no operation of ours sent (one would outrank the log):
            # someone stopped it by hand (docker stop, kill). Stopped, not failed — and said so.
            signal = str(snapshot.facts.get("stop_signal") or "a signal")
            served = snapshot.served_seconds
            after = f" after serving {format_duration(served)}" if served else ""
            if not self.recorded:
                self._record("stopped")
            if self.state in AFTER_READY:
                self._record_end("stopped", f"by {signal}, not by sparktui")
            self._set(EngineState.STOPPED, f"vLLM stopped by {signal}{after}, not by sparktui")
            return
        if self.state is EngineState.STARTING and snapshot.current:
            self._set(EngineState.STARTING, snapshot.current)

    def engine_started(self, stamp: float, local: float) -> None:
        """The head's stamp of the running engine's start (``stamp``, the head's clock) and that moment on
        this process's clock (``local``): durations count from the engine's real start, not from when this
        process attached (or began the operation). A stamp from before the running operation is ignored."""
        if self.busy is not None:
            return   # an operation runs: the stamp may be the previous run's (its end brings the new one)
        self.run_stamp = stamp
        self.run_started = local

    def verified(self, ttft_seconds: float | None = None, vllm_version: str | None = None) -> None:
        """The readiness check passed (``ttft_seconds`` of its completion; ``None``: the log's ready is
        taken as is, e.g. by ``status``, which sends no completion)."""
        if self.state is not EngineState.VERIFYING:
            return
        self.ttft_seconds = ttft_seconds
        self.vllm_version = vllm_version or self.vllm_version
        self.ready_at = self.clock()
        ready_seconds = self.wall() - self.run_started
        late = self._ready_from_log()
        if late is not None:
            # Attached to an engine that was ready already: it became ready then, not now.
            ready_seconds = late
            if self.run_stamp is not None:
                self.ready_at -= max(0.0, self.wall() - (self.run_started + late))
        self._serving.clear()
        detail = ("the log says ready" if ttft_seconds is None
                  else f"can generate (first token {1000 * ttft_seconds:.0f} ms)")
        if self.snapshot is not None:
            detail = _nccl_caveat(self.snapshot.facts) + detail
        self._set(EngineState.READY, detail)
        if not self.recorded:
            self._record("ready", ready_seconds=max(0.0, ready_seconds))
        self._judge()

    def _ready_from_log(self) -> float | None:
        """For an engine whose log said ready before this process watched it start: the log's own start-up
        time (its stages, from its first line to ready). ``None`` when this process saw the start (then the
        start stamp to now is the truth) or the log has no stages."""
        if self._watched_start:
            return None
        snap = self.snapshot
        stages = [s.seconds for s in snap.stages if s.status == "done" and s.seconds] if snap else []
        return sum(stages) if stages else None

    def verify_failed(self, detail: str) -> None:
        if self.state is EngineState.VERIFYING:
            self._set(EngineState.FAILED, detail)

    def crashed(self, crash: Crash) -> None:
        """The serving watch decided a crash (``/health`` failing, or the process gone)."""
        if self.state not in AFTER_READY:
            return
        failure = self.snapshot.failure if self.snapshot is not None else None
        root = f"{failure.kind} after ready: {failure.message}" if failure is not None else None
        self._fail_after_ready(crash.describe(root), root or crash.detail)

    def process(self, alive: bool) -> None:
        """The detached vLLM process on the head (checked while it starts)."""
        if alive:
            self._process_gone_at = None
        elif self._process_gone_at is None:
            self._process_gone_at = self.clock()
        self._judge()

    def ray(self, state: RayState | None, *, settled: bool = False) -> None:
        """A reading of Ray's node list. ``settled``: the only reading there will be (``status``), so a
        missing node counts at once."""
        if state is None or not self.expected:
            return
        readiness = evaluate(state, self.expected)
        now, wall = self.clock(), self.wall()
        dead_ips = {n.ip for n in state.nodes if not n.alive}
        for name in list(self._missing):
            if name not in readiness.missing_nodes:
                del self._missing[name]
        for node in self.expected:
            if node.name not in readiness.missing_nodes:
                continue
            why = "Ray reports it dead" if node.ip in dead_ips else "not registered with Ray"
            seen = self._missing.setdefault(node.name, _Missing(now, wall, why))
            seen.why = why
            if settled or node.ip in dead_ips:
                seen.since = min(seen.since, now - RAY_LOST_AFTER)
        self._judge()

    def link(self, node: str, phase: str) -> None:
        """A node's SSH link phase (``connecting``/``connected``/``retrying``/``failed``/``closed``)."""
        before = self._links.get(node)
        if before is None or before[0] != phase:
            self._links[node] = (phase, self.wall())
            if phase != "connected" and before is not None and before[0] == "connected":
                self._link_drops[node] = self.wall()
        self._judge()

    def peer(self, node: str, reachable: bool) -> None:
        """Whether the head reaches ``node`` at its Ray address now."""
        if reachable:
            self._out_of_reach.pop(node, None)
        else:
            self._out_of_reach.setdefault(node, (self.clock(), self.wall()))
        self._judge()

    def raylet(self, node: str, running: bool, *, settled: bool = False) -> None:
        """Whether ``node``'s own process list shows its raylet. Gone after it was seen running this run
        (``settled``: the only reading there will be, ``status``'s) is the node lost at once: Ray marks a
        node whose raylet was killed dead only after 15 s of failed health checks."""
        if running:
            self._raylets.add(node)
            self._raylet_gone.pop(node, None)
        elif node in self._raylets or settled:
            self._raylet_gone.setdefault(node, self.wall())
        self._judge()

    def serving(self, snapshot: ServingSnapshot) -> None:
        """A ``/metrics`` snapshot of the ready engine."""
        now = self.clock()
        self._serving.append((now, snapshot.requests_running or 0.0, snapshot.requests_waiting or 0.0,
                              snapshot.generation_tokens_total))
        keep = max(self.wedge_seconds, EVIDENCE_SECONDS) + 5.0
        while self._serving and now - self._serving[0][0] > keep:
            self._serving.popleft()
        self._judge()

    def gpu(self, node: str, sample: Sample) -> None:
        """GPU power and util of one node (the busiest device)."""
        devices = sample.gpu.devices
        if not devices:
            return
        utils = [d.util_percent for d in devices if d.util_percent is not None]
        powers = [d.power_w for d in devices if d.power_w is not None]
        self._gpu[node] = (self.clock(), max(powers) if powers else None, max(utils) if utils else None)

    def memory_stopped(self, detail: str) -> None:
        """The memory guard stopped vLLM before the host gave out: failed, saying which node and why."""
        self._set(EngineState.FAILED, detail)

    def tick(self) -> None:
        """Time passed: the rules that need "for N seconds" are judged again."""
        self._judge()

    # -- rules -------------------------------------------------------------------------------------
    def _operation_begins(self, kind: str) -> None:
        if kind in ("stop", "restart"):
            self._effects.append(Unwatch())
            if self.state in AFTER_READY:
                self._record_end("stopped" if kind == "stop" else "restarted", f"by {kind}")
            snap = self.snapshot
            if not self.recorded and snap is not None and snap.outcome == "incomplete" \
                    and self.state is EngineState.STARTING:
                self._record("stopped")
        if kind in ("start", "restart"):
            self._new_run()

    def _new_run(self, *, watched: bool = True) -> None:
        """A new run begins (ours, or one another sparktui's operation left): nothing seen of the run
        before it counts for this one. ``watched``: this process follows its start from the beginning (its
        start-to-ready time is its own to record)."""
        self.ready_at = None
        self.run_started = self.wall()
        self.run_stamp = None
        self.recorded = False
        self.ended = False
        self._watched_start = watched
        self.ttft_seconds = None
        self._lost = None
        self._missing.clear()
        self._link_drops.clear()
        self._out_of_reach.clear()
        self._raylets.clear()
        self._raylet_gone.clear()
        self._process_gone_at = None
        self._serving.clear()
        self._wedged_since = None

    def _operation_step(self, view: OperationView) -> None:
        step = _running_step(view)
        if view.kind == "stop":
            self._set(EngineState.STOPPING, step)
        elif view.kind in ("start", "restart", "preflight"):
            stopping = view.kind == "restart" and any(
                s.status is StepStatus.RUNNING and s.name in self.stop_steps for s in view.steps)
            self._set(EngineState.STOPPING if stopping else (
                EngineState.PREFLIGHT if "preflight" in step or view.kind == "preflight"
                else EngineState.STARTING), step)

    def _begin_verify(self) -> None:
        if self.state is not EngineState.VERIFYING:
            self._set(EngineState.VERIFYING, "health, models, one completion")
            self._effects.append(Verify())

    def _judge(self) -> None:
        if self._failed_by_log and self.busy is None and self.snapshot is not None:
            # Ray notices a dead node seconds after the log says a worker died: the verdict names it then.
            self._set(EngineState.FAILED, self._failure_text(self.snapshot))
            self._failed_by_log = True
            return
        if self.busy is not None or self.state not in RUNNING:
            return
        now = self.clock()
        starting = self.state in (EngineState.STARTING, EngineState.VERIFYING)
        lost = self._lost_node(now, reach=not starting)
        if starting:
            if lost is not None:
                name, text = lost
                self._lost = name
                self._set(EngineState.FAILED, f"Ray lost a node while vLLM was starting: {text}")
                self._effects.append(Unwatch())
                if not self.recorded:
                    self._record("failed")
                return
            gone = self._process_gone_at
            if gone is not None and now - gone >= PROCESS_GONE_GRACE \
                    and (self.snapshot is None or self.snapshot.outcome != "ready"):
                failure = self.snapshot.failure if self.snapshot is not None else None
                why = f"{failure.kind}: {failure.message}; {failure.hint}" if failure else "see the log"
                self._set(EngineState.FAILED,
                          f"vLLM exited before it was ready ({why}){self._node_evidence()}")
                if not self.recorded:
                    self._record("failed")
            return
        if self.state is EngineState.DEGRADED:
            if self._lost is not None and self._lost not in self._missing \
                    and self._lost not in self._out_of_reach and self._lost not in self._raylet_gone:
                self._set(EngineState.DEGRADED,
                          f"degraded: {self._lost_text} — {self._lost} is back in Ray: restart the engine")
            return
        if lost is not None:
            name, text = lost
            self._lost, self._lost_text = name, text
            tp = f"a TP {self.tensor_parallel} engine" if self.tensor_parallel > 1 else "the engine"
            self._record_end("lost a node", text)
            self._after_ready_problem(EngineState.DEGRADED,
                                      f"degraded: {text} — {tp} cannot serve; restart when it is back")
            return
        wedge = self._wedge(now)
        if self.state is EngineState.READY and wedge is not None:
            self._record_end("wedged", wedge)
            self._after_ready_problem(EngineState.WEDGED, wedge)
        elif self.state is EngineState.WEDGED and wedge is None and self._tokens_moved(now):
            self._set(EngineState.READY, "recovered: tokens are generated again")

    def _lost_node(self, now: float, reach: bool = True) -> tuple[str, str] | None:
        """The first node Ray lost for good (or, with ``reach``, the head cannot reach), and how to
        say it. While starting, reach alone is only evidence (a failure then names the node)."""
        for node in self.expected:
            link = self._links.get(node.name, ("connected", 0.0))[0]
            seen = self._missing.get(node.name)
            away = self._out_of_reach.get(node.name)
            if seen is not None and (now - seen.since >= RAY_LOST_AFTER or link != "connected"):
                at, why = _clock_text(seen.wall), seen.why
            elif node.name in self._raylet_gone:
                at = _clock_text(self._raylet_gone[node.name])
                why = "its raylet is not running; Ray has not declared it dead yet"
            elif reach and away is not None and (now - away[0] >= RAY_LOST_AFTER or link != "connected"):
                at, why = _clock_text(away[1]), "the head cannot reach it; Ray has not declared it dead yet"
            else:
                continue
            text = f"Ray lost {node.name} ({node.ip}) at {at} ({why})"
            if link != "connected":
                text += f"; its SSH link is {link} too"
            return node.name, text
        return None

    def _wedge(self, now: float) -> str | None:
        """Requests running or waiting while ``generation_tokens_total`` stood still for
        ``wedge_seconds``: the evidence text, else ``None``."""
        points = [p for p in self._serving if p[3] is not None]
        if not points:
            return None
        last_at, running, waiting, tokens = points[-1]
        if running + waiting <= 0:
            return None
        # Walk back while requests were in and the counter stood at the same value.
        since = last_at
        for at, run, wait, tok in reversed(points):
            if tok != tokens or run + wait <= 0:
                break
            since = at
        frozen = now - since
        if frozen < self.wedge_seconds:
            return None
        window = [p for p in points if now - p[0] <= EVIDENCE_SECONDS] or [points[-1]]
        peak = max(p[1] + p[2] for p in window)
        first = window[0][3] or 0.0
        text = (f"wedged: {running:.0f} request(s) running, {waiting:.0f} waiting, and "
                f"generation_tokens_total stuck at {tokens:.0f}, no token for {format_duration(frozen)} "
                f"(last minute: {len(window)} scrapes, up to {peak:.0f} requests in, "
                f"tokens {first:.0f} → {tokens:.0f})")
        gpu = self._gpu_evidence(now)
        if gpu:
            text += f"; {gpu}"
        return text + " — /health still answers; an NCCL hang between the nodes or a stuck kernel"

    def _tokens_moved(self, now: float) -> bool:
        points = [p for p in self._serving if p[3] is not None]
        return len(points) >= 2 and points[-1][3] != points[-2][3]

    def _gpu_evidence(self, now: float) -> str:
        fresh = {n: (w, u) for n, (at, w, u) in self._gpu.items() if now - at <= 10.0}
        if not fresh:
            return "GPU power not known"
        parts = []
        stuck = []
        for node, (watts, util) in sorted(fresh.items()):
            parts.append(f"{node} {_num(watts, 'W')} at {_num(util, '%')} util")
            if watts is not None and util is not None and util >= HIGH_UTIL_PERCENT \
                    and watts < self.wedge_power_w:
                stuck.append(node)
        text = "GPU " + ", ".join(parts)
        if stuck:
            text += (f" (below {self.wedge_power_w:g} W at high util on {', '.join(stuck)}: "
                     "busy-looking and doing nothing, stuck on GB10)")
        utils = [u for _, u in fresh.values() if u is not None]
        if len(utils) > 1 and max(utils) - min(utils) >= ASYMMETRY_PERCENT:
            text += "; GPU util asymmetric (one GPU waits for the other)"
        return text

    def _after_ready_problem(self, state: EngineState, detail: str) -> None:
        decision = self.budget.decide(self.auto_restart)
        self._set(state, f"{detail}; {decision.message}")
        self._effects.append(Tell(f"engine {state.value}: {detail}", "error"))
        self._restart(decision)

    def _fail_after_ready(self, detail: str, cause: str) -> None:
        self._record_end("crashed", cause)
        self._set(EngineState.FAILED, detail)
        self._effects.append(Unwatch())
        self._restart(self.budget.decide(self.auto_restart))

    def _restart(self, decision: RestartDecision) -> None:
        if self.budget.decider is not None:
            return   # the supervisor decides, and says what it does itself
        self._effects.append(Tell(decision.message, "warning" if decision.restart else "error"))
        if decision.restart:
            self.budget.restarted()
            self._effects.append(Restart(decision))

    def _record(self, outcome: str, ready_seconds: float | None = None) -> None:
        self.recorded = True
        self._effects.append(Record(outcome, self.run_started, ready_seconds, self.run_stamp))

    def _record_end(self, end: str, cause: str) -> None:
        """A run that reached ready ended: its record is updated (once) with how, when and why — also when
        this process only attached to it (the history merges it into the run's line by its stamp)."""
        if self.ended:
            return
        self.ended = True
        self._effects.append(Record("ready", self.run_started, None, self.run_stamp,
                                    end=end, ended_at=self.wall(), cause=cause[:300]))

    def _failure_text(self, snap: TimelineSnapshot) -> str:
        failure = snap.failure
        if failure is None:
            return "failed"
        where = "after ready" if failure.stage == "serving" else f"during {failure.stage}"
        on = self._failure_node(failure.node)
        return f"{failure.kind} {where}: {failure.message}{on}{self._node_evidence()}"

    def _failure_node(self, ip: str | None) -> str:
        """Where the log says the failure happened: the configured node with that IP (and the IP), or the IP
        alone when no configured node has it."""
        if ip is None:
            return ""
        name = node_label(ip, {n.ip: n.name for n in self.expected}, None)
        return f" (on {name}, {ip})" if name != ip else f" (on {ip})"

    def _node_evidence(self) -> str:
        """What points at a node: missing from Ray, or its SSH link down (now or during this run)."""
        named = []
        by_name = {n.name: n for n in self.expected}
        for name in sorted(set(self._missing) | set(self._link_drops) | set(self._out_of_reach)
                           | set(self._raylet_gone)
                           | {n for n, (phase, _) in self._links.items() if phase != "connected"}):
            bits = []
            if name in self._missing:
                bits.append(f"missing from Ray ({self._missing[name].why})")
            if name in self._raylet_gone:
                bits.append(f"its raylet not running since {_clock_text(self._raylet_gone[name])}")
            if name in self._out_of_reach:
                bits.append(f"out of the head's reach since {_clock_text(self._out_of_reach[name][1])}")
            phase, since = self._links.get(name, ("connected", 0.0))
            if phase != "connected":
                bits.append(f"SSH link {phase} since {_clock_text(since)}")
            elif name in self._link_drops:
                bits.append(f"its SSH link dropped at {_clock_text(self._link_drops[name])}")
            ip = f" ({by_name[name].ip})" if name in by_name else ""
            named.append(f"{name}{ip}: " + ", ".join(bits))
        return ("; evidence points at " + "; ".join(named)) if named else ""

    @property
    def wants_node_evidence(self) -> bool:
        """The log's verdict blames some node without saying which (a worker died, NCCL broke), on a
        multi-node engine, and no evidence (Ray, the SSH links, the head's reach) names one yet: worth a
        short wait, since Ray marks a killed node dead only after its health checks fail."""
        failure = self.snapshot.failure if self.snapshot is not None else None
        return (self._failed_by_log and len(self.expected) > 1 and failure is not None
                and failure.kind in PEER_FAILURE_KINDS and failure.node is None and not self._node_evidence())

    def _set(self, state: EngineState, detail: str) -> None:
        self._failed_by_log = False   # whoever sets a state says again whether the log's verdict it is
        watched = self.state is EngineState.VERIFYING or self.state in AFTER_READY
        if watched and state is not self.state and state not in AFTER_READY:
            # A later state cancels the readiness check (and the serving watch).
            self._effects.append(Unwatch())
        if state is not self.state or detail != self.detail:
            self.state, self.detail = state, detail
            self.version += 1


def _running_step(view: OperationView) -> str:
    if not view.steps and view.message:
        return view.message      # another sparktui's operation: its lock's holder, no steps of ours
    for step in view.steps:
        if step.status is StepStatus.RUNNING:
            return step.name + (f" on {step.node}" if step.node else "")
    return view.kind


def _nccl_caveat(facts: Mapping[str, object]) -> str:
    """Ready, but NCCL's verdict warns (sockets instead of RoCE, one HCA): said first, it stays on screen."""
    if facts.get("nccl_verdict_level") != "warning":
        return ""
    verdict = str(facts.get("nccl_verdict") or "")
    if verdict.startswith(SOCKET_WARNING):
        return "NCCL over TCP sockets (NET/Socket), not RoCE: every all-reduce is slower — "
    return f"{verdict} — "


def _clock_text(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall))


def _num(value: float | None, unit: str) -> str:
    return f"? {unit}" if value is None else f"{value:.0f} {unit}"
