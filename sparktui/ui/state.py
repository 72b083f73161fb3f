"""What the dashboard knows: the latest of every backend event, kept in plain objects.

No Textual here: the app drains the backend's events on a timer, stores each in its place here (one
``match`` in ``SparkApp``, beside the redraw it asks for), and re-renders only the parts that changed. That
keeps the rendering rate independent of the event rate. The rules over what is kept live here: a sample
gone stale, the two-node hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sparktui.domain.asymmetry import AsymmetryWatch
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    ImageSeen,
    NodeIdentified,
    NodeReading,
    OperationView,
    SupervisorSeen,
    UpgradeSeen,
    link_text,
)
from sparktui.domain.serving import ServingSnapshot
from sparktui.domain.telemetry import DEFAULT_HISTORY, stale_seconds

#: Points in each sparkline (one per sample, kept by the producer's ``NodeTelemetry.history``; 120 ≈ two
#: minutes at the default 1 s refresh).
HISTORY_POINTS = DEFAULT_HISTORY


@dataclass
class NodeState:
    name: str
    role: str = "worker"
    link_phase: str = "connecting"
    #: The last connection error ("Connection refused"), as the backend's ``NodeLinkChanged`` said it.
    link_error: str = ""
    retry_at: float | None = None
    #: Why the link is down, whole (shown wrapped under the title); "" when up.
    link_reason: str = ""
    facts: NodeIdentified | None = None
    #: The latest reading as the producer built it (values, rates, the charts' history).
    reading: NodeReading | None = None
    sampled_at: float | None = None
    #: Seconds since the last sample, once that is longer than a few refresh intervals (else None):
    #: ``telemetry.stale_seconds`` evaluated on every refresh tick (``update_staleness``), never on arrival.
    stale_seconds: float | None = None

    def link_summary(self, now_monotonic: float | None = None) -> str:
        """The title's part: the phase and the countdown (``retrying in 4 s``); the reason has its line."""
        if not self.link_reason:
            return self.link_text(now_monotonic)
        if self.link_phase == "retrying" and self.retry_at is not None:
            now = time.monotonic() if now_monotonic is None else now_monotonic
            return f"retrying in {max(0, round(self.retry_at - now))} s"
        return self.link_phase

    def link_text(self, now_monotonic: float | None = None) -> str:
        """``connected`` / ``connecting`` / ``retrying in 4 s (Connection refused)`` / ``failed (…)``: the
        backend's facts in ``events.link_text``'s words, the countdown at ``now_monotonic``."""
        retry_in = None
        if self.retry_at is not None:
            retry_in = self.retry_at - (time.monotonic() if now_monotonic is None else now_monotonic)
        return link_text(self.link_phase, self.link_error, retry_in)


class DashboardState:
    """The latest of everything, per node and for the engine."""

    def __init__(
        self,
        nodes: Sequence[tuple[str, str]],
        clock: Callable[[], float] = time.time,
        asymmetry_seconds: float = 60.0,
    ) -> None:
        self.clock = clock
        self.nodes: dict[str, NodeState] = {name: NodeState(name, role) for name, role in nodes}
        self.engine = EngineChanged(EngineState.UNKNOWN)
        self.operation: OperationView | None = None
        #: The kind of operation the backend has taken on (``OperationBusy``): set from the moment it is
        #: asked for, before the operation's first view arrives.
        self.busy: str | None = None
        self.serving: ServingSnapshot | None = None
        self.asymmetry = AsymmetryWatch(asymmetry_seconds)
        self.asymmetry_warning: str | None = None
        #: The supervisor's record on the head as last read (``None`` inside: there never was one).
        self.supervisor: SupervisorSeen | None = None
        #: The engine image a start uses, as last read (docker; ``None``: not read yet).
        self.image: ImageSeen | None = None
        #: The last upgrade's one line, as its record on the head was last read (``None``: not read yet).
        self.upgrade: UpgradeSeen | None = None

    def node(self, name: str) -> NodeState:
        # A node the config did not name (a re-attached cluster that grew): show it rather than drop it.
        if name not in self.nodes:
            self.nodes[name] = NodeState(name)
        return self.nodes[name]

    @property
    def operation_running(self) -> bool:
        return self.operation is not None and self.operation.running

    @property
    def running_kind(self) -> str | None:
        """The operation that runs now, as the backend's events say: the one it shows (ours, or another
        sparktui's under the operation lock), else the one it has taken on."""
        return self.operation.kind if self.operation_running and self.operation is not None else self.busy

    def update_staleness(self, interval: float) -> set[str]:
        """Mark nodes whose samples stopped arriving (probe or link gone quiet); returns the names of the
        changed ones."""
        now = self.clock()
        changed = set()
        for n in self.nodes.values():
            stale = stale_seconds(n.sampled_at, now, interval)
            if (stale is None) != (n.stale_seconds is None) or stale is not None:
                changed.add(n.name)
            n.stale_seconds = stale
        return changed

    def engine_should_work(self) -> bool:
        state = self.engine.state
        if state in (EngineState.STARTING, EngineState.VERIFYING):
            running = self.engine.timeline.running if self.engine.timeline is not None else None
            return running is not None and running.name not in ("config", "placement", "weights")
        if state in (EngineState.READY, EngineState.WEDGED):
            return self.serving is not None and bool(self.serving.requests_running)
        return False

    def check_asymmetry(self) -> str | None:
        utils = {n.name: (n.reading.gpu_util if n.reading else None) for n in self.nodes.values()}
        self.asymmetry_warning = self.asymmetry.update(self.clock(), self.engine_should_work(), utils)
        return self.asymmetry_warning

