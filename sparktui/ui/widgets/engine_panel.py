"""The engine column: state, one bar per init stage, facts, failure, the running operation's steps,
the controls, and (once ready) the serving figures."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Label, Static

from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    FailureView,
    ImageSeen,
    OperationView,
    StageView,
    StepStatus,
    SupervisorSeen,
    TimelineView,
    UpgradeSeen,
)
from sparktui.domain.history import RunRecord, format_remaining
from sparktui.domain.logs.diagnosis import diagnosis, node_label
from sparktui.domain.perf.start_explain import explain_start
from sparktui.domain.serving import ServingSnapshot
from sparktui.domain.start_eta import start_eta
from sparktui.ui import format as fmt
from sparktui.ui.stages import FACT_CAPTIONS, STAGE_LABELS, STAGE_ORDER
from sparktui.ui.widgets.sparkline import ScaledSparkline
from sparktui.ui.widgets.stage_bar import StageBar
from sparktui.ui.widgets.util import show

#: What the panel shows before the backend has posted a timeline: every stage pending, no facts.
_NO_TIMELINE = TimelineView()
#: Step lines shown while an operation runs (the window follows the running step).
STEP_WINDOW = 9
#: A running stage without progress for this long gets a "no progress for N min" warning.
STALL_WARN_S = 120.0

_STATE_STYLE = {
    EngineState.READY: "bold green",
    EngineState.FAILED: "bold white on red",
    EngineState.DEGRADED: "bold white on dark_orange3",
    EngineState.WEDGED: "bold white on dark_orange3",
    EngineState.STARTING: "bold yellow",
    EngineState.PREFLIGHT: "bold yellow",
    EngineState.VERIFYING: "bold yellow",
    EngineState.STOPPING: "bold yellow",
    EngineState.STOPPED: "bold",
    EngineState.UNKNOWN: "dim",
}
#: The states of a start: the ETA row is kept through all of them.
_STARTING_STATES = frozenset({EngineState.PREFLIGHT, EngineState.STARTING, EngineState.VERIFYING})
_STEP_MARK = {
    StepStatus.PENDING: ("·", "dim"),
    StepStatus.RUNNING: ("⟳", "yellow"),
    StepStatus.OK: ("✓", "green"),
    StepStatus.WARNING: ("!", "bold yellow"),
    StepStatus.FAILED: ("✗", "bold red"),
    StepStatus.SKIPPED: ("–", "dim"),
}

#: The last upgrade's line, by its level (``UpgradeSeen``): promoted green; rolled back or refused yellow.
_UPGRADE_STYLE = {"ok": "green", "warning": "yellow", "error": "bold red"}


class StageRow(Horizontal):
    """``weights   ███████░░░  7/12  1m04s``: a determinate bar where the log gives n/total."""

    def __init__(self, name: str) -> None:
        super().__init__(id=f"stage-{name}", classes="stage-row")
        self.stage = name
        #: The status whose class (``-running``, …) the row has: set again only when the status changes.
        self._status_class: str | None = None

    def compose(self) -> ComposeResult:
        yield Label(STAGE_LABELS[self.stage], classes="stage-name")
        yield StageBar(total=1, classes="stage-bar")
        yield Label("", classes="stage-info")

    def show(self, view: StageView, elapsed: float | None, stalled: float | None,
             skipped_as: str = "skipped", tick: bool = False) -> None:
        """``tick``: drawn for the dashboard's 1 s tick, the only moment a countless bar's sweep moves on
        (a start's engine changes come several times a second; each moving the sweep cost its frame)."""
        bar = self.query_one(StageBar)
        status = view.status
        if status == "running":
            if view.total:
                bar.update(total=view.total, progress=view.done or 0)
            else:
                bar.update(total=None)
                if tick:
                    bar.sweep()
        elif status in ("done", "failed"):
            total = view.total or 1
            bar.update(total=total, progress=view.done if (status == "failed" and view.done) else total)
        else:
            bar.update(total=1, progress=0)
        if status != self._status_class:   # (every engine change reaches every row; most change nothing)
            for cls in ("pending", "running", "done", "failed", "skipped"):
                self.set_class(status == cls, f"-{cls}")
            self._status_class = status
        info = Text(no_wrap=True, overflow="ellipsis")
        if view.total and status in ("running", "failed"):
            info.append(f"{view.done or 0:.0f}/{view.total:.0f} ")
        if status == "skipped":
            info.append(skipped_as, style="dim")
        elif status == "failed":
            info.append(f"failed {fmt.duration(elapsed)}", style="bold red")
        elif elapsed is not None:
            info.append(fmt.duration(elapsed), style="" if status == "running" else "dim")
        if stalled is not None and status == "running":
            info.append(f" no progress for {fmt.duration(stalled)}", style="bold yellow")
        show(self.query_one(".stage-info", Label), info, layout=False)


class EngineFacts(Widget):
    """The facts, laid out at the width the widget has when it is drawn (``facts_text`` breaks lines between
    items): the text is made in ``render``, so it never depends on whether the layout had run yet."""

    DEFAULT_CSS = "EngineFacts { height: auto; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._facts: dict[str, object] = {}
        self._engine: EngineChanged | None = None
        #: The text last made, and at which width: ``set`` compares with it, ``render`` and the layout's
        #: height read it (each would make it again otherwise).
        self._made: tuple[int, Text] | None = None

    def set(self, facts: Mapping[str, object], engine: EngineChanged) -> None:
        if facts == self._facts and engine == self._engine:
            return
        width = self.size.width
        before = self._text(width)
        self._facts, self._engine, self._made = dict(facts), engine, None
        if not width:
            self.refresh(layout=True)
            return
        # The engine changes with every stage a start moves through; the facts line much less often, and
        # its height less often still: only a new height lays the screen out again.
        after = self._text(width)
        if after != before:
            self.refresh(layout=_height(after) != _height(before))

    def _text(self, width: int) -> Text:
        made = self._made
        if made is None or made[0] != width:
            text = Text() if self._engine is None else facts_text(self._facts, self._engine, width)
            made = self._made = (width, text)
        return made[1]

    def render(self) -> Text:
        return self._text(self.size.width)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return _height(self._text(width))


def _height(text: Text) -> int:
    return text.plain.count("\n") + 1 if text.plain else 0


class EnginePanel(VerticalScroll):
    """The engine column. It scrolls (a failure's raw message can be longer than the column): the mouse
    wheel over it, and the keys of a scrolling view while it has the focus (``e``, Tab or a click gives it;
    j/k as in the log)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Scroll down", show=False),
        Binding("k", "scroll_up", "Scroll up", show=False),
    ]

    def __init__(self, node_names: Mapping[str, str] | None = None, head: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: When each stage was first seen running, on the dashboard's clock, so a running stage's time keeps
        #: counting between log lines (the log's own times only move when a line arrives).
        self._running_since: dict[str, float] = {}
        #: Address (as Ray prints it in ``ip=``) → node name, and the head's name: a failure's node by name.
        self._node_names = dict(node_names or {})
        self._head = head

    def elapsed(self, view: StageView, now: float) -> float | None:
        if view.status == "running":
            since = self._running_since.setdefault(view.name, now - (view.seconds or 0.0))
            return max(now - since, view.seconds or 0.0)
        self._running_since.pop(view.name, None)
        return view.seconds if view.status in ("done", "failed") else None

    def compose(self) -> ComposeResult:
        yield Label("engine", id="engine-state")
        # "unknown" says nothing alone: what is not known and why, whole and wrapped.
        yield Static(id="engine-why")
        # The image a start uses (docker: the one an upgrade promoted, or engine.image).
        yield Static(id="engine-image")
        # The last upgrade's outcome, for a while after it (while one runs, its stages are the steps below).
        yield Static(id="engine-upgrade")
        # Who else keeps this engine serving (``sparktui supervise``), its last decision and incident.
        yield Static(id="engine-supervisor")
        yield Label("", id="engine-eta")
        with Horizontal(id="engine-buttons"):
            yield Button("Start", id="btn-start", variant="success", compact=True)
            yield Button("Restart", id="btn-restart", variant="warning", compact=True)
            yield Button("Stop", id="btn-stop", variant="error", compact=True)
            yield Button("Smoke test", id="btn-smoke", compact=True)
            yield Label(" READ-ONLY ", id="readonly-badge")
        # The diagnosis first: the stage bars below say where the start got to, the diagnosis what to do,
        # and at 120×40 (or 80×24) whatever comes after the nine bars is below the fold.
        yield Static(id="engine-failure")
        yield Static(id="operation-steps")
        with Vertical(id="stages"):
            for name in STAGE_ORDER:
                yield StageRow(name)
        yield Static(id="stage-summary")
        yield EngineFacts(id="engine-facts")
        yield ServingView(id="serving")

    def show(self, engine: EngineChanged, operation: OperationView | None, now: float,
             runs: Sequence[RunRecord] = (), tick: bool = False) -> None:
        """``tick``: for the dashboard's 1 s tick (see :meth:`StageRow.show`)."""
        timeline = engine.timeline or _NO_TIMELINE
        views = list(timeline.stages)
        running = timeline.running
        stall = timeline.stall_seconds(now) if running else None
        stalled = stall if stall is not None and stall >= STALL_WARN_S else None
        show(self.query_one("#engine-state", Label), self._state_text(engine, running), layout=False)
        why = self.query_one("#engine-why", Static)
        unknown = engine.state is EngineState.UNKNOWN and bool(engine.detail)
        if why.display != unknown:
            why.display = unknown
        if unknown:
            show(why, Text(engine.detail, style="yellow"))
        eta_label = self.query_one("#engine-eta", Label)
        eta = eta_text(views, running, self.elapsed(running, now) if running else None, runs)
        # The row stays for the whole start (empty or not), so the buttons below never jump between stages.
        eta_label.display = engine.state in _STARTING_STATES
        if not eta.plain and engine.state is EngineState.STARTING and not runs:
            eta = Text("no ETA: the first start of this model and image", style="dim")
        show(eta_label, eta, layout=False)
        with self.app.batch_update():
            for view in views:
                # A compile skipped because vLLM loaded its graphs from the cache says so (a warm start).
                hit = view.name == "compile" and bool(timeline.facts.get("compile_cache_hit"))
                self.query_one(f"#stage-{view.name}", StageRow).show(
                    view, self.elapsed(view, now), stalled, "cache hit" if hit else "skipped", tick)
        self.query_one("#engine-facts", EngineFacts).set(timeline.facts, engine)
        failure = timeline.failure
        failure_box = self.query_one("#engine-failure", Static)
        failure_box.display = failure is not None or engine.state is EngineState.FAILED
        if failure is not None:
            show(failure_box, self.failure_text(failure))
        elif engine.state is EngineState.FAILED:
            show(failure_box, Text(engine.detail or "failed", style="bold red"))
        self.show_operation(operation)
        # While preflight and launch steps run, every stage is still pending: show the steps in their place.
        steps_shown = self.query_one("#operation-steps", Static).display
        # Ready, or was ready and cannot serve now: the serving figures are the evidence.
        ready = engine.state in (EngineState.READY, EngineState.DEGRADED, EngineState.WEDGED)
        # Once ready, the bars have done their job: one line of stage times leaves room for serving.
        self.query_one("#stages").display = not ready and not (
            steps_shown and running is None and engine.timeline is None)
        summary = self.query_one("#stage-summary", Static)
        summary.display = ready
        if ready:
            show(summary, stage_summary(views, slow_start_line(timeline.facts)))
        self.query_one(ServingView).display = ready

    def show_supervisor(self, seen: SupervisorSeen | None, image: ImageSeen | None = None,
                        upgrade: UpgradeSeen | None = None) -> None:
        """A line (wrapped where the column is narrow), hidden when there never was a supervisor: dim while
        it is there, yellow once it is not seen (its heartbeats stopped) — then nothing restarts the engine
        unless this dashboard does. Above it, dim, the image a start uses (hidden until read), and under
        that the last upgrade's outcome for a while after its end."""
        shown_image = self.query_one("#engine-image", Static)
        shown_image.display = image is not None
        if image is not None:
            show(shown_image, Text(image.describe(), style="dim"), layout="height")
        outcome = self.query_one("#engine-upgrade", Static)
        outcome.display = upgrade is not None and upgrade.text is not None
        if upgrade is not None and upgrade.text is not None:
            show(outcome, Text(upgrade.text, style=_UPGRADE_STYLE.get(upgrade.level, "")), layout="height")
        label = self.query_one("#engine-supervisor", Static)
        presence = seen.presence if seen is not None else None
        label.display = presence is not None
        if seen is None or presence is None:
            return
        live = presence.live(seen.read_at)
        show(label, Text(presence.describe(seen.read_at), style="dim" if live else "yellow"), layout="height")

    def failure_text(self, failure: FailureView) -> Text:
        """`` oom  on spark2 · in KV cache``, ``hint: …``, then the log's message, dimmer (see
        ``sparktui.domain.logs.diagnosis``)."""
        stage = STAGE_LABELS.get(failure.stage, failure.stage) if failure.stage else None
        node = node_label(failure.node, self._node_names, self._head)
        t = Text()
        for part in diagnosis(failure.kind, stage, node, failure.hint, failure.message):
            if part.role == "kind":
                t.append(f" {part.text} ", style="bold white on red")
            elif part.role == "where":
                t.append(f" {part.text}", style="bold red")
            elif part.role == "hint":
                t.append("\nhint: ", style="bold")
                t.append(part.text)
            else:
                t.append(f"\n{part.text}", style="red")
        return t

    @staticmethod
    def _state_text(engine: EngineChanged, running: StageView | None) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        state = engine.state
        label = state.value
        if state is EngineState.STARTING and running is not None:
            label = f"starting: {running.label}"
        t.append(f" {label} ", style=_STATE_STYLE.get(state, ""))
        # (A backend may put the stage name in the detail; it is in the label already.)
        shown = (running.name, running.label) if running is not None else ()
        quiet = state in (EngineState.FAILED, EngineState.UNKNOWN)
        # (Ready: the state machine's detail names the readiness check's first token; said once.)
        if engine.detail and not quiet and engine.detail not in shown:
            t.append(f"  {engine.detail}", style="dim")
        return t

    def show_operation(self, op: OperationView | None) -> None:
        box = self.query_one("#operation-steps", Static)
        # The step list matters while it runs and when it went wrong; a clean finish needs no space.
        box.display = op is not None and (op.running or op.ok is False)
        if op is None or not box.display:
            return
        t = Text()
        head = f"{op.kind}: " + ("running" if op.running else ("ok" if op.ok else "failed"))
        t.append(head, style="bold" if op.running else ("green" if op.ok else "bold red"))
        if op.message:
            t.append(f" — {op.message}")
        steps = list(op.steps)
        # Show a window that ends at the step running now: earlier successes scroll away, failures stay.
        open_steps = (StepStatus.RUNNING, StepStatus.PENDING)
        current = next((i for i, st in enumerate(steps) if st.status in open_steps), len(steps) - 1)
        window = steps[max(0, current - STEP_WINDOW + 2) : current + 2]
        hidden_failures = [st for st in steps[: max(0, current - STEP_WINDOW + 2)]
                           if st.status in (StepStatus.FAILED, StepStatus.WARNING)]
        done = sum(1 for st in steps if st.status in (StepStatus.OK, StepStatus.SKIPPED))
        t.append(f"  {done}/{len(steps)}", style="dim")
        for step in [*hidden_failures, *window]:
            mark, style = _STEP_MARK.get(step.status, ("?", ""))
            t.append(f"\n {mark} ", style=style)
            t.append(step.name)
            if step.node:
                t.append(f" @{step.node}", style="dim")
            if step.seconds is not None:
                t.append(f" {step.seconds:.1f}s", style="dim")
            if step.message:
                t.append(f"  {step.message}", style="red" if step.status is StepStatus.FAILED else "dim")
        remaining = len(steps) - (current + 2)
        if remaining > 0:
            t.append(f"\n   … {remaining} more", style="dim")
        # Each step's progress changes the text, rarely its height (the window keeps its length): only a new
        # height lays the screen out again (a layout costs a start's dashboard more than the frame itself).
        show(box, t, layout="height")


def eta_text(views: list[StageView], running: StageView | None, elapsed: float | None,
             runs: Sequence[RunRecord]) -> Text:
    """``ready in about 20 min; the last 3 runs took 25m10s``: one remaining time, the whole start's, and the
    history it rests on (``domain.start_eta``; empty without any). A stage slower than those runs says so
    instead, with its usual time."""
    t = Text(no_wrap=True, overflow="ellipsis")
    eta = start_eta(views, running, elapsed, runs)
    if eta is None:
        return t
    if eta.overdue is not None:   # (the running stage is named on the line above)
        t.append(eta.overdue, style="bold yellow")
        return t
    t.append(f"ready in {format_remaining(eta.ready_in or 0.0)}")
    if eta.typical is not None:
        basis = "the last run" if eta.runs == 1 else f"the last {eta.runs} runs"
        t.append(f"; {basis} took {fmt.duration(eta.typical)}", style="dim")
    return t


def slow_start_line(facts: Mapping[str, object]) -> str:
    """The start's slowest stage against what it should take, with the remedy (``domain.perf.start_explain``,
    from the log's facts: the slowest node's figures); ``""`` when nothing was slow."""
    return explain_start(facts).short()


def stage_summary(views: list[StageView], slow: str = "") -> Text:
    """``ready after 52s — config 5s · Ray placement 13s · weights 10s …`` (the stages that ran), and on a
    line of its own why it took that long, when a stage was slow (``slow``)."""
    t = Text()
    ran = [v for v in views if v.status == "done" and v.seconds is not None]
    t.append("ready after ", style="dim")
    t.append(fmt.duration(sum(v.seconds or 0.0 for v in ran)), style="bold green")
    t.append(" — ", style="dim")
    t.append(" · ".join(f"{v.label} {fmt.duration(v.seconds)}" for v in ran if v.seconds), style="dim")
    if slow:
        t.append("\n" + slow, style="yellow")
    return t


def facts_text(facts: Mapping[str, object], engine: EngineChanged, width: int = 0) -> Text:
    """The facts as ``caption value`` items joined by `` · ``; with a ``width``, lines break between items,
    never inside one (Rich would wrap at any space, ``max`` on one line and ``conc 3.1×`` on the next)."""
    if engine.vllm_version and "vllm_version" not in facts:
        facts = {"vllm_version": engine.vllm_version, **facts}
    items: list[Text] = []
    for key, caption, unit in FACT_CAPTIONS:
        value = facts.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, float):
            value = f"{value:.1f}" if value < 100 else f"{value:,.0f}"
        elif isinstance(value, int) and value >= 10_000:
            value = f"{value:,}"
        if key == "model":
            value = str(value).rstrip("/").rsplit("/", 1)[-1]
        item = Text()
        item.append(f"{caption} ", style="dim")
        item.append(f"{value}{unit}", style="bold")
        items.append(item)
    t = Text(no_wrap=True, overflow="ellipsis")
    used = 0
    for item in items:
        if used:
            if width and used + 3 + item.cell_len > width:
                t.append("\n")
                used = 0
            else:
                t.append(" · ", style="dim")
                used += 3
        t.append_text(item)
        used += item.cell_len
    if facts.get("nccl_verdict"):
        # The NCCL verdict (sparktui.domain.logs.nccl): RoCE with both HCAs, or the socket fallback.
        ok = facts.get("nccl_verdict_level") == "ok"
        verdict = str(facts["nccl_verdict"])
        # Folded at the width (the text does not wrap by itself: the facts above break between items).
        for line in textwrap.wrap(verdict, width) if width > 10 else [verdict]:
            t.append("\n" + line, style="green" if ok else "bold yellow")
    return t


