"""The dashboard's controls: what each key does now and why it cannot (one rule, ``unavailable``, behind
the greyed footer key, the help screen, the disabled button and the refusal), the help screen's and the
palette's rows, and the lifecycle buttons' state."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.events import Key
from textual.screen import Screen
from textual.widgets import Button

from sparktui.config import UIConfig
from sparktui.domain.engine_state import RUNNING
from sparktui.domain.events import ClusterBackend, EngineState
from sparktui.domain.keys import KEY_GROUPS
from sparktui.domain.lifecycle.fixes import Fix, fixes_for
from sparktui.ui.bindings import FOOTER_RANK, LIFECYCLE_ACTIONS, PALETTE_TITLES
from sparktui.ui.screens.keys_help import KeyRow, KeySection, KeysScreen
from sparktui.ui.state import DashboardState
from sparktui.ui.widgets.log_pane import LogPane


class Controls(App[int]):
    """Part of ``SparkApp`` (``sparktui.ui.app``), which sets what is declared here."""

    backend: ClusterBackend
    state: DashboardState
    ui_config: UIConfig
    bench_runner: object | None
    #: The saved benchmarks (``B``'s chart reads them); ``None``: no bench history here.
    bench_history: object | None
    linktest_runner: object | None
    #: Binding id → its keys now; action name → binding id (``check_action`` runs for every key each time the
    #: footer is drawn: looked up, not searched).
    _keys_now: dict[str, list[str]]
    _ids_by_action: dict[str, str]
    #: The fixes a failed preflight offers run (``F``): the dashboard's own operation, not the backend's.
    _fixing: bool
    _pane: LogPane | None
    #: Which of the footer's actions were allowed when the footer was last told (``_update_controls``).
    _allowed_shown: tuple[bool, ...]

    @property
    def readonly(self) -> bool:
        """Read-only mode, as the backend holds it (``--readonly`` or ``[ui] readonly``): it refuses the
        operations, and the dashboard only reads it to hide their keys and buttons."""
        return self.backend.readonly

    def pending_fixes(self) -> list[Fix]:
        """The fixes the last operation's failed checks offer (none while it runs)."""
        op = self.state.operation
        return fixes_for(op.steps) if op is not None and not op.running else []

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
        if binding_id == "bench_chart":
            if self.bench_history is None:
                return "the bench chart needs a bench history (`sparktui bench` on a configured cluster)"
            if any(w.group == "bench" and w.is_running for w in self.workers):
                return "a benchmark is running: its chart opens when it ends"
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
        kind = self.state.running_kind or ("fix" if self._fixing else None)
        return f"{kind} is running — wait for it to finish" if kind is not None else None

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
