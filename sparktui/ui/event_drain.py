"""How the dashboard consumes its backend: ``backend.run(sink)`` runs as an async worker for the app's
lifetime; the sink only appends events to an in-memory queue (cheap, and safe from any thread). A timer drains
the queue: each event, matched by its type, is stored in ``DashboardState`` and marks the panel it changes
(``Redraw``); log records are queued in the log pane; then only what changed is re-rendered, so the screen
refresh rate never depends on how fast events arrive. A 1 s tick redraws what moves without events.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from textual.css.query import NoMatches
from textual.dom import NoScreen
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.widgets import Static

from sparktui.config import UIConfig
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    ImageSeen,
    LogRecords,
    NodeIdentified,
    NodeLinkChanged,
    NodeSampled,
    Notice,
    OperationBusy,
    OperationChanged,
    ServingSampled,
    SupervisorSeen,
    UpgradeSeen,
)
from sparktui.domain.history import RunRecord
from sparktui.ui.operations import Operations
from sparktui.ui.state import DashboardState
from sparktui.ui.widgets.engine_panel import EnginePanel, ServingView
from sparktui.ui.widgets.log_pane import LogPane
from sparktui.ui.widgets.node_panel import NodePanel
from sparktui.ui.widgets.util import node_widget_id, show

#: How often queued events are applied and queued log lines written (Hz). 20 Hz: smooth enough to read a
#: live bar, rare enough that a flood of 100k lines/s costs 20 ``write_lines`` calls a second, and small
#: enough batches (5,000 lines at that rate) that a key press never waits long behind one.
FLUSH_HZ = 20.0

#: The clock of what moves without events (elapsed times, the ETA, retry countdowns, staleness).
TICK_SECONDS = 1.0

#: Engine states whose panel shows a clock (a stage's elapsed time, the ETA, a stall): redrawn each tick.
_CLOCKED_STATES = frozenset({EngineState.PREFLIGHT, EngineState.STARTING, EngineState.VERIFYING,
                             EngineState.STOPPING})



@dataclass
class Redraw:
    """What one drain changed, to re-render once: node panels by name, the engine panel (with the
    controls), the operation's fix offer, the serving line, the two-node-hang check."""

    nodes: set[str] = field(default_factory=set)
    engine: bool = False
    controls: bool = False
    operation: bool = False
    serving: bool = False
    asymmetry: bool = False
    supervisor: bool = False



