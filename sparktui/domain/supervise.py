"""What the supervisor does about the engine's state, cause by cause (pure; clock injected).

``sparktui supervise`` runs the same evidence collection and state machine as the dashboard; this policy
turns each settled state into one action, per cause (``[supervise]`` in the config):

- a crash or an exit of vLLM → restart (``engine.restart = "vllm"`` keeps Ray when it is healthy);
- wedged (requests run, no token comes out) → restart;
- a start or restart of its own that did not bring the engine back to ready (a failed start, a vLLM
  restart not ready in time, the same failure again) → restart everything: Ray and every rank, the
  stop first, so nothing a half-done start left behind is met again;
- a worker lost after ready → wait ``worker_grace`` seconds for it, then restart everything;
- an NCCL error → restart everything (vLLM alone would meet the same broken communicator);
- out of memory (at start, or the memory guard's stop) → ``oom_retries`` tries, then "needs a person"
  with the sizing hint (a loop into the same OOM helps no one);
- not running while the desired state says serving (the head rebooted, a stop nobody asked for) → start,
  after ``start_delay`` (another sparktui's operation may be about to); a failed start, or an engine that
  never answered its first completion → restart (what is half up is stopped first);
- more than ``max_restarts`` starts and restarts within ``window`` seconds → "given up", told once.

A person's stop (the desired state ``stopped``) is never undone, and a person's start or restart after
"given up" or "needs a person" (the desired state set again) gives the budget back.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sparktui.config import SuperviseConfig
from sparktui.domain.events import EngineState


class Action(StrEnum):
    NONE = "none"
    #: Not serving, and a person wants it so: left alone (said once).
    HOLD = "hold"
    WAIT = "wait"
    START = "start"
    RESTART = "restart"            # as engine.restart says (vLLM alone when Ray is healthy)
    FULL_RESTART = "full_restart"  # every rank and Ray
    NEEDS_PERSON = "needs_person"
    GIVE_UP = "give_up"


class Cause(StrEnum):
    CRASHED = "crashed"
    WEDGED = "wedged"
    WORKER_LOST = "worker_lost"
    NCCL = "nccl"
    OOM = "oom"
    START_FAILED = "start_failed"
    NOT_RUNNING = "not_running"
    #: A node's boot id changed: recorded with its previous boot's cause (no action of its own; what the
    #: engine's state then is has its own cause).
    REBOOTED = "rebooted"


#: Failure kinds of the log (``domain/logs``) that mean memory ran out.
OOM_KINDS = frozenset({"oom", "kv_cache_insufficient", "free_memory_low"})
#: Acting on these evidence-worthy causes: the supervisor keeps an incident before it acts.
INCIDENT_CAUSES = frozenset({Cause.CRASHED, Cause.WEDGED, Cause.WORKER_LOST, Cause.NCCL, Cause.OOM,
                             Cause.START_FAILED})


@dataclass(frozen=True)
class Verdict:
    action: Action
    cause: Cause | None = None
    #: In words, for the supervisor's line and the incident.
    why: str = ""


def cause_of(state: EngineState, detail: str, failure_kind: str | None, *, was_ready: bool) -> Cause | None:
    """The cause behind a state that is not serving (None: serving, or on the way)."""
    if state is EngineState.WEDGED:
        return Cause.WEDGED
    if state is EngineState.DEGRADED:
        return Cause.WORKER_LOST
    if state is EngineState.FAILED:
        if failure_kind in OOM_KINDS or "memory guard" in detail:
            return Cause.OOM
        if failure_kind == "nccl" or "NCCL" in detail:
            return Cause.NCCL
        if "lost" in detail and ("node" in detail or "worker" in detail):
            return Cause.WORKER_LOST
        return Cause.CRASHED if was_ready else Cause.START_FAILED
    if state is EngineState.STOPPED:
        return Cause.OOM if "memory guard" in detail else Cause.NOT_RUNNING
    return None


class SupervisePolicy:
    """Decides, from the settled state, what to do now; told what was done (``acted``)."""

    def __init__(self, config: SuperviseConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        #: When the automatic starts and restarts in the window happened.
        self._acts: deque[float] = deque()
        self._oom_tries = 0
        #: Its starts and restarts since the engine was last ready: one that did not bring it back makes
        #: the next a full restart.
        self._unanswered = 0
        #: Since when the current problem has been seen (the worker's grace, the start delay).
        self._since: tuple[Cause, float] | None = None
        #: Set once given up (or "needs a person"): no more actions until a person starts the engine.
        self.stopped_trying: Verdict | None = None

    def decide(self, state: EngineState, cause: Cause | None, *, desired_serving: bool | None,
               busy: bool, nodes_down: tuple[str, ...] = ()) -> Verdict:
        """``desired_serving``: the desired state kept on the head says serving (True), stopped (False), or
        nothing was ever set (None: no one asked for it to serve, so it is not started). ``nodes_down``:
        nodes whose SSH link is down now — no start or restart can reach them, so none is tried (none is
        spent from the budget) until they are back."""
        now = self.clock()
        if state is EngineState.READY:
            self._since = None
            self._oom_tries = 0
            self._unanswered = 0
            return Verdict(Action.NONE)
        if cause is not None and not desired_serving:
            self._since = None
            why = ("a person stopped it: left stopped until someone starts it" if desired_serving is False
                   else "no one has asked for it to serve yet: `sparktui start` once, and it is kept serving")
            return Verdict(Action.HOLD, cause, why)
        if cause is None or busy or self.stopped_trying is not None:
            return Verdict(Action.NONE, cause)
        if nodes_down:
            return Verdict(Action.WAIT, cause, f"{', '.join(nodes_down)} cannot be reached: waiting for "
                                               "its link before starting anything")
        if self._since is None or self._since[0] is not cause:
            self._since = (cause, now)
        waited = now - self._since[1]
        if cause is Cause.WORKER_LOST and waited < self.config.worker_grace:
            left = self.config.worker_grace - waited
            return Verdict(Action.WAIT, cause, f"a worker is lost: waiting {left:.0f} s more for it")
        if cause is Cause.NOT_RUNNING and waited < self.config.start_delay:
            return Verdict(Action.WAIT, cause, "not running while it should serve: starting shortly")
        if cause is Cause.OOM and self._oom_tries >= self.config.oom_retries:
            return self._stop_trying(Verdict(
                Action.NEEDS_PERSON, cause,
                f"out of memory again after {self._oom_tries} retr{'y' if self._oom_tries == 1 else 'ies'}: "
                "lower serving.gpu_memory_utilization or max_model_len, then start it"))
        while self._acts and now - self._acts[0] > self.config.window:
            self._acts.popleft()
        if len(self._acts) >= self.config.max_restarts:
            return self._stop_trying(Verdict(
                Action.GIVE_UP, cause,
                f"{len(self._acts)} starts and restarts within {self.config.window:.0f} s: given up until a "
                "person starts it"))
        if cause in (Cause.WORKER_LOST, Cause.NCCL):
            return Verdict(Action.FULL_RESTART, cause, _WHY[cause])
        if self._unanswered:
            return Verdict(Action.FULL_RESTART, cause,
                           f"{_WHY[cause].split(':')[0]}, and the last start or restart did not bring it "
                           "back: restarting every rank and Ray")
        if cause is Cause.NOT_RUNNING:
            return Verdict(Action.START, cause, _WHY[cause])
        return Verdict(Action.RESTART, cause, _WHY[cause])

    def acted(self, verdict: Verdict) -> None:
        """The verdict's start or restart was run: it counts against the window."""
        if verdict.action in (Action.START, Action.RESTART, Action.FULL_RESTART):
            self._acts.append(self.clock())
            self._unanswered += 1
            self._since = None
            if verdict.cause is Cause.OOM:
                self._oom_tries += 1

    def person_started(self) -> None:
        """A person started or restarted the engine (the desired state set anew): try again from zero."""
        self.stopped_trying = None
        self._acts.clear()
        self._oom_tries = 0
        self._unanswered = 0
        self._since = None

    def _stop_trying(self, verdict: Verdict) -> Verdict:
        self.stopped_trying = verdict
        return verdict


_WHY = {
    Cause.CRASHED: "vLLM crashed after ready: restarting it",
    Cause.WEDGED: "wedged (requests run, no token comes out): restarting",
    Cause.WORKER_LOST: "a worker is still lost: restarting every rank and Ray",
    Cause.NCCL: "an NCCL error: restarting every rank and Ray",
    Cause.OOM: "out of memory: one more try",
    Cause.START_FAILED: "the start failed (or the engine never served): stopping what is up, starting again",
    Cause.NOT_RUNNING: "not running while it should serve: starting it",
}