class ServingView(Vertical):
    """Compact serving figures from a ``ServingSnapshot`` (``sparktui.domain.serving``)."""

    def compose(self) -> ComposeResult:
        yield Static(id="serving-text")
        with Horizontal(classes="spark-row"):
            yield Label("tok/s", classes="spark-caption")
            yield ScaledSparkline(1.0, id="spark-tokens")

    def show(self, snap: ServingSnapshot | None, smoke: str | None) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        if snap is None:
            t.append("serving: waiting for /metrics…", style="dim")
        elif not snap.stats_enabled:
            t.append("serving: the server runs with --disable-log-stats", style="dim")
        else:
            t.append("run ", style="dim")
            t.append(fmt.number(snap.requests_running), style="bold")
            t.append("  wait ", style="dim")
            t.append(fmt.number(snap.requests_waiting), style="bold")
            t.append("  KV ", style="dim")
            t.append(fmt.percent(snap.kv_cache_usage_percent), style="bold")
            t.append("  prefix hit ", style="dim")
            hit = snap.prefix_cache_hit_rate
            t.append(fmt.percent(None if hit is None else hit * 100), style="bold")
            t.append("\ngen ", style="dim")
            t.append(fmt.number(snap.generation_tokens_per_s, " tok/s"), style="bold")
            t.append("  prompt ", style="dim")
            t.append(fmt.number(snap.prompt_tokens_per_s, " tok/s"), style="bold")
            t.append("\nTTFT ", style="dim")
            t.append(f"{_ms(snap.ttft.p50)}/{_ms(snap.ttft.p95)}")
            t.append("  ITL ", style="dim")
            t.append(f"{_ms(snap.itl.p50)}/{_ms(snap.itl.p95)}")
            t.append(" (p50/p95)", style="dim")
            _pace_lines(t, snap)
            stalled = snap.generation_stalled_seconds
            if stalled is not None and stalled >= 30:
                t.append(f"\nno token generated for {fmt.duration(stalled)}", style="bold red")
            tokens = snap.history.generation_tokens_per_s
            scale = max(tokens, default=0.0) or 1.0
            self.query_one("#spark-tokens", ScaledSparkline).show(tokens, scale=scale)
        if smoke:
            t.append("\nsmoke test: ", style="dim")
            t.append(smoke)
        box = self.query_one("#serving-text", Static)
        # New figures every scrape: a repaint of this box, and a reflow only when its height changes.
        show(box, t, layout="height")


def _pace_lines(t: Text, snap: ServingSnapshot) -> None:
    """Against the last benchmark, speculative decoding's acceptance, "slower than it should": each line
    only when there is something to say (an engine without either shows nothing more)."""
    pace, spec = snap.pace, snap.spec
    parts: list[tuple[str, str]] = []
    for i, (figure, words) in enumerate(pace.against_parts() if pace is not None else []):
        parts += [(" · " if i else "", "dim"), (figure, "bold"), (f" {words}", "dim")]
    if spec is not None:
        parts += [("  " if parts else "", ""), ("accept ", "dim"), (f"{100 * spec.rate:.0f} %", "bold")]
        if spec.mean_length is not None:
            parts += [("  len ", "dim"), (f"{spec.mean_length:.2f}", "bold")]
    if parts:
        t.append("\n")
        for text, style in parts:
            t.append(text, style=style)
    if pace is not None and pace.slow is not None:
        t.append("\n" + pace.slow.short(), style="bold yellow")


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:.0f} ms"
