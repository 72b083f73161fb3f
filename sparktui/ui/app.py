"""The dashboard: nodes side by side, the engine with its stage bars and controls, the live log.

How the backend is consumed: ``backend.run(sink)`` runs as an async worker for the app's lifetime; the sink
only appends events to an in-memory queue (cheap, and safe from any thread). A timer drains the queue: each
event, matched by its type, is stored in ``DashboardState`` and marks the panel it changes (``Redraw``); log
records are queued in the log pane; then only what changed is re-rendered, so the screen refresh rate
never depends on how fast events arrive. Controls call
``backend.start()``, ``stop()``, ``restart()``, ``smoke_test()`` and ``select_log()``.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.dom import NoScreen
from textual.events import Key, Resize
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Button, Header, Static
from textual.worker import Worker

from sparktui.config import UIConfig
from sparktui.domain.deadline import within
from sparktui.domain.engine_state import RUNNING
from sparktui.domain.events import (
    ClusterBackend,
    EngineChanged,
    EngineState,
    Event,
    LogRecords,
    NodeIdentified,
    NodeLinkChanged,
    NodeSampled,
    Notice,
    OperationChanged,
    OperationRefused,
    ServingSampled,
)
from sparktui.domain.history import RunRecord
from sparktui.domain.history import state_dir as local_state_dir
from sparktui.domain.keys import DEFAULT_KEYS, KEY_GROUPS, effective_keys
from sparktui.domain.lifecycle.fixes import Fix, fixes_for
from sparktui.ui.screens.confirm import ConfirmScreen
from sparktui.ui.screens.keys_help import KeyRow, KeySection, KeysScreen
from sparktui.ui.state import HISTORY_POINTS, DashboardState
from sparktui.ui.widgets.engine_panel import EnginePanel, ServingView
from sparktui.ui.widgets.fitted_footer import FittedFooter
from sparktui.ui.widgets.log_pane import HEAD, LogPane
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


@dataclass(frozen=True)
class AppSwitches:
    """Switches for benchmarks and the README's screenshot, never for a person at the dashboard: how often
    the event inbox is drained, the naive log pane (``benchmarks/bench_logflood.py``'s baseline), and a
    screenshot to save after some seconds (``sparktui --screenshot``)."""

    flush_hz: float = FLUSH_HZ
    naive_log: bool = False
    screenshot: tuple[Path, float] | None = None

@dataclass
class Redraw:
    """What one drain changed, to re-render once: node panels by name, the engine panel (with the
    controls), the operation's fix offer, the serving line, the two-node-hang check."""

    nodes: set[str] = field(default_factory=set)
    engine: bool = False
    operation: bool = False
    serving: bool = False
    asymmetry: bool = False


LIFECYCLE_ACTIONS = ("start", "restart", "stop")
#: Below this many columns or rows the dashboard switches to its compact layout.
COMPACT_BELOW = (110, 32)


#: The footer's keys, most important first: at any width it shows those of them that fit, dropping from
#: the end (Help and Quit stay even at 80 columns). Keys not listed here are in the help and the palette.
FOOTER_RANK = ("help", "quit", "start", "stop", "restart", "smoke_test", "find", "filter", "full_log",
               "level", "log_source", "node")

#: The palette's name of an action where its footer label alone says too little.
PALETTE_TITLES = {
    "start": "Start engine", "restart": "Restart engine", "stop": "Stop engine", "bench": "Benchmark",
    "fix": "Fix failed check", "find": "Find in log", "filter": "Filter log", "level": "Log level",
    "node": "Log of one node", "log_source": "Log source", "full_log": "Full-screen log",
    "wrap": "Wrap log lines", "probes": "Probe lines in the log", "help": "Keys (help)",
}


def _binding(binding_id: str, action: str, label: str, tooltip: str = "", *, show: bool = True) -> Binding:
    """A binding whose default keys come from ``DEFAULT_KEYS`` (what ``[ui.keys]`` is checked against)."""
    return Binding(DEFAULT_KEYS[binding_id], action, label, id=binding_id, tooltip=tooltip, show=show)


class SparkApp(App[int]):
    # Absolute, so subclasses elsewhere (the benchmark) find it too.
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    TITLE = "sparktui"
    BINDINGS: ClassVar[list[BindingType]] = [
        _binding("start", "start", "Start", "Preflight, then start the engine on every node"),
        _binding("restart", "restart", "Restart", "Stop, then start (asks first)"),
        _binding("stop", "stop", "Stop", "Stop vLLM, Ray and our containers (asks first)"),
        _binding("smoke_test", "smoke_test", "Smoke test", "One streaming completion"),
        _binding("bench", "bench", "Bench",
                 "A short benchmark (c=1 and 4), saved and compared with the last one", show=False),
        _binding("linktest", "linktest", "Link test",
                 "Measure the cable between the nodes against NVIDIA's pass mark", show=False),
        _binding("fix", "fix", "Fix",
                 "Run the command a failed preflight check offers (image sync, model sync), after asking",
                 show=False),
        _binding("find", "find", "Find", "Find text in the log"),
        _binding("help", "toggle_help", "Help", "Every key, grouped, and what it does"),
        _binding("quit", "quit", "Quit", "Quit the dashboard (a running engine keeps running)"),
        _binding("filter", "filter", "Filter", "Show only log lines containing a text"),
        _binding("level", "cycle_level", "Level", "Minimum log level: all/INFO/WARNING/ERROR"),
        _binding("node", "cycle_node", "Node", "Show log lines of one node only"),
        _binding("log_source", "cycle_source", "Source",
                 "Switch between the vLLM log and each node's Ray worker log"),
        _binding("full_log", "toggle_full_log", "Full log", "Full-screen log"),
        _binding("processes", "processes", "Processes", "Our processes on every node, sortable", show=False),
        _binding("engine", "toggle_engine_focus", "Engine",
                 "Scroll the engine column (arrows, j/k, PgUp/PgDn, Home/End); again: back to the log",
                 show=False),
        _binding("pause", "toggle_pause", "Pause charts", "Hold the node charts and readings still",
                 show=False),
        _binding("find_next", "find_next(True)", "Next match", show=False),
        _binding("find_previous", "find_next(False)", "Previous match", show=False),
        # The log's movement keys, as less and vim have them, from anywhere (a text field keeps its own).
        _binding("log_down", "log_lines(1)", "Down a line", show=False),
        _binding("log_up", "log_lines(-1)", "Up a line", show=False),
        _binding("log_page_down", "log_pages(1)", "Page down", show=False),
        _binding("log_page_up", "log_pages(-1)", "Page up", show=False),
        _binding("log_top", "log_top", "Top of the log", show=False),
        _binding("follow", "follow", "Follow log", show=False),
        _binding("wrap", "toggle_wrap", "Wrap", "Fold long log lines", show=False),
        _binding("probes", "toggle_probes", "Probes",
                 "Show or hide monitoring probes' lines (GET /health, /metrics) in the log", show=False),
        _binding("copy_line", "copy_line", "Copy line",
                 "Copy the current match (or the last line in view) to the clipboard", show=False),
        _binding("save_log", "save_log", "Save log", "Save the log as shown (filters applied) to a file",
                 show=False),
    ]

    #: The previous way, for ``benchmarks/bench_idle.py``'s same-run comparison only: a drain every
    #: 1/``flush_hz`` s and every panel re-rendered each tick, whether anything arrived or not.
    poll_always: ClassVar[bool] = False

    def __init__(
        self,
        backend: ClusterBackend,
        ui: UIConfig | None = None,
        *,
        roles: Mapping[str, str] | None = None,
        cluster_name: str = "",
        notice: str | None = None,
        clock: Callable[[], float] | None = None,
        readonly: bool | None = None,
        node_addresses: Mapping[str, str] | None = None,
        history: Callable[[], Sequence[RunRecord]] | None = None,
        bench: Callable[[], Awaitable[str]] | None = None,
        linktest: Callable[[], Awaitable[str]] | None = None,
        fix: Callable[[str], Awaitable[str]] | None = None,
        switches: AppSwitches = AppSwitches(),
    ) -> None:
        super().__init__()
        #: Runs a fix by its id (``image_sync``, ``model_sync``) and returns its one-line outcome.
        self.fix_runner = fix
        #: The operation (by its start time) whose fixes were last offered in a toast.
        self._fix_offered: float | None = None
        #: Runs a short benchmark and returns its one-line summary (``sparktui.commands.bench``).
        self.bench_runner = bench
        #: Measures the cable (``sparktui linktest``) and returns its verdict line.
        self.linktest_runner = linktest
        self.backend = backend
        self.ui_config = ui or UIConfig()
        self.readonly = bool(readonly if readonly is not None else
                             (self.ui_config.readonly or getattr(backend, "readonly", False)))
        names = list(backend.node_names)
        role_of = dict(roles or {})
        self.node_roles = [(n, role_of.get(n, "head" if i == 0 else "worker")) for i, n in enumerate(names)]
        self.clock = clock or getattr(backend, "clock", None) or time.time
        self.state = DashboardState(self.node_roles, clock=self.clock)
        self.startup_notice = notice
        self.switches = switches
        self.smoke_result: str | None = None
        self._inbox: deque[Event] = deque()
        #: The one-shot timer of the next drain, armed by the first event of a batch (``sink``): an idle
        #: dashboard has no drain timer at all, a busy one drains at most ``flush_hz`` times a second.
        self._drain_timer: Timer | None = None
        #: When a drain last applied a node sample, and when the tick last ran (monotonic: real time, which
        #: ``clock``, the time shown, need not be; see _tick).
        self._sampled_at: float | None = None
        self._ticked_at = -math.inf
        self._backend_worker: Worker[None] | None = None
        self._node_panels: dict[str, NodePanel] = {}
        self._requesting: str | None = None
        #: Binding id → its keys now; action name → binding id (``check_action`` runs for every key each
        #: time the footer is drawn: looked up, not searched).
        self._keys_now = effective_keys(self.ui_config.keys)
        self._ids_by_action: dict[str, str] = {}
        for binding_id, binding in self.key_bindings().items():
            self._ids_by_action.setdefault(binding.action.split("(", 1)[0], binding_id)
        self._pane: LogPane | None = None
        #: Which of the footer's actions were allowed when the footer was last told (``_update_controls``).
        self._allowed_shown: tuple[bool, ...] = ()
        self.log_sources = ["vllm", *(f"ray:{n}" for n in names)]
        self.sub_title = cluster_name
        #: address (as Ray prints it in ``ip=``) → node name, for the log.
        self.node_addresses = dict(node_addresses or {})
        #: Earlier starts of the same model and image, for the stage ETAs (read again at each new start).
        self.history = history or getattr(backend, "history_runs", None)
        self._runs: Sequence[RunRecord] = ()
        self._shown_state = EngineState.UNKNOWN
        self.events_applied = 0
        #: The line printed on the terminal after quitting (None: nothing to say).
        self.exit_message: str | None = None
        #: ``p``: the node charts and readings hold still.
        self.charts_paused = False

    # ---- layout -----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="top"):
            with Horizontal(id="nodes"):
                for name, _role in self.node_roles:
                    yield NodePanel(self.state.nodes[name], id=node_widget_id(name), classes="node-panel")
            head = next((name for name, role in self.node_roles if role == "head"), None)
            yield EnginePanel(self.node_addresses, head, id="engine")
        yield Static(id="asymmetry")
        aliases = {HEAD: head, **self.node_addresses} if head else self.node_addresses
        yield LogPane(self.ui_config.log_buffer_lines, naive=self.switches.naive_log, aliases=aliases,
                      id="logpane")
        yield FittedFooter(rank=self._footer_rank, why_not=self._why_not_action)

    def on_resize(self, event: Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        """Small terminals (80×24) get the compact layout: a one-line row per node, the stage list without
        borders and facts, and the rest for the log (see ``Screen.-compact`` in app.tcss)."""
        compact = width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]
        if self.screen.has_class("-compact") != compact:
            self.screen.set_class(compact, "-compact")
            for name in self.state.nodes:
                self._render_node(name)

    def on_mount(self) -> None:
        self._fit(self.size.width, self.size.height)
        if self.ui_config.keys:
            self.set_keymap(dict(self.ui_config.keys))
        if self.ui_config.theme in self.available_themes:
            self.theme = self.ui_config.theme
        else:
            self.notify(f"unknown theme {self.ui_config.theme!r} in [ui] theme; using {self.theme}",
                        severity="warning")
        self.query_one("#asymmetry", Static).display = False
        self._render_engine()
        self._update_controls()
        self._show_chart_window()
        self.query_one(LogPane).log_widget.focus()
        if self.startup_notice:
            self.notify(self.startup_notice, title="sparktui", timeout=12)
        self._arm_drain()  # what the backend posted before the first frame
        if self.poll_always:
            self.set_interval(1.0 / self.switches.flush_hz, self.drain)
        self.set_interval(TICK_SECONDS, self._tick)
        self._backend_worker = self.run_worker(self._run_backend(), name="backend", group="backend",
                                               exit_on_error=False)
        # Everything built so far (widgets, styles, Textual's caches) lives as long as the app: move it out of
        # the collector's reach, so the full collections a log flood triggers (records that survive a few
        # young collections on their way to the screen) scan the flood, not the whole app. In the flood
        # benchmark this halves the worst key-press latency.
        self.call_after_refresh(gc.freeze)
        if self.switches.screenshot is not None:
            path, after = self.switches.screenshot
            self.set_timer(after, lambda: self._take_screenshot(path))

    #: How long closing the app waits for the backend to hang up its SSH channels.
    BACKEND_CLOSE_TIMEOUT = 8.0

    async def on_unmount(self) -> None:
        """Wait (bounded) for the cancelled backend to finish closing. Textual cancels workers at exit but
        does not wait for them; the backend's own clean-up closes its SSH channels, and that close is what
        ends the node-side helpers (a log follower on a quiet log would otherwise run on until its next
        write). Without this wait an embedding loop (a test, a script) that carries on could leave them."""
        worker = self._backend_worker
        if worker is None:
            return
        worker.cancel()
        # WorkerCancelled is the expected end; a failure was already shown; a timeout gives up the wait.
        with contextlib.suppress(Exception):
            await within(worker.wait(), self.BACKEND_CLOSE_TIMEOUT)

    async def _run_backend(self) -> None:
        try:
            await self.backend.run(self.sink)
        except Exception as exc:  # the backend promises not to raise; if it does, say so and keep the UI
            self.notify(f"backend stopped: {exc!r}", severity="error", timeout=30)

    def _take_screenshot(self, path: Path) -> None:
        self.drain()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.save_screenshot(filename=path.name, path=str(path.parent))
        self.exit(0)

    # ---- event intake -----------------------------------------------------------------------------
    def sink(self, event: Event) -> None:
        """The ``EventSink`` given to the backend: queue only (``deque.append`` is atomic)."""
        if self.switches.naive_log and isinstance(event, LogRecords):
            # The slow way, kept for the benchmark's comparison: every line written as it arrives.
            self.query_one(LogPane).add_records(event.source, event.records)
            return
        self._inbox.append(event)
        if self._drain_timer is None:
            self._arm_drain()

    def _arm_drain(self) -> None:
        self._drain_timer = self.set_timer(1.0 / self.switches.flush_hz, self._timed_drain, name="drain")

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
                    node.link_phase, node.link_detail = event.phase, event.detail
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
                case ServingSampled():
                    state.serving = event.snapshot
                    redraw.serving = True
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
            self._update_controls()
        if redraw.operation:
            self._offer_fixes()
        if redraw.serving or redraw.engine:
            self.query_one(ServingView).show(self.state.serving, self.smoke_result)
        if redraw.asymmetry:
            self._render_asymmetry()

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
        return (not self.poll_always and self.ui_config.refresh_interval <= TICK_SECONDS
                and self._sampled_at is not None
                and time.monotonic() - self._sampled_at < 1.5 * TICK_SECONDS)

    def _tick_with_samples(self) -> None:
        """In a drain that applied a node sample: the tick, if one is due (half a tick since the last, so
        two nodes' samples a few milliseconds apart draw it once)."""
        self._sampled_at = now = time.monotonic()
        if self._ticks_with_samples() and now - self._ticked_at >= 0.5 * TICK_SECONDS:
            self._tick_now()

    def _tick_now(self) -> None:
        """Once a second: what moves without events — elapsed times and the ETA while an operation or a
        start runs, retry countdowns of links that are down, samples gone stale, the two-node-hang check
        while the engine should be working. Nothing else is touched: an idle dashboard repaints nothing."""
        self._ticked_at = time.monotonic()
        nodes = self.state.update_staleness(self.ui_config.refresh_interval)
        nodes |= {n.name for n in self.state.nodes.values() if n.link_phase != "connected"}
        clock = self.state.engine.state in _CLOCKED_STATES or self.state.operation_running
        if self.poll_always:
            nodes |= set(self.state.nodes)
            clock = True
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

    # ---- controls ---------------------------------------------------------------------------------
    @classmethod
    def key_bindings(cls) -> dict[str, Binding]:
        """Binding id → the dashboard's binding (its default key; ``current_keys`` says the key now)."""
        return {b.id: b for b in cls.BINDINGS if isinstance(b, Binding) and b.id}

    def current_keys(self, binding_id: str) -> list[str]:
        """The keys that run ``binding_id`` now, ``[ui.keys]`` remaps included (Textual's key names)."""
        return self._keys_now[binding_id]

    def key_display(self, binding_id: str) -> str:
        """``binding_id``'s keys now, as the footer writes them (``s``, ``^s``, ``g home``)."""
        return " ".join(self.get_key_display(Binding(k, "")) for k in self.current_keys(binding_id))

    def _binding_id_of(self, action: str) -> str | None:
        """The binding id of an action name (``find_next`` for both ``n`` and ``N``)."""
        return self._ids_by_action.get(action.split("(", 1)[0])

    def unavailable(self, binding_id: str) -> str | None:
        """Why the action bound as ``binding_id`` cannot run now, or ``None``. The one rule behind its greyed
        key in the footer and the help, its disabled button, and the answer to its key or palette command."""
        state = self.state.engine.state
        if binding_id == "start":
            running = f"the engine is {state.value}: stop it first, or restart" if state in RUNNING else None
            return self.refusal() or running
        if binding_id in LIFECYCLE_ACTIONS:
            return self.refusal()
        if binding_id == "smoke_test" and state is not EngineState.READY:
            return "the engine is not ready: nothing to test yet"
        if binding_id == "bench":
            if self.bench_runner is None:
                return "the benchmark needs a real engine (`sparktui bench` on a configured cluster)"
            if state is not EngineState.READY:
                return "the engine is not ready: nothing to measure yet"
        if binding_id == "linktest" and self.linktest_runner is None:
            return "the link test needs real nodes (`sparktui linktest` on a configured cluster)"
        if binding_id == "fix":
            return "no failed check offers a fix" if not self.pending_fixes() else self.refusal()
        if binding_id in ("find_next", "find_previous"):
            pane = self._log_pane()
            if pane is not None and not pane.find_term:
                return f"nothing to find yet: {self.key_display('find')} finds a text"
        return None

    def _log_pane(self) -> LogPane | None:
        """The log pane, looked up once (``check_action`` asks at every footer draw, and a query walks the
        DOM: 3 ms of the 3.4 a footer's bindings took); None before it is mounted."""
        if self._pane is None or not self._pane.is_attached:
            panes = self.query(LogPane)
            self._pane = panes.first() if panes else None
        return self._pane

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Read-only: start, restart and stop leave the footer (their keys still answer, with the reason,
        through ``on_key``). An action that cannot run now is greyed (``None``)."""
        if self.readonly and action in LIFECYCLE_ACTIONS:
            return False
        binding_id = self._binding_id_of(action)
        return None if binding_id is not None and self.unavailable(binding_id) else True

    def _why_not_action(self, action: str) -> str | None:
        binding_id = self._binding_id_of(action)
        return self.unavailable(binding_id) if binding_id is not None else None

    def _footer_rank(self, action: str) -> int:
        binding_id = self._binding_id_of(action)
        return FOOTER_RANK.index(binding_id) if binding_id in FOOTER_RANK else len(FOOTER_RANK)

    def on_key(self, event: Key) -> None:
        """A key whose action cannot run now reaches here (its binding is greyed, or off in read-only mode):
        say why nothing happens. Runs before the app's bindings, so an action that just ran is not
        answered as refused."""
        if self.screen is not self.screen_stack[0]:
            return   # a dialog's keys are its own
        binding_id = next((i for i in self.key_bindings() if event.key in self.current_keys(i)), None)
        if binding_id is not None and self._refused(binding_id):
            event.stop()
            event.prevent_default()

    def _refused(self, binding_id: str) -> bool:
        """Say why ``binding_id``'s action cannot run now, if it cannot; whether it cannot."""
        reason = self.unavailable(binding_id)
        if reason is None:
            return False
        label = self.key_bindings()[binding_id].description
        self.notify(reason, title=f"{label}: not now", severity="warning", timeout=4)
        return True

    async def perform(self, binding_id: str) -> None:
        """Run ``binding_id``'s action as its key would (the palette's commands): refused with the reason
        when it cannot run now."""
        if not self._refused(binding_id):
            await self.run_action(self.key_bindings()[binding_id].action)

    def refusal(self) -> str | None:
        """Why a lifecycle action cannot run now, or ``None``."""
        if self.readonly:
            return "read-only mode: start, stop and restart are disabled (started with --readonly)"
        op = self.state.operation
        if op is not None and op.running:
            return f"{op.kind} is running — wait for it to finish"
        if self._requesting is not None:
            return f"{self._requesting} is running — wait for it to finish"
        return None

    def _update_controls(self) -> None:
        bindings = self.key_bindings()
        for binding_id, button_id in (*((a, a) for a in LIFECYCLE_ACTIONS), ("smoke_test", "smoke")):
            button = self.query_one(f"#btn-{button_id}", Button)
            reason = self.unavailable(binding_id)
            button.disabled = reason is not None
            tooltip = f"not now: {reason}" if reason else bindings[binding_id].tooltip or None
            if button.tooltip != tooltip:   # (setting it looks for the mouse: at every engine event)
                button.tooltip = tooltip
        for action in LIFECYCLE_ACTIONS:
            self.query_one(f"#btn-{action}", Button).display = not self.readonly
        self.query_one("#readonly-badge").display = self.readonly
        # The footer greys what cannot run now: redrawn when that changes (not at every engine event).
        allowed = tuple(self.unavailable(i) is None for i in FOOTER_RANK)
        if allowed != self._allowed_shown:
            self._allowed_shown = allowed
            self.refresh_bindings()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        actions = {"btn-start": self.action_start, "btn-restart": self.action_restart,
                   "btn-stop": self.action_stop, "btn-smoke": self.action_smoke_test}
        handler = actions.get(event.button.id or "")
        if handler is not None:
            event.stop()
            handler()

    def action_start(self) -> None:
        self._lifecycle("start", self.backend.start)

    def action_restart(self) -> None:
        self._confirmed("restart", self.backend.restart,
                        "Restart the engine? Serving stops until it is ready again.")

    def action_stop(self) -> None:
        self._confirmed("stop", self.backend.stop,
                        "Stop the engine on every node (vLLM, Ray and our containers)?")

    def _confirmed(self, kind: str, operation: Callable[[], Awaitable[object]], question: str) -> None:
        if self._refused(kind):
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._lifecycle(kind, operation)

        self.push_screen(ConfirmScreen(question, yes=kind.capitalize()), answered)

    def _lifecycle(self, kind: str, operation: Callable[[], Awaitable[object]]) -> None:
        """Run the backend's ``operation`` (its start, restart or stop; ``kind`` names it in messages)."""
        if self._refused(kind):
            return
        self._requesting = kind
        self._update_controls()
        self._call_backend(kind, operation)

    @work(group="lifecycle", exit_on_error=False)
    async def _call_backend(self, kind: str, operation: Callable[[], Awaitable[object]]) -> None:
        try:
            await operation()
        except OperationRefused as exc:
            self.notify(str(exc) or "another operation is running", title=f"{kind} refused",
                        severity="warning")
        except Exception as exc:
            self.notify(f"{kind} failed: {exc}", severity="error", timeout=20)
        finally:
            self._requesting = None
            self._update_controls()

    #: States in which something of ours runs on the nodes (quitting leaves it running: say so).
    RUNNING_STATES = RUNNING | {EngineState.PREFLIGHT, EngineState.STOPPING}

    async def action_quit(self) -> None:
        """Quit the dashboard, never the engine — and say so once, on the terminal, when one runs."""
        message = None
        if self.state.engine.state in self.RUNNING_STATES and getattr(self.backend, "detached", True):
            message = "the engine keeps running on the nodes — `sparktui stop` stops it"
        self.exit_message = message
        self.exit(0, message=message)

    def action_smoke_test(self) -> None:
        if self._refused("smoke_test"):
            return
        self.notify("sending one streaming completion…", title="smoke test", timeout=3)
        self._smoke()

    @work(group="smoke", exclusive=True, exit_on_error=False)
    async def _smoke(self) -> None:
        try:
            result = await self.backend.smoke_test()
        except Exception as exc:
            self.smoke_result = f"failed: {exc}"
            self.notify(self.smoke_result, title="smoke test", severity="error", timeout=15)
        else:
            self.smoke_result = result
            self.notify(result, title="smoke test", timeout=10)
        self.query_one(ServingView).show(self.state.serving, self.smoke_result)

    def action_bench(self) -> None:
        if self._refused("bench"):
            return
        self.notify("a short benchmark: 8 requests at c=1, then at c=4…", title="bench", timeout=5)
        self._bench()

    @work(group="bench", exclusive=True, exit_on_error=False)
    async def _bench(self) -> None:
        assert self.bench_runner is not None
        try:
            result = await self.bench_runner()
        except Exception as exc:
            self.notify(f"failed: {exc}", title="bench", severity="error", timeout=15)
        else:
            self.notify(result, title="bench", timeout=30)

    def action_linktest(self) -> None:
        if self._refused("linktest"):
            return
        note = (" — the engine holds the GPUs, so all_reduce_perf may fail; ib_write_bw needs none"
                if self.state.engine.state in self.RUNNING_STATES else "")
        self.notify(f"measuring the cable between the nodes…{note}", title="linktest", timeout=6)
        self._linktest()

    @work(group="linktest", exclusive=True, exit_on_error=False)
    async def _linktest(self) -> None:
        assert self.linktest_runner is not None
        try:
            verdict = await self.linktest_runner()
        except Exception as exc:
            self.notify(f"failed: {exc}", title="linktest", severity="error", timeout=15)
        else:
            self.notify(verdict, title="linktest", timeout=30)

    # ---- fixes a failed preflight offers ----------------------------------------------------------
    def pending_fixes(self) -> list[Fix]:
        """The fixes the last operation's failed checks offer (none while it runs)."""
        op = self.state.operation
        return fixes_for(op.steps) if op is not None and not op.running else []

    def _fix_key(self) -> str:
        """The key that runs the fixes, as bound now (``[ui.keys]`` remaps included)."""
        return self.key_display("fix").split(" ")[0]

    def _offer_fixes(self) -> None:
        op = self.state.operation
        fixes = self.pending_fixes()
        if op is None or not fixes or self._fix_offered == op.started or self.fix_runner is None:
            return
        self._fix_offered = op.started
        self.notify(f"{self._fix_key()}: " + "; ".join(f.describe() for f in fixes), title="fix",
                    severity="warning", timeout=20)

    def action_fix(self) -> None:
        if self._refused("fix"):
            return
        fixes = self.pending_fixes()
        if self.fix_runner is None:
            self.notify(f"run {' and '.join(f'`{f.command}`' for f in fixes)} on a configured cluster",
                        title="fix", severity="warning")
            return
        question = "Run " + ", then ".join(f.describe() for f in fixes) + "?"

        def answered(yes: bool | None) -> None:
            if yes:
                self._requesting = "fix"
                self._update_controls()
                self._run_fixes(fixes)

        self.push_screen(ConfirmScreen(question, yes="Run"), answered)

    @work(group="fix", exclusive=True, exit_on_error=False)
    async def _run_fixes(self, fixes: list[Fix]) -> None:
        assert self.fix_runner is not None
        try:
            for fix in fixes:
                self.notify(f"running `{fix.command}`…", title="fix", timeout=5)
                try:
                    result = await self.fix_runner(fix.id)
                except Exception as exc:
                    self.notify(f"`{fix.command}` failed: {exc}", title="fix", severity="error", timeout=20)
                    return
                self.notify(result, title=f"`{fix.command}`", timeout=20)
        finally:
            self._requesting = None
            self._update_controls()

    # ---- log actions ------------------------------------------------------------------------------
    def action_find(self) -> None:
        self.query_one(LogPane).open_input("find")

    def action_filter(self) -> None:
        self.query_one(LogPane).open_input("filter")

    def action_find_next(self, forward: bool) -> None:
        self.query_one(LogPane).find_next(forward)

    def action_log_lines(self, lines: int) -> None:
        self.query_one(LogPane).move_lines(lines)

    def action_log_pages(self, pages: int) -> None:
        self.query_one(LogPane).move_pages(pages)

    def action_log_top(self) -> None:
        self.query_one(LogPane).go_top()

    def action_toggle_engine_focus(self) -> None:
        """``e``: the keys scroll the engine column (a long diagnosis); again, the log has them back."""
        engine = self.query_one(EnginePanel)
        if engine.has_focus:
            self.query_one(LogPane).log_widget.focus()
        else:
            engine.focus()

    def action_processes(self) -> None:
        from sparktui.ui.screens.processes import ProcessScreen

        self.push_screen(ProcessScreen(self.state.nodes))

    def action_toggle_pause(self) -> None:
        """Hold the node charts and readings still (samples keep arriving and are kept); again: live."""
        self.charts_paused = not self.charts_paused
        self._show_chart_window()
        for name in self.state.nodes:
            self._render_node(name)
        self.notify("charts paused — p resumes" if self.charts_paused else "charts live", timeout=2)

    def _show_chart_window(self) -> None:
        window = HISTORY_POINTS * self.ui_config.refresh_interval
        for panel in self.query(NodePanel):
            panel.set_window(window, self.charts_paused)

    def action_toggle_wrap(self) -> None:
        wrap = self.query_one(LogPane).toggle_wrap()
        self.notify(f"long log lines {'folded' if wrap else 'cut (scroll sideways)'}", timeout=2)

    def action_toggle_probes(self) -> None:
        pane = self.query_one(LogPane)
        shown = pane.toggle_probes()
        n = pane.probes_in_buffer()
        what = f"{n:,} probe line{'' if n == 1 else 's'} (GET /health, /metrics …)"
        self.notify(f"{what} shown" if shown else f"{what} hidden", timeout=2)

    def action_copy_line(self) -> None:
        text = self.query_one(LogPane).current_text()
        if text is None:
            self.notify("the log is empty: nothing to copy", severity="warning", timeout=3)
            return
        # OSC 52: the terminal puts it on the clipboard (also over SSH and in tmux with set-clipboard on).
        self.copy_to_clipboard(text)
        self.notify(f"copied: {text[:60]}{'…' if len(text) > 60 else ''}", timeout=3)

    def action_save_log(self) -> None:
        pane = self.query_one(LogPane)
        source = pane.source.replace(":", "-")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.clock()))
        path = self.output_dir() / f"sparktui-log-{source}-{stamp}.txt"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            text = pane.view_text()
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            self.notify(f"could not save the log: {exc}", severity="error", timeout=10)
            return
        what = f"filtered view ({pane.filter_summary()})" if pane.filtering else "log"
        lines = text.count("\n")
        self.notify(f"saved the {what}, {lines} line{'' if lines == 1 else 's'}: {path}", timeout=10)

    def output_dir(self) -> Path:
        """Where screenshots and saved logs go: ``[ui] screenshot_dir``, else the local state directory."""
        configured = self.ui_config.screenshot_dir
        return Path(configured).expanduser() if configured else local_state_dir()

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """Screenshots (the palette's, ``ctrl+p`` → screenshot) go to ``output_dir`` with the path shown;
        Textual's default is ``~/Downloads``, which a server or a fresh account may not have."""
        if self.is_web:
            return super().deliver_screenshot(filename, path, time_format)
        folder = Path(path) if path else self.output_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            saved = self.save_screenshot(filename, str(folder), time_format)
        except OSError as exc:
            self.notify(f"could not save the screenshot: {exc}", severity="error", timeout=10)
            return None
        self.notify(f"screenshot saved: {saved}", title="screenshot", timeout=10)
        return saved

    def action_cycle_level(self) -> None:
        level = self.query_one(LogPane).cycle_level()
        self.notify(f"log level: {level}", timeout=2)

    def action_cycle_node(self) -> None:
        node = self.query_one(LogPane).cycle_node()
        self.notify(f"log lines from: {node}", timeout=2)

    def action_cycle_source(self) -> None:
        pane = self.query_one(LogPane)
        sources = self.log_sources
        nxt = sources[(sources.index(pane.source) + 1) % len(sources)] if pane.source in sources else "vllm"
        if nxt != "vllm":
            # A worker log is followed afresh from its tail each time it is selected: drop the old copy so the
            # tail does not appear twice. (The vLLM log streams all along and keeps its buffer.)
            pane.buffers.pop(nxt, None)
        self.backend.select_log(nxt)
        pane.set_source(nxt)

    def action_follow(self) -> None:
        pane = self.query_one(LogPane)
        pane.scroll_to_end()
        pane.update_status()

    def action_toggle_full_log(self) -> None:
        self.screen.toggle_class("-log-full")

    def action_toggle_help(self) -> None:
        if isinstance(self.screen, KeysScreen):
            self.screen.dismiss(None)
        elif self.screen is self.screen_stack[0]:
            self.push_screen(KeysScreen(self.key_sections()))

    def key_sections(self) -> list[KeySection]:
        """The help screen's content: every action with its key now, greyed with the reason when it cannot
        run now, in ``KEY_GROUPS``' groups; then Textual's own keys on the dashboard (scrolling the focused
        log, the palette), which matter less and so come last."""
        bindings = self.key_bindings()
        sections = [KeySection(title, [KeyRow(self.key_display(i), bindings[i].description,
                                              bindings[i].tooltip, self.unavailable(i)) for i in ids])
                    for title, ids in KEY_GROUPS.items()]
        ours = {key for keys in self._keys_now.values() for key in keys}
        generic: dict[str, list[str]] = {}
        for key, active in self.screen_stack[0].active_bindings.items():
            binding = active.binding
            if binding.id not in bindings and key not in ours:   # ours are listed above, in our words
                what = binding.description or binding.action.replace("_", " ")
                generic.setdefault(what, []).append(self.get_key_display(binding))
        rows = [KeyRow(" ".join(dict.fromkeys(keys)), what) for what, keys in generic.items()]
        return [*sections, KeySection("Textual's own keys (the focused panel, the palette)", rows)]

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every action that has a key (the same rows as the help screen), then Textual's theme, screenshot
        and maximize; Textual's Quit and Keys are ours here."""
        for command in super().get_system_commands(screen):
            if command.title not in ("Quit", "Keys"):
                yield command
        bindings = self.key_bindings()
        for ids in KEY_GROUPS.values():
            for binding_id in ids:
                binding = bindings[binding_id]
                reason = self.unavailable(binding_id)
                what = f"{binding.tooltip or binding.description} ({self.key_display(binding_id)})"
                title = PALETTE_TITLES.get(binding_id, binding.description)
                yield SystemCommand(title, what + (f" — not now: {reason}" if reason else ""),
                                    partial(self.perform, binding_id))


def _severity(value: str) -> SeverityLevel:
    if value == "warning":
        return "warning"
    if value == "error":
        return "error"
    return "information"
