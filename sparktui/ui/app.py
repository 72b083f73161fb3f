"""The dashboard: nodes side by side, the engine with its stage bars and controls, the live log.

How the backend is consumed: ``backend.run(sink)`` runs as an async worker for the app's lifetime; its events
are drained on a timer (``ui/event_drain.py``). Controls call ``backend.start()``, ``stop()``, ``restart()``,
``smoke_test()`` and ``select_log()``.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.timer import Timer
from textual.widgets import Header, Static
from textual.worker import Worker

from sparktui.config import UIConfig
from sparktui.domain.bench import BenchRecord
from sparktui.domain.bench_chart import BenchDone
from sparktui.domain.deadline import within
from sparktui.domain.events import (
    ClusterBackend,
    EngineState,
    Event,
    SimulatedCluster,
)
from sparktui.domain.history import RunRecord
from sparktui.domain.keys import effective_keys
from sparktui.ui.bindings import DASHBOARD_BINDINGS
from sparktui.ui.event_drain import TICK_SECONDS, EventDrain
from sparktui.ui.state import HISTORY_POINTS, DashboardState
from sparktui.ui.widgets.engine_panel import EnginePanel
from sparktui.ui.widgets.fitted_footer import FittedFooter
from sparktui.ui.widgets.log_actions import LogActions
from sparktui.ui.widgets.log_pane import HEAD, LogPane
from sparktui.ui.widgets.node_panel import NodePanel
from sparktui.ui.widgets.util import node_widget_id


@dataclass(frozen=True)
class AppSwitches:
    """Switches for the README's screenshot and the tests, never for a person at the dashboard: a screenshot
    to save after some seconds (``sparktui --screenshot``), and the tick's period (the tests', which count
    ticks rather than wait seconds for them). (The benchmarks' baselines are benchmarks/'.)"""

    screenshot: tuple[Path, float] | None = None
    tick_seconds: float = TICK_SECONDS


#: Below this many columns or rows the dashboard switches to its compact layout.
COMPACT_BELOW = (110, 32)


class SparkApp(LogActions, EventDrain):
    """The dashboard; the event drain and tick, the controls, the operations and the log actions are its
    bases' (``ui/event_drain.py``, ``ui/controls.py``, ``ui/operations.py``,
    ``ui/widgets/log_actions.py``)."""

    # Absolute, so subclasses elsewhere (the benchmark) find it too.
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    TITLE = "sparktui"
    BINDINGS: ClassVar[list[BindingType]] = DASHBOARD_BINDINGS

    def __init__(
        self,
        backend: ClusterBackend,
        ui: UIConfig | None = None,
        *,
        roles: Mapping[str, str] | None = None,
        cluster_name: str = "",
        notice: str | None = None,
        clock: Callable[[], float] | None = None,
        node_addresses: Mapping[str, str] | None = None,
        history: Callable[[], Sequence[RunRecord]] | None = None,
        bench: Callable[[], Awaitable[BenchDone]] | None = None,
        bench_history: Callable[[], Sequence[BenchRecord]] | None = None,
        linktest: Callable[[], Awaitable[str]] | None = None,
        fix: Callable[[str], Awaitable[str]] | None = None,
        switches: AppSwitches = AppSwitches(),
    ) -> None:
        super().__init__()
        self.fix_runner = fix
        self._fix_offered: float | None = None
        #: Runs a short benchmark and returns its summary and record (``sparktui.commands.bench``).
        self.bench_runner = bench
        #: The saved benchmarks, for the bench chart (``B``).
        self.bench_history = bench_history
        #: Measures the cable (``sparktui linktest``) and returns its verdict line.
        self.linktest_runner = linktest
        self.backend = backend
        self.ui_config = ui or UIConfig()
        names = list(backend.node_names)
        role_of = dict(roles or {})
        self.node_roles = [(n, role_of.get(n, "head" if i == 0 else "worker")) for i, n in enumerate(names)]
        self.clock = clock or (backend.clock if isinstance(backend, SimulatedCluster) else time.time)
        self.state = DashboardState(self.node_roles, clock=self.clock)
        self.startup_notice = notice
        self.switches = switches
        self.smoke_result: str | None = None
        self._inbox: deque[Event] = deque()
        #: The one-shot timer of the next drain, armed by the first event of a batch (``sink``): an idle
        #: dashboard has no drain timer at all, a busy one drains at most ``FLUSH_HZ`` times a second.
        self._drain_timer: Timer | None = None
        #: When a drain last applied a node sample, and when the tick last ran (monotonic: real time, which
        #: ``clock``, the time shown, need not be; see _tick).
        self._sampled_at: float | None = None
        self._ticked_at = -math.inf
        self._backend_worker: Worker[None] | None = None
        self._node_panels: dict[str, NodePanel] = {}
        self._fixing = False
        self._keys_now = effective_keys(self.ui_config.keys)
        self._ids_by_action: dict[str, str] = {}
        for binding_id, binding in self.key_bindings().items():
            self._ids_by_action.setdefault(binding.action.split("(", 1)[0], binding_id)
        self._pane: LogPane | None = None
        self._allowed_shown: tuple[bool, ...] = ()
        self.log_sources = ["vllm", *(f"ray:{n}" for n in names)]
        self.sub_title = cluster_name
        #: address (as Ray prints it in ``ip=``) → node name, for the log.
        self.node_addresses = dict(node_addresses or {})
        #: Earlier starts of the same model and image, for the stage ETAs (read again at each new start).
        self.history = history or (backend.history_runs if isinstance(backend, SimulatedCluster) else None)
        self._runs: Sequence[RunRecord] = ()
        self._shown_state = EngineState.UNKNOWN
        self.events_applied = 0
        self.ticks = 0
        self.tick_seconds = switches.tick_seconds
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
        # The backend owns which log streams; the pane reads it to know which it shows.
        yield LogPane(self.ui_config.log_buffer_lines, aliases=aliases,
                      source=self.streamed_log, id="logpane")
        yield FittedFooter(rank=self._footer_rank, why_not=self._why_not_action)

    def streamed_log(self) -> str:
        """The log the backend streams (it owns the choice; the log pane asks)."""
        return self.backend.log_source

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
        self.set_interval(self.tick_seconds, self._tick)
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

    # ---- views ------------------------------------------------------------------------------------
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

