"""One engine session: the engine state machine of one cluster, fed and obeyed in one place.

Every watcher of an engine — the dashboard's SSH backend, ``start --wait``, ``status`` and the demo — collects
its evidence its own way (SSH links, the head's log, Ray's node list, the serving watch, simulated time) and
hands it to an ``EngineSession``. The session is the only place that builds ``EngineTruth``
(``sparktui.domain.engine_state``); after each piece of evidence it does what the state machine asks,
through small ports the watcher injects (``EnginePorts``): run the readiness check, cancel it, write the run
to the history, restart the engine, show the engine's state, watch Ray or not, and tell the person
(published as ``Notice`` events). A watcher that needs none of them (``status``'s one reading) injects none.

The restart policy lives here too: the budget (``serving.auto_restart_limit``) is the session's, a manual
start or restart earns it back (``manual_start``), and a crash, a wedge or a lost node after ready asks it
(the state machine's rule) — when it allows, the ``restart`` port runs the restart. No UI is involved: a
headless process holding a session restarts the engine the same way.

Pure: no I/O, no clock of its own (``clock``/``wall`` are injected and passed to the state machine), so a
test drives it with a fake clock and fake ports.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparktui.domain.engine_state import Clock, EngineTruth, Record, Restart, Tell, Unwatch, Verify
from sparktui.domain.events import EngineState, EventSink, Notice, OperationView
from sparktui.domain.readiness import Crash, RestartBudget, RestartDecision

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.domain.lifecycle.ray_state import ExpectedNode, RayState
    from sparktui.domain.logs import TimelineSnapshot
    from sparktui.domain.serving import ServingSnapshot
    from sparktui.domain.telemetry import Sample


def _nothing() -> None:
    """A port nobody plugged: the effect is not this watcher's business."""


def _ignore(_value: object) -> None:
    """A port with an argument nobody plugged."""


@dataclass(frozen=True)
class EnginePorts:
    """What the session asks its watcher to do. Each port defaults to doing nothing (``status`` and
    ``start --wait`` only read the state; the demo simulates the readiness check and never restarts).

    Order at each settle: ``show`` (the state, if it moved, is shown before what follows from it), then
    the effects in the order the state machine asked for them, then ``watch_ray``.
    """

    #: Run the readiness check (health, models, one completion) now.
    verify: Callable[[], None] = _nothing
    #: Cancel the readiness check and the serving watch: a later state outranks them.
    unwatch: Callable[[], None] = _nothing
    #: Write this run to the history.
    record: Callable[[Record], None] = _ignore
    #: Restart the engine now: the budget allowed it (``decision.message`` says which attempt).
    restart: Callable[[RestartDecision], None] = _ignore
    #: The session's typed events (``Notice``: what the person is told once).
    publish: EventSink = _ignore
    #: Show the engine's state (the watcher posts it when it moved).
    show: Callable[[], None] = _nothing
    #: Whether Ray's node list (and the head's reach) is evidence now: watch it only then.
    watch_ray: Callable[[bool], None] = _ignore


