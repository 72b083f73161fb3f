"""The bench chart (``B``, and when ``b``'s benchmark finishes): a run's output tok/s per level as bars,
the previous run of the same setup (fingerprint) under each one with the change, TTFT p50, and one
stream's decode speed as a share of the decode ceiling (``sparktui.domain.bench_chart``). It scrolls, so all
of it can be read at 80×24; the bars take the width there is."""

from __future__ import annotations

import textwrap
import time
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget

from sparktui.domain.bench_chart import BenchChart, ChartRow, change_text
from sparktui.ui import format as fmt

#: The columns right of the bars: (heading, width), each right-aligned.
TAIL = (("", 7), ("vs prev", 9), ("TTFT p50", 10), ("of ceiling", 12))
THIS_RUN, PREVIOUS = "bold green", "grey50"


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def chart_text(chart: BenchChart, width: int) -> Text:
    """The chart laid out for ``width`` cells (header and notes folded there, bars as wide as fits)."""
    width = max(width, 40)
    record = chart.record
    out = Text(no_wrap=True, overflow="ellipsis")

    def para(text: str, style: str = "") -> None:
        for line in textwrap.wrap(text, width) or [""]:
            out.append(line + "\n", style=style)

    head = f"bench of {_when(record.started_at)} · {record.profile or 'own sweep'}"
    key = chart.fingerprint_key
    head += (f" · fingerprint {key} · {chart.runs_of_setup} run{'s' if chart.runs_of_setup != 1 else ''} "
             "of this setup") if key else ""
    para(head, "bold")
    para(chart.setup_line(), "dim")
    out.append("\n")
    out.append("█ ", style=THIS_RUN)
    out.append("this run   ")
    out.append("█ ", style=PREVIOUS)
    if chart.previous is not None:
        out.append(f"previous run of this setup ({_when(chart.previous.started_at)})\n")
    else:
        out.append("previous run: none of this setup yet\n")
    label_w = max([len("level"), *(len(_label(row)) for row in chart.rows)])
    tail_w = sum(w for _, w in TAIL)
    bar_w = max(8, width - label_w - 1 - tail_w)
    out.append("level".ljust(label_w + 1) + "output tok/s".ljust(bar_w) + "".join(h.rjust(w) for h, w in TAIL)
               + "\n", style="dim")
    top = chart.top_tok_s
    for row in chart.rows:
        _row(out, row, label_w, bar_w, top)
    if chart.spread:
        para(f"all {chart.runs_of_setup} runs of this setup: " + " · ".join(
            f"{label} {lo:.1f}–{hi:.1f}" for label, lo, hi in chart.spread) + " tok/s", "dim")
    out.append("\n")
    para(chart.ceiling_line())
    if any(row.ceiling_percent is not None for row in chart.rows):
        para("of ceiling: one stream's decode speed (1 ÷ ITL p50) against it; 50–60 % is what TP-2 Sparks "
             "reach, above 100 % means the ceiling's inputs are wrong or speculative decoding is on", "dim")
    energy = [f"{_label(row)} {row.joules_per_token:.2f}" for row in chart.rows if row.joules_per_token]
    if energy:
        para("energy per output token (J/token, all nodes' GPUs): " + " · ".join(energy))
    notes = [f"{row.label}: {row.failed} request(s) failed" for row in chart.rows if row.failed]
    if record.interrupted:
        notes.append("interrupted: * marks a level cut short (its figures cover what finished)")
    for note in notes:
        para(note, "yellow")
    out.rstrip()
    return out


def _label(row: ChartRow) -> str:
    return row.label + ("*" if row.partial else "")


def _row(out: Text, row: ChartRow, label_w: int, bar_w: int, top: float) -> None:
    (_, rate_w), (_, change_w), (_, ttft_w), (_, ceiling_w) = TAIL
    out.append(_label(row).ljust(label_w + 1), style="bold")
    out.append(fmt.bar(None if row.tok_s is None or not top else row.tok_s / top, bar_w), style=THIS_RUN)
    out.append(fmt.number(row.tok_s, digits=1).rjust(rate_w), style="bold")
    change = row.change_percent
    out.append(change_text(change).rjust(change_w),
               style="" if change is None or change > -5 else "bold yellow")
    out.append(("–" if row.ttft_p50 is None else f"{row.ttft_p50 * 1000:.0f} ms").rjust(ttft_w))
    out.append(fmt.number(row.ceiling_percent, " %").rjust(ceiling_w) + "\n")
    if row.previous_tok_s is not None:
        out.append(" " * (label_w + 1))
        out.append(fmt.bar(row.previous_tok_s / top if top else None, bar_w), style=PREVIOUS)
        out.append(fmt.number(row.previous_tok_s, digits=1).rjust(rate_w) + "\n", style=PREVIOUS)


class BenchChartView(Widget):
    """The chart, made at the width the widget has when drawn (the bars take what there is)."""

    # The text is laid out here at the widget's width: Textual must not fold it again.
    DEFAULT_CSS = "BenchChartView { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, chart: BenchChart, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.chart = chart
        self._made: tuple[int, Text] | None = None

    def _text(self, width: int) -> Text:
        if self._made is None or self._made[0] != width:
            self._made = (width, chart_text(self.chart, width))
        return self._made[1]

    def render(self) -> Text:
        return self._text(self.size.width)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self._text(width).plain.splitlines())


class BenchChartScreen(ModalScreen[None]):
    """``B`` (again), ``escape`` or ``q`` closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,B,q", "close", "Close", id="bench_chart.close"),
    ]
    DEFAULT_CSS = """
    BenchChartScreen { align: center middle; }
    BenchChartScreen > VerticalScroll {
        width: 100%; max-width: 120; height: auto; max-height: 100%;
        border: round $accent; border-title-align: left; border-subtitle-align: right;
        background: $surface; padding: 0 1;
    }
    """

    def __init__(self, chart: BenchChart) -> None:
        super().__init__()
        self.chart = chart

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="bench-chart-scroll") as scroll:
            scroll.border_title = "benchmark: output tok/s by concurrency"
            scroll.border_subtitle = "↑↓ PgUp PgDn scroll · Esc closes"
            yield BenchChartView(self.chart, id="bench-chart")

    def on_mount(self) -> None:
        self.query_one("#bench-chart-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)
