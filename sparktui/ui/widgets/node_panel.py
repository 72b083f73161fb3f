"""One column per node: name, role and SSH state; unified memory, GPU, CPU, RoCE per cable; sparklines."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Label, Static

from sparktui.domain.events import NodeReading
from sparktui.ui import format as fmt
from sparktui.ui.state import NodeState
from sparktui.ui.widgets.sparkline import ScaledSparkline
from sparktui.ui.widgets.util import show

_LINK_STYLE = {
    "connected": "green",
    "connecting": "yellow",
    "retrying": "bold yellow",
    "failed": "bold red",
    "closed": "dim",
}


class NodeSummary(Widget):
    """The text part of a node panel, drawn to the panel's width.

    A line-API widget: each line's strip is kept until that line's text changes, and only changed lines are
    marked dirty. At ready a sample changes a figure or two (power, CPU %) a second; going through Textual's
    ``Content`` (convert, wrap, format) for all five lines every second cost more than the rest of the frame.
    """

    DEFAULT_CSS = "NodeSummary { height: auto; }"

    def __init__(self, node: NodeState, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.node = node
        self._last: Text | None = None
        self._lines: list[Text] = []
        #: Rendered lines at ``_strips_width``, by line number; dropped for a line when its text changes.
        self._strips: dict[int, Strip] = {}
        self._strips_width = -1

    def update_from_state(self) -> None:
        """Repaint only the lines whose text changed; reflow only when the number of lines did."""
        text = self.render()
        if text == self._last:
            return
        old, lines = self._lines, self._keep(text)
        if len(lines) != len(old):
            self._strips.clear()
            self.refresh(layout=True)
            return
        changed = [y for y, (a, b) in enumerate(zip(old, lines, strict=True)) if a != b]
        for y in changed:
            self._strips.pop(y, None)
        width = self.size.width
        if changed and width:
            self.refresh(*(Region(0, y, width, 1) for y in changed))

    def _keep(self, text: Text) -> list[Text]:
        """``text`` becomes the summary drawn; its lines, which ``render_line`` draws one by one."""
        self._last = text
        self._lines = list(text.split("\n", allow_blank=True))
        return self._lines

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()   # a theme or class change: the base style under every line changed

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._strips_width:
            # The memory bar's length follows the width: lay the text out again for the new one.
            self._strips.clear()
            self._strips_width = width
            self._keep(self.render())
        strip = self._strips.get(y)
        if strip is None:
            base = self.rich_style
            if y < len(self._lines):
                line = self._lines[y].copy()
                line.truncate(width, overflow="ellipsis")
                line.stylize_before(base)
                strip = Strip(line.render(self.app.console), line.cell_len).extend_cell_length(width, base)
            else:
                strip = Strip.blank(width, base)
            self._strips[y] = strip
        return strip

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        reading = self.node.reading
        cables = len(reading.cables) if reading else 0
        return 4 + max(1, cables) + (1 if reading is not None and gpu_alert(reading) else 0)

    def render(self) -> Text:
        n, width = self.node, max(10, self.size.width)
        r = n.reading
        out = Text(no_wrap=True, overflow="ellipsis")
        # Unified memory (CPU and GPU share it on a GB10): used / total GiB.
        if r is None:
            out.append("waiting for the first sample…\n", style="dim")
            out.append("\n\n\n")
            return out
        label = "mem "
        if r.mem_total_gib is None or r.mem_used_gib is None:
            out.append(label, style="bold")
            out.append("unknown\n", style="yellow")
        else:
            frac = r.mem_used_gib / r.mem_total_gib if r.mem_total_gib else None
            figures = f" {r.mem_used_gib:.1f}/{r.mem_total_gib:.0f} GiB"
            bar_w = max(4, width - len(label) - len(figures))
            style = "red" if frac is not None and frac > 0.92 else "cyan"
            out.append(label, style="bold")
            out.append(fmt.bar(frac, bar_w), style=style)
            out.append(figures + "\n")
        # GPU: utilisation, temperature, power (GPU memory only where the driver reports it).
        out.append("gpu ", style="bold")
        if r.gpu_missing and r.gpu_util is None:
            out.append(f"{r.gpu_missing}\n", style="yellow")
        else:
            util_style = "bold green" if (r.gpu_util or 0) >= 50 else ""
            out.append(f"{fmt.percent(r.gpu_util):>4}", style=util_style)
            temp_style = "bold red" if (r.gpu_temp_c or 0) >= 85 else ""
            out.append(f"  {fmt.number(r.gpu_temp_c, '°C')}", style=temp_style)
            out.append(f"  {fmt.number(r.gpu_power_w, ' W')}")
            if r.gpu_clock_mhz is not None and width >= 40:
                out.append(f"  {r.gpu_clock_mhz:.0f} MHz", style="dim")
            out.append("\n")
        if gpu_alert(r):
            # Hidden slow clock states ("nvidia-smi shows nothing"): NVML's clock-event reasons, Xid errors.
            out.append("clk ", style="bold")
            if r.gpu_xids:
                out.append(f"Xid {', '.join(str(x) for x in r.gpu_xids[-3:])}", style="bold white on red")
                out.append("  ")
            if r.gpu_clock_events:
                out.append(", ".join(r.gpu_clock_events), style="bold yellow")
                if r.gpu_clock_mhz is not None and r.gpu_clock_max_mhz:
                    out.append(f"  SM {r.gpu_clock_mhz:.0f}/{r.gpu_clock_max_mhz:.0f} MHz", style="yellow")
            out.append("\n")
        out.append("cpu ", style="bold")
        out.append(f"{fmt.percent(r.cpu_percent):>4}")
        if r.gpu_mem_used_gib is not None or r.gpu_mem_total_gib is not None:
            out.append(f"  gpu mem {fmt.gib(r.gpu_mem_used_gib)}/{fmt.gib(r.gpu_mem_total_gib, 0)} GiB")
        if n.stale_seconds is not None:
            out.append(f"  no sample for {fmt.duration(n.stale_seconds)}", style="bold yellow")
        out.append("\n")
        # RoCE: one line per cable: state, rate, rx/tx Gb/s; rising error counters in red.
        if not r.cables:
            out.append("net ", style="bold")
            out.append("no RDMA device\n", style="dim")
        for cable in r.cables:
            out.append("net ", style="bold")
            up = (cable.state or "").upper().endswith("ACTIVE")
            out.append("▲ " if up else "▼ ", style="green" if up else "bold red")
            out.append(f"rx {fmt.rate_gbps(cable.rx_gbps):>4} tx {fmt.rate_gbps(cable.tx_gbps):>4} Gb/s")
            if cable.errors_rising:
                errs = ", ".join(f"{name} +{delta}" for name, delta in cable.errors_rising)
                out.append(f"  {errs}", style="bold white on red")
            elif width >= 44 and cable.rate:
                out.append(f"  {short_rate(cable.rate)}", style="dim")
            out.append("\n")
        if r.processes and width >= 30:
            out.append(", ".join(r.processes), style="dim")
        return out


def compact_readings(n: NodeState) -> Text:
    """The node's readings on one line, for the compact layout: ``│ mem 70/122 GiB │ gpu 97% 44°C 26 W …``."""
    r = n.reading
    t = Text()
    if r is None:
        return t
    sep = ("  │ ", "dim")
    t.append(*sep)
    t.append("mem ", style="bold")
    if r.mem_total_gib is None or r.mem_used_gib is None:
        t.append("unknown", style="yellow")
    else:
        t.append(f"{r.mem_used_gib:.0f}/{r.mem_total_gib:.0f} GiB")
    t.append(*sep)
    t.append("gpu ", style="bold")
    if r.gpu_missing and r.gpu_util is None:
        t.append(r.gpu_missing, style="yellow")
    else:
        temp, power = fmt.number(r.gpu_temp_c, "°C"), fmt.number(r.gpu_power_w, " W")
        t.append(f"{fmt.percent(r.gpu_util)} {temp} {power}")
    for cable in r.cables:
        t.append(*sep)
        up = (cable.state or "").upper().endswith("ACTIVE")
        t.append("net ", style="bold")
        t.append("▲ " if up else "▼ ", style="green" if up else "bold red")
        t.append(f"{fmt.rate_gbps(cable.rx_gbps)}/{fmt.rate_gbps(cable.tx_gbps)} Gb/s")
        if cable.errors_rising:
            t.append(" errors", style="bold white on red")
    if n.stale_seconds is not None:
        t.append(f"  no sample for {fmt.duration(n.stale_seconds)}", style="bold yellow")
    return t