class EventDrain(Operations):
    """Part of ``SparkApp`` (``sparktui.ui.app``), which sets what is declared here."""

    state: DashboardState
    ui_config: UIConfig
    clock: Callable[[], float]
    #: Earlier starts of the same model and image, for the stage ETAs (read again at each new start).
    history: Callable[[], Sequence[RunRecord]] | None
    _runs: Sequence[RunRecord]
    _shown_state: EngineState
    _inbox: deque[Event]
    #: The one-shot timer of the next drain, armed by the first event of a batch (``sink``): an idle
    #: dashboard has no drain timer at all, a busy one drains at most ``FLUSH_HZ`` times a second.
    _drain_timer: Timer | None
    #: When a drain last applied a node sample, and when the tick last ran (monotonic: real time, which
    #: ``clock``, the time shown, need not be; see _tick).
    _sampled_at: float | None
    _ticked_at: float
    _node_panels: dict[str, NodePanel]
    events_applied: int
    #: Ticks run so far (:meth:`_tick_now`): what a test waits for instead of a second of wall time.
    ticks: int
    #: The tick's period: ``TICK_SECONDS``, shorter in tests.
    tick_seconds: float

    # ---- event intake -----------------------------------------------------------------------------
    def sink(self, event: Event) -> None:
        """The ``EventSink`` given to the backend: queue only (``deque.append`` is atomic)."""
        self._inbox.append(event)
        if self._drain_timer is None:
            self._arm_drain()

    @property
    def drain_pending(self) -> bool:
        """Whether a drain is armed (events wait in the inbox): never, on an idle dashboard."""
        return self._drain_timer is not None

    def _arm_drain(self) -> None:
        self._drain_timer = self.set_timer(1.0 / FLUSH_HZ, self._timed_drain, name="drain")

    def _timed_drain(self) -> None:
        self._drain_timer = None
        written = self.drain()
        if written and self._drain_timer is None:
            # Once more after the lines are laid out: a long line's new horizontal scrollbar moves the end,
            # and following means staying at it (LogPane.flush).
            self._arm_drain()

    def drain(self) -> int:
        """Apply every queued event, then re-render what changed and write the queued log lines; returns
        the number of log lines written."""
        try:
            return self._drain()
        except (NoMatches, NoScreen):
            # Every widget queried here exists for the app's whole life, except while it is being torn
            # down, when the timer can fire once more after the widgets are gone.
            return 0

    def _drain(self) -> int:
        pane = self.query_one(LogPane)
        inbox = self._inbox
        state = self.state
        redraw = Redraw()
        notices: list[Notice] = []
        sampled = False
        while inbox:
            event = inbox.popleft()
            self.events_applied += 1
            # Each event kept in its place, and the part of the screen it changes marked (drawn once below).
            match event:
                case LogRecords():
                    pane.add_records(event.source, event.records)
                case Notice():
                    notices.append(event)
                case NodeSampled():
                    node = state.node(event.node)
                    node.reading, node.sampled_at = event.reading, self.clock()
                    redraw.nodes.add(node.name)
                    redraw.asymmetry = True
                    sampled = True
                case NodeLinkChanged():
                    node = state.node(event.node)
                    node.link_phase, node.link_error = event.phase, event.error
                    node.retry_at, node.link_reason = event.retry_at, event.reason
                    redraw.nodes.add(node.name)
                case NodeIdentified():
                    state.node(event.node).facts = event
                    redraw.nodes.add(event.node)
                case EngineChanged():
                    state.engine = event
                    redraw.engine = True
                case OperationChanged():
                    state.operation = event.operation
                    redraw.engine = redraw.operation = True
                case OperationBusy():
                    state.busy = event.kind
                    redraw.controls = True
                case ServingSampled():
                    state.serving = event.snapshot
                    redraw.serving = True
                case SupervisorSeen():
                    state.supervisor = event
                    redraw.supervisor = True
                case ImageSeen():
                    state.image = event
                    redraw.supervisor = True
                case UpgradeSeen():
                    state.upgrade = event
                    redraw.supervisor = True
        with self.batch_update():
            self._render(redraw)
            if sampled:
                self._tick_with_samples()
            written = pane.flush()
        for notice in notices:
            self.notify(notice.message, severity=_severity(notice.severity))
        return written

    def _render(self, redraw: Redraw) -> None:
        for name in redraw.nodes:
            self._render_node(name)
        if redraw.engine:
            self._render_engine()
        if redraw.engine or redraw.controls:
            self._update_controls()
        if redraw.operation:
            self._offer_fixes()
        if redraw.serving or redraw.engine:
            self.query_one(ServingView).show(self.state.serving, self.smoke_result)
        if redraw.asymmetry:
            self._render_asymmetry()
        if redraw.supervisor:
            self.query_one(EnginePanel).show_supervisor(self.state.supervisor, self.state.image,
                                                          self.state.upgrade)

    def _render_node(self, name: str) -> None:
        # Looked up once (a query walks the DOM, and this runs for every sample of every node).
        panel = self._node_panels.get(name)
        if panel is None or not panel.is_attached:  # a recomposed layout made new panels
            panels = self.query(f"#{node_widget_id(name)}")
            if not panels:
                return
            panel = self._node_panels[name] = panels.first(NodePanel)
        panel.refresh_from_state()

    def _render_engine(self, tick: bool = False) -> None:
        state = self.state.engine.state
        if state is not self._shown_state:
            if state in (EngineState.PREFLIGHT, EngineState.STARTING) and self.history is not None:
                try:
                    self._runs = list(self.history())
                except Exception as exc:  # a broken history file must not break the dashboard
                    self._runs = ()
                    self.notify(f"run history unreadable: {exc}", severity="warning")
            self._shown_state = state
        self.query_one(EnginePanel).show(self.state.engine, self.state.operation, self.clock(), self._runs,
                                         tick=tick)

    def _render_asymmetry(self) -> None:
        warning = self.state.check_asymmetry()
        box = self.query_one("#asymmetry", Static)
        box.display = warning is not None
        if warning:
            show(box, f"⚠ {warning}")

    def _tick(self) -> None:
        """The 1 s timer: the tick, unless it rides the node samples' frames (:meth:`_tick_with_samples`)."""
        if not self._ticks_with_samples():
            self._tick_now()

    def _ticks_with_samples(self) -> bool:
        """Whether node samples arrive at the tick's rate (they come on the nodes' whole seconds, every
        node's together). Then the tick is drawn in their frame: one frame a second instead of two, during
        a start (a stage's elapsed time) and whenever a link is down (its countdown). The timer takes over
        within 1.5 s when samples stop."""
        tick = self.tick_seconds
        return (self.ui_config.refresh_interval <= tick and self._sampled_at is not None
                and time.monotonic() - self._sampled_at < 1.5 * tick)

    def _tick_with_samples(self) -> None:
        """In a drain that applied a node sample: the tick, if one is due (half a tick since the last, so
        two nodes' samples a few milliseconds apart draw it once)."""
        self._sampled_at = now = time.monotonic()
        if self._ticks_with_samples() and now - self._ticked_at >= 0.5 * self.tick_seconds:
            self._tick_now()

    def _tick_now(self) -> None:
        """Once a second: what moves without events — elapsed times and the ETA while an operation or a
        start runs, retry countdowns of links that are down, samples gone stale, the two-node-hang check
        while the engine should be working. Nothing else is touched: an idle dashboard repaints nothing."""
        self._ticked_at = time.monotonic()
        self.ticks += 1
        nodes, clock = self._tick_targets()
        try:
            with self.batch_update():
                for name in nodes:
                    self._render_node(name)
                if clock:
                    self._render_engine(tick=True)
                if self.state.engine_should_work() or self.query_one("#asymmetry", Static).display:
                    self._render_asymmetry()
                # A mouse-wheel scroll up pauses following: said in the status line within a second.
                self.query_one(LogPane).check_follow()
        except (NoMatches, NoScreen):  # torn down (see drain)
            return

    def _tick_targets(self) -> tuple[set[str], bool]:
        """What the tick redraws: the nodes whose line moves (stale, or a link down with its countdown), and
        whether the engine panel's clock runs."""
        nodes = self.state.update_staleness(self.ui_config.refresh_interval)
        nodes |= {n.name for n in self.state.nodes.values() if n.link_phase != "connected"}
        return nodes, self.state.engine.state in _CLOCKED_STATES or self.state.operation_running


def _severity(value: str) -> SeverityLevel:
    if value == "warning":
        return "warning"
    if value == "error":
        return "error"
    return "information"
