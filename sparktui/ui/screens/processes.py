"""The process view (``P``): our processes on every node — pid, name, CPU %, RSS, GPU memory — sortable.

It reads what the node panels read (``NodeState.reading.process_rows``, refreshed with each sample), so it
adds no collection of its own; it only lays the rows out and keeps the chosen order while they refresh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from sparktui.domain.telemetry import ProcessRow
from sparktui.ui.state import NodeState

GIB = 1024**3
#: Sort key → (column caption, how a row sorts, largest first?).
SORTS: dict[str, tuple[str, Callable[[tuple[str, ProcessRow]], Any], bool]] = {
    "cpu": ("CPU %", lambda nr: nr[1].cpu_percent or 0.0, True),
    "rss": ("RSS", lambda nr: nr[1].rss or 0, True),
    "gpu": ("GPU mem", lambda nr: nr[1].gpu_memory or 0, True),
    "name": ("name", lambda nr: (nr[1].name, nr[0]), False),
    "node": ("node", lambda nr: (nr[0], nr[1].pid), False),
    "pid": ("pid", lambda nr: nr[1].pid, False),
}
COLUMNS = ("node", "pid", "name", "kind", "cpu", "rss", "gpu", "command")


def _size(value: int | None) -> str:
    if value is None:
        return "–"
    return f"{value / GIB:.1f} GiB" if value >= GIB else f"{value / 1024**2:.0f} MiB"


class ProcessScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,P,q", "dismiss", "Close", id="processes.close"),
        Binding("c", "sort('cpu')", "Sort by CPU", id="processes.sort_cpu"),
        Binding("m", "sort('rss')", "Sort by memory", id="processes.sort_rss"),
        Binding("g", "sort('gpu')", "Sort by GPU memory", id="processes.sort_gpu"),
        Binding("n", "sort('name')", "Sort by name", id="processes.sort_name"),
        Binding("o", "sort('node')", "Sort by node", id="processes.sort_node"),
    ]
    DEFAULT_CSS = """
    ProcessScreen { align: center middle; }
    ProcessScreen > Vertical { width: 90%; height: 80%; border: round $accent; background: $surface; }
    ProcessScreen #processes-title { width: 100%; padding: 0 1; }
    ProcessScreen DataTable { height: 1fr; }
    """

    def __init__(self, nodes: Mapping[str, NodeState], sort: str = "cpu") -> None:
        super().__init__()
        self.nodes = nodes
        self.sort = sort

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(id="processes-title")
            yield DataTable(id="processes", zebra_stripes=True, cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key in COLUMNS:
            table.add_column(SORTS[key][0] if key in SORTS else key, key=key)
        self.refresh_rows()
        self.set_interval(1.0, self.refresh_rows)

    def rows(self) -> list[tuple[str, ProcessRow]]:
        found = [(name, row) for name, node in self.nodes.items() if node.reading is not None
                 for row in node.reading.process_rows]
        _, key, largest_first = SORTS[self.sort]
        return sorted(found, key=key, reverse=largest_first)

    def refresh_rows(self) -> None:
        table = self.query_one(DataTable)
        rows = self.rows()
        table.clear()
        for node, r in rows:
            table.add_row(node, str(r.pid), r.name, r.kind,
                          "–" if r.cpu_percent is None else f"{r.cpu_percent:.1f}", _size(r.rss),
                          _size(r.gpu_memory), r.cmdline[:120], key=f"{node}:{r.pid}")
        caption = SORTS[self.sort][0]
        title = self.query_one("#processes-title", Label)
        title.update(f"[b]our processes[/b] on {len(self.nodes)} nodes: {len(rows)} · sorted by {caption} · "
                     "c CPU  m memory  g GPU memory  n name  o node · Esc closes"
                     if rows else "no process of ours on any node (none started, or not sampled yet) · Esc")

    def action_sort(self, key: str) -> None:
        self.sort = key
        self.refresh_rows()
