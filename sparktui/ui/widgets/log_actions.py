"""The log's actions, bound on the dashboard (its keys work from anywhere; ``[ui.keys]`` remaps them):
find, filter, level, node, source, wrap, probes, copy, save, scrolling and following. Each asks the
``LogPane`` and says what it did."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App

from sparktui.config import UIConfig
from sparktui.domain.events import ClusterBackend
from sparktui.domain.history import state_dir as local_state_dir
from sparktui.ui.widgets.log_pane import LogPane


class LogActions(App[int]):
    """Part of ``SparkApp`` (``sparktui.ui.app``), which sets what is declared here."""

    backend: ClusterBackend
    ui_config: UIConfig
    clock: Callable[[], float]
    #: ``vllm`` and each node's Ray worker log (``ray:<node>``), in the order the source key cycles.
    log_sources: list[str]

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
        pane.show_source()   # the backend's choice (``log_source``), which the pane reads

    def action_follow(self) -> None:
        pane = self.query_one(LogPane)
        pane.scroll_to_end()
        pane.update_status()

    def action_toggle_full_log(self) -> None:
        self.screen.toggle_class("-log-full")
