"""The supervisor: the dashboard's evidence collection and state machine with no screen, acting on each
settled state by its policy per cause (``sparktui.domain.supervise``), and saying what it sees and does,
one line per event.

It runs the same ``SshBackend`` as the dashboard (links, the head's log, Ray's view, the readiness and
serving watches, the memory guard), whose session leaves restarts to it (``restarts_by``). It reads the
engine's desired state on the head (``sparktui.domain.lifecycle.desired``): a person's stop is never
undone; an engine that should serve and does not is started. Before acting on a failure it keeps its
evidence (``on_incident``). Operations go through the operation lock like everyone's: a dashboard or a
CLI verb running one makes it wait.

It keeps its presence on the head (``sparktui.domain.presence``): who it is, a heartbeat, its last decision
and latest incident, for the dashboard and ``status`` (and the dashboard's auto-restart defers to a live
one); and each node's boot id, a changed one being a reboot looked into (``supervisor_presence``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    NodeLinkChanged,
    NodeSampled,
    Notice,
    OperationBusy,
    OperationChanged,
    OperationRefused,
)
from sparktui.domain.lifecycle.desired import Desired, DesiredState
from sparktui.domain.presence import LastDecision, LastIncident, SupervisorPresence
from sparktui.domain.supervise import INCIDENT_CAUSES, Action, Cause, SupervisePolicy, Verdict, cause_of
from sparktui.domain.wall_time import iso
from sparktui.remote.backend import SshBackend
from sparktui.remote.operations import SUPERVISED
from sparktui.remote.supervisor_presence import (
    BootIdPort,
    IncidentPort,
    PostmortemPort,
    PresenceKeeper,
)

log = logging.getLogger(__name__)

#: What the supervisor names itself in the operation lock and the desired state.
ORIGIN = "`sparktui supervise`"
#: How often the desired state is read from the head when nothing happens (a person's start or stop
#: elsewhere changes it; an operation's end reads it at once).
DESIRED_EVERY = 5.0
#: How often the policy is asked again without a new event (the worker's grace, the start delay).
DECIDE_EVERY = 1.0

#: ``(incident id, action, seconds to serving again or None)``: what became of it.
IncidentOutcome = Callable[[str, str, float | None], None]
#: The last minutes of readings kept for an incident (per node, at the probe's rate).
TELEMETRY_KEPT = 600
#: A reading's figures kept for an incident (the charts' histories left out).
_TELEMETRY_FIELDS = ("mem_available_gib", "mem_used_gib", "cpu_percent", "gpu_util", "gpu_temp_c",
                     "gpu_power_w", "gpu_clock_mhz", "gpu_clock_events", "gpu_xids", "gpu_mem_used_gib")
#: One line of what the supervisor sees or does: a JSON-ready mapping with ``at`` and ``event``.
Emit = Callable[[dict[str, Any]], None]


async def _no_incident(cause: Cause, node: str | None, detail: str, *,
                       evidence: Mapping[str, str] | None = None, action: str = "") -> str | None:
    """No incident store plugged: the supervisor acts on the verdict alone."""
    del cause, node, detail, evidence, action
    return None


def _no_outcome(_incident: str, _action: str, _seconds: float | None) -> None:
    """No incident store plugged."""


class Supervisor:
    def __init__(self, config: SparkConfig, emit: Emit, *, on_incident: IncidentPort = _no_incident,
                 on_outcome: IncidentOutcome = _no_outcome, backend: SshBackend | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 boot_id: BootIdPort | None = None, postmortem: PostmortemPort | None = None) -> None:
        self.config = config
        self.emit = emit
        self.on_incident = on_incident
        self.on_outcome = on_outcome
        #: Each node's recent readings (a dict of figures each), for an incident's telemetry.
        self.telemetry: deque[dict[str, Any]] = deque(maxlen=TELEMETRY_KEPT * len(config.nodes))
        #: The incident the last action answered, and when: closed at the next ready.
        self._open_incident: tuple[str, float] | None = None
        self.backend = backend or SshBackend(config, origin=ORIGIN, restarts_by="the supervisor")
        self.policy = SupervisePolicy(config.supervise, clock)
        self.engine: EngineChanged | None = None
        self.busy: str | None = None
        self.was_ready = False
        self.desired: DesiredState | None = None
        self._desired_read = float("-inf")
        self._wake = asyncio.Event()
        self._clock = clock
        self._last_verdict: Verdict | None = None
        #: Each node's SSH link phase, as last posted.
        self.links: dict[str, str] = {}
        #: The start or restart the supervisor runs now, if any.
        self._operation: asyncio.Task[None] | None = None
        self._wall = wall
        #: Its presence on the head and the nodes' boot ids (a reboot looked into, kept as an incident).
        self.keeper = PresenceKeeper(config, self.backend, self._line, self.links, on_incident=on_incident,
                                     clock=clock, wall=wall, boot_id=boot_id, postmortem=postmortem)

    # -- what it sees --------------------------------------------------------------------------------
    def sink(self, event: Event) -> None:
        match event:
            case EngineChanged():
                moved = self.engine is None or (event.state, event.detail) != (self.engine.state,
                                                                                self.engine.detail)
                self.engine = event
                if event.state is EngineState.READY:
                    self.was_ready = True
                    if self._open_incident is not None:
                        incident, since = self._open_incident
                        self._open_incident = None
                        self.on_outcome(incident, "", self._clock() - since)
                        self.keeper.served_again(incident, self._clock() - since)
                elif event.state in (EngineState.STARTING, EngineState.PREFLIGHT):
                    self.was_ready = False
                if moved:
                    self._line("state", state=event.state.value, detail=event.detail)
                    self._wake.set()
            case OperationBusy():
                if event.kind is None and self.busy is not None:
                    self._desired_read = float("-inf")   # an operation ended: what is wanted may have too
                self.busy = event.kind
                self._wake.set()
            case OperationChanged() if not event.operation.running:
                op = event.operation
                self._line("operation", kind=op.kind, ok=op.ok, detail=op.message)
                self._desired_read = float("-inf")
                self._wake.set()
            case NodeSampled():
                reading = event.reading
                self.telemetry.append({"node": event.node, "at": iso(time.time()),
                                       **{f: getattr(reading, f) for f in _TELEMETRY_FIELDS}})
            case NodeLinkChanged():
                if event.phase == "connected" and self.links.get(event.node) != "connected":
                    self.keeper.link_up(event.node)   # a link up (again): a reboot?
                self.links[event.node] = event.phase
                self._line("link", node=event.node, phase=event.phase, detail=event.describe())
                self._wake.set()
            case Notice() if event.severity in ("warning", "error"):
                self._line("notice", severity=event.severity, detail=event.message)
            case _:
                pass

    def _line(self, event: str, **fields: Any) -> None:
        self.emit({"at": iso(time.time()), "event": event, **fields})

    # -- what it does --------------------------------------------------------------------------------
    async def run(self) -> None:
        """Until cancelled: the backend's watch, and the policy asked at each change (and each second)."""
        self._line("started", cluster=self.config.cluster.name, head=self.config.head.name)
        watch = asyncio.create_task(self.backend.run(self.sink), name="supervisor backend")
        presence = asyncio.create_task(self.keeper.run(), name="supervisor presence")
        try:
            while not watch.done():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(DECIDE_EVERY):
                        await self._wake.wait()
                self._wake.clear()
                await self.decide()
            watch.result()   # a backend that ended by itself ends the supervisor (its error with it)
        finally:
            presence.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await presence
            await self.keeper.say_ended()
            for task in (self._operation, *self.keeper.reboots, watch):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            self._line("ended")

    @property
    def operation(self) -> asyncio.Task[None] | None:
        """The start or restart the supervisor runs now (or ran last)."""
        return self._operation

    async def decide(self) -> None:
        """One look: the policy asked about the state now, and its verdict carried out (an operation is
        started in its own task: ``operation``)."""
        engine = self.engine
        controller = self.backend.controller
        if engine is None or controller is None:
            return
        await self._read_desired()
        serving = None if self.desired is None else self.desired.state is Desired.SERVING
        failure = engine.timeline.failure if engine.timeline is not None else None
        cause = cause_of(engine.state, engine.detail, failure.kind if failure else None,
                         was_ready=self.was_ready)
        acting = self._operation is not None and not self._operation.done()
        down = tuple(sorted(n for n, phase in self.links.items() if phase != "connected"))
        verdict = self.policy.decide(engine.state, cause, desired_serving=serving,
                                     busy=acting or self.busy is not None or controller.busy is not None,
                                     nodes_down=down)
        if verdict.action is Action.NONE:
            self._last_verdict = None
            return
        last = self._last_verdict
        if last is not None and (last.action, last.cause) == (verdict.action, verdict.cause):
            return   # said already (a wait's countdown is not news)
        self._last_verdict = verdict
        if verdict.action is Action.NEEDS_PERSON and failure is not None and failure.hint:
            # The log's own advice for this failure (the flags to lower) is the sizing a person needs.
            verdict = replace(verdict, why=f"{verdict.why}. The log's advice: {failure.hint}")
        cause_name = verdict.cause.value if verdict.cause else None
        self._line("decision", action=verdict.action.value, cause=cause_name, detail=verdict.why)
        self.keeper.note(decision=LastDecision(verdict.action.value, cause_name, verdict.why, self._wall()))
        if verdict.action in (Action.WAIT, Action.HOLD):
            return
        if verdict.cause is not None and verdict.cause in INCIDENT_CAUSES:
            node = failure.node if failure else None
            try:
                incident = await self.on_incident(verdict.cause, node, engine.detail)
            except Exception:   # the evidence is worth keeping; the engine's serving is worth more
                log.exception("incident not kept")
                incident = None
            if incident is not None:
                self._line("incident", id=incident, cause=verdict.cause.value, node=node,
                           detail=engine.detail)
                self.on_outcome(incident, verdict.action.value, None)
                self._open_incident = (incident, self._clock())
                self.keeper.note(incident=LastIncident(incident, verdict.cause.value, node, self._wall(),
                                                 verdict.action.value))
        if verdict.action in (Action.GIVE_UP, Action.NEEDS_PERSON):
            self.backend.events.post(Notice(f"supervisor: {verdict.why}", "error"))
            return
        await self._act(verdict)

    async def _act(self, verdict: Verdict) -> None:
        """Start the verdict's operation in its own task (the supervisor keeps watching meanwhile)."""
        self.policy.acted(verdict)
        self._operation = asyncio.create_task(self._operate(verdict), name=f"supervisor {verdict.action}")

    async def _operate(self, verdict: Verdict) -> None:
        try:
            await self.backend.operations.supervised(SUPERVISED[verdict.action])
        except OperationRefused as exc:   # someone else's operation: it decides what runs next
            self._line("decision", action="wait", cause=verdict.cause.value if verdict.cause else None,
                       detail=f"not now: {exc}")
        finally:
            self._last_verdict = None
            self._wake.set()

    async def _read_desired(self) -> None:
        now = self._clock()
        controller = self.backend.controller
        if controller is None or now - self._desired_read < DESIRED_EVERY:
            return
        self._desired_read = now
        desired = await controller.desired()
        if desired is None:
            return
        previous = self.desired
        self.desired = desired
        if previous is None or (desired.at, desired.state) != (previous.at, previous.state):
            self._line("desired", state=desired.state.value, by=desired.by, detail=desired.describe())
            if previous is not None and desired.by != ORIGIN and desired.state is Desired.SERVING:
                self.policy.person_started()

    # -- its presence on the head, and the nodes' boots (``supervisor_presence``) ---------------------
    @property
    def presence(self) -> SupervisorPresence | None:
        """Its record on the head; ``None`` until the one there was read."""
        return self.keeper.presence

    @property
    def reboots(self) -> tuple[asyncio.Task[None], ...]:
        return self.keeper.reboots

    async def keep_presence_once(self) -> None:
        await self.keeper.keep_once()