def gpu_alert(r: NodeReading) -> bool:
    """A clock-event reason or an Xid error is active: the panel gives it a line of its own."""
    return bool(r.gpu_clock_events or r.gpu_xids)


def short_rate(rate: str) -> str:
    """``"200 Gb/sec (4X HDR)"`` → ``"200G"`` (the link's nominal rate)."""
    head = rate.split(" ", 1)[0]
    return f"{head}G" if head.replace(".", "").isdigit() else rate


#: Each chart's name (its caption's first line; the second is its scale).
CAPTIONS = {"mem": "mem", "gpu": "gpu", "roce": "net"}
#: Before the first sample: empty charts.
_NO_READING = NodeReading()


class NodePanel(Vertical):
    """A node's column. ``refresh_from_state`` re-reads ``self.node`` (the app calls it after a change)."""

    def __init__(self, node: NodeState, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.node = node
        #: Telemetry paused (``p``): the charts and readings keep the moment it was paused.
        self.paused = False

    def compose(self) -> ComposeResult:
        yield Label(id="node-title")
        # Why the link is down, whole and wrapped (the title is one line and would cut it).
        yield Static(id="node-link")
        yield NodeSummary(self.node)
        for key, caption, scale in (("mem", "mem", 100.0), ("gpu", "gpu", 100.0), ("roce", "net", 200.0)):
            with Horizontal(classes="spark-row"):
                # The chart's name, and under it the value its top stands for (its scale).
                yield Label(caption, id=f"caption-{key}", classes="spark-caption")
                yield ScaledSparkline(scale, id=f"spark-{key}", classes=f"spark-{key}")

    def on_mount(self) -> None:
        self.refresh_from_state()

    def refresh_from_state(self) -> None:
        n = self.node
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(n.name, style="bold")
        title.append(f"  {n.role}", style="dim" if n.role != "head" else "bold magenta")
        title.append("  ")
        compact = self.screen.has_class("-compact")
        # On one compact line a healthy link is a green dot; anything else keeps its words.
        link = "●" if compact and n.link_phase == "connected" else n.link_summary()
        title.append(link, style=_LINK_STYLE.get(n.link_phase, ""))
        if compact:
            title.append_text(compact_readings(n))
        show(self.query_one("#node-title", Label), title, layout=False)
        reason = self.query_one("#node-link", Static)
        down = bool(n.link_reason) and n.link_phase != "connected"
        if reason.display != down:
            reason.display = down
        if down:
            show(reason, Text(n.link_reason, style=_LINK_STYLE.get(n.link_phase, "")))
        self.set_class(n.link_phase not in ("connected",), "-link-down")
        if self.paused:
            return   # the charts and readings hold still; the link state above stays live
        self.query_one(NodeSummary).update_from_state()
        # Memory and GPU on 0–100 %. Traffic on 0 to the window's peak (at least 10 Gb/s): a fixed 0–400
        # Gb/s scale would flatten a 30 Gb/s weight load into nothing; the text line gives the absolute value.
        r = n.reading or _NO_READING
        # Columns at fixed places in time (``end``): the charts hold still between columns.
        self.query_one("#spark-mem", ScaledSparkline).show(r.mem_history, end=r.mem_history_end)
        self.query_one("#spark-gpu", ScaledSparkline).show(r.gpu_history, end=r.gpu_history_end)
        peak = max(r.roce_history, default=0.0)
        net_scale = max(10.0, peak * 1.1)
        self.query_one("#spark-roce", ScaledSparkline).show(r.roce_history, scale=net_scale,
                                                            end=r.roce_history_end)
        total = f"{r.mem_total_gib:.0f}G" if r.mem_total_gib else "100%"
        for key, scale in (("mem", total), ("gpu", "100%"), ("roce", f"{net_scale:.0f}G")):
            label = self.query_one(f"#caption-{key}", Label)
            show(label, Text(f"{CAPTIONS[key]}\n{scale}"), layout=False)

    def set_window(self, seconds: float, paused: bool = False) -> None:
        """The charts' time window (history length × sample interval), in the bottom border."""
        self.paused = paused
        window = f"last {fmt.duration(seconds)}" if seconds < 90 else f"last {seconds / 60:.0f} min"
        self.border_subtitle = ("⏸ paused — p resumes · " if paused else "") + f"charts: {window}"