class EngineSession:
    """One cluster's engine state machine with its restart budget, fed evidence, applying its effects.

    Each ``feed``-style method gives the state machine one piece of evidence and settles (applies what it
    asked for) at once — unless the caller holds the session (``with session.held():``) to give several
    pieces as one reading, settled when the hold ends (or by ``settle()``).
    """

    def __init__(
        self,
        expected: Sequence[ExpectedNode] = (),
        *,
        ports: EnginePorts | None = None,
        tensor_parallel: int = 1,
        wedge_seconds: float = 60.0,
        wedge_power_w: float = 30.0,
        auto_restart: bool = False,
        restart_limit: int = 3,
        stop_steps: frozenset[str] = frozenset(),
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        truth: EngineTruth | None = None,
    ) -> None:
        self.ports = ports or EnginePorts()
        #: The restart budget: counts automatic restarts since the last manual start.
        self.budget = truth.budget if truth is not None else RestartBudget(restart_limit)
        #: The state machine (read it; feed it through the session).
        self.truth = truth if truth is not None else EngineTruth(
            expected, tensor_parallel=tensor_parallel, wedge_seconds=wedge_seconds,
            wedge_power_w=wedge_power_w, auto_restart=auto_restart, budget=self.budget,
            stop_steps=stop_steps, clock=clock, wall=wall)
        self._held = 0

    @classmethod
    def for_config(cls, config: SparkConfig, *, ports: EnginePorts | None = None,
                   clock: Clock = time.monotonic, wall: Clock = time.time,
                   restarts_by: str | None = None) -> EngineSession:
        """The session of the configured cluster: its nodes, its serving rules, its restart budget
        (``restarts_by``: someone else decides restarts — the supervisor, by its policy per cause)."""
        budget = RestartBudget(config.serving.auto_restart_limit, decider=restarts_by)
        truth = EngineTruth.from_config(config, budget=budget, clock=clock, wall=wall)
        return cls(ports=ports, truth=truth)

    # -- reading -----------------------------------------------------------------------------------
    @property
    def state(self) -> EngineState:
        return self.truth.state

    @property
    def detail(self) -> str:
        return self.truth.detail

    @property
    def version(self) -> int:
        """Bumped on every change of state or detail."""
        return self.truth.version

    @property
    def ready_at(self) -> float | None:
        return self.truth.ready_at

    @property
    def ttft_seconds(self) -> float | None:
        return self.truth.ttft_seconds

    @property
    def vllm_version(self) -> str | None:
        return self.truth.vllm_version

    @property
    def watching_ray(self) -> bool:
        return self.truth.watching_ray

    @property
    def wants_node_evidence(self) -> bool:
        return self.truth.wants_node_evidence

    # -- the restart policy ------------------------------------------------------------------------
    def manual_start(self) -> None:
        """The person started (or restarted) the engine: the automatic restarts' budget is whole again."""
        self.budget.manual_start()

    def defer_restarts(self, to: str | None) -> bool:
        """A live supervisor (``to`` names it) decides restarts, not this session's budget: with both
        auto-restarting, only one may act. ``None``: none is there (any more), the budget decides again.
        Whether that changed."""
        if self.budget.decider == to:
            return False
        self.budget.decider = to
        return True

    # -- settling ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def held(self) -> Iterator[EngineSession]:
        """Several pieces of evidence as one reading: effects wait until the hold ends."""
        self._held += 1
        try:
            yield self
        finally:
            self._held -= 1
            if not self._held:
                self.settle()

    def settle(self) -> None:
        """Show the state if it moved, do what the state machine asks, follow Ray or not."""
        ports = self.ports
        ports.show()
        for effect in self.truth.take_effects():
            if isinstance(effect, Verify):
                ports.verify()
            elif isinstance(effect, Unwatch):
                ports.unwatch()
            elif isinstance(effect, Record):
                ports.record(effect)
            elif isinstance(effect, Tell):
                ports.publish(Notice(effect.message, effect.severity))
            elif isinstance(effect, Restart):
                ports.restart(effect.decision)
        ports.watch_ray(self.truth.watching_ray)

    def _fed(self) -> None:
        if not self._held:
            self.settle()

    # -- evidence (see ``EngineTruth`` for what each means) ---------------------------------------
    def discovered(self, state: EngineState, detail: str, *, again: bool = False) -> None:
        self.truth.discovered(state, detail, again=again)
        self._fed()

    def unreachable(self, detail: str) -> None:
        self.truth.unreachable(detail)
        self._fed()

    def operation(self, view: OperationView) -> None:
        self.truth.operation(view)
        self._fed()

    def timeline(self, snapshot: TimelineSnapshot) -> None:
        self.truth.timeline(snapshot)
        self._fed()

    def engine_started(self, stamp: float, local: float) -> None:
        """The head's stamp of the running engine's start, and that moment on this process's clock."""
        self.truth.engine_started(stamp, local)

    def verified(self, ttft_seconds: float | None = None, vllm_version: str | None = None) -> None:
        self.truth.verified(ttft_seconds, vllm_version)
        self._fed()

    def verify_failed(self, detail: str) -> None:
        self.truth.verify_failed(detail)
        self._fed()

    def crashed(self, crash: Crash) -> None:
        self.truth.crashed(crash)
        self._fed()

    def process(self, alive: bool) -> None:
        self.truth.process(alive)
        self._fed()

    def ray(self, state: RayState | None, *, settled: bool = False) -> None:
        self.truth.ray(state, settled=settled)
        self._fed()

    def link(self, node: str, phase: str) -> None:
        self.truth.link(node, phase)
        self._fed()

    def peer(self, node: str, reachable: bool) -> None:
        self.truth.peer(node, reachable)
        self._fed()

    def raylet(self, node: str, running: bool, *, settled: bool = False) -> None:
        before = self.truth.version
        self.truth.raylet(node, running, settled=settled)
        if self.truth.version != before:
            # Settled only when the state moved: the dashboard gives one per node every refresh.
            self._fed()

    def serving(self, snapshot: ServingSnapshot) -> None:
        self.truth.serving(snapshot)
        self._fed()

    def gpu(self, node: str, sample: Sample) -> None:
        # Not settled: no rule runs on a GPU sample alone (it is the wedge rule's evidence, weighed at the
        # next tick), and the dashboard gives one per node every refresh.
        self.truth.gpu(node, sample)

    def memory_stopped(self, detail: str) -> None:
        self.truth.memory_stopped(detail)
        self._fed()

    def tick(self) -> None:
        self.truth.tick()
        self._fed()
