"""The live log: Textual's ``Log`` fed in batches, with filters, find, progress collapsing and sources.

Why it is shaped like this (Textual issues 2187/2432): one message or one ``write`` per line freezes the UI
under a flood, so records are only *queued* here (``add_records``) and the app calls ``flush`` on a
10–20 Hz timer, which writes the whole batch with one ``write_lines``. Memory is bounded twice: each source's
ring of formatted lines (``buffer_lines``) and the ``Log``'s own ``max_lines``.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.highlighter import Highlighter
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, Log

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_LEVEL_NO = {name: i for i, name in enumerate(LEVELS)}
#: Level filter steps the ``l`` key cycles through (index into LEVELS; 0 = everything).
LEVEL_STEPS = (0, 1, 2, 3)
#: Longer lines are cut before highlighting and search (toolong's limit; regex cost grows with length).
MAX_LINE_CHARS = 1000
HEAD = "head"


@dataclass(frozen=True, slots=True)
class LogLine:
    text: str
    level: int            # index into LEVELS; -1 when the line has none (continuations, plain output)
    node: str
    lower: str            # for case-insensitive filter and find without re-lowering per keystroke


def _field(record: Any, *names: str) -> Any:
    for name in names:
        value = getattr(record, name, None)
        if value is not None:
            return value
    return None


def progress_key(message: str) -> str:
    """The bar a progress record belongs to: the text before its first ``:`` (tqdm's description)."""
    return message.split(":", 1)[0].strip()


def format_record(record: Any) -> tuple[LogLine, str | None]:
    """One record as a screen line, and its progress-bar key when it is a progress update."""
    if isinstance(record, str):
        return LogLine(record[:MAX_LINE_CHARS], -1, HEAD, record[:MAX_LINE_CHARS].lower()), None
    message = str(_field(record, "message", "text", "raw") or "")
    level_name = _field(record, "level")
    level_name = str(getattr(level_name, "value", level_name) or "").upper()
    level = _LEVEL_NO.get(level_name, -1)
    node = str(_field(record, "node") or HEAD)
    role = str(_field(record, "role") or "")
    stamp = _field(record, "time", "timestamp")
    clock = ""
    if isinstance(stamp, str):
        clock = stamp[-8:]
    elif stamp is not None and hasattr(stamp, "strftime"):
        clock = stamp.strftime("%H:%M:%S")
    where = node if node != HEAD else ""
    if role:
        where = f"{where} {role}".strip()
    # Fixed columns (time, level) so messages line up whether or not a line carries them.
    text = f"{clock:<8} {level_name[:7]:<7} {f'[{where}] ' if where else ''}{message}"[:MAX_LINE_CHARS]
    key = None
    if _field(record, "is_progress"):
        progress = _field(record, "progress")
        key = str(getattr(progress, "desc", "") or progress_key(message))
    return LogLine(text, level, node, text.lower()), key


class LevelHighlighter(Highlighter):
    """Colours the level word (and whole ERROR lines) and marks the current find term."""

    _ERROR = re.compile(r"\b(ERROR|CRITICAL|Traceback|Error:|Exception)\b")
    _WARNING = re.compile(r"\bWARNING\b")
    _INFO = re.compile(r"\bINFO\b")
    _DEBUG = re.compile(r"\bDEBUG\b")

    def __init__(self) -> None:
        self.term: str = ""

    def highlight(self, text: Text) -> None:
        plain = text.plain
        head = plain[:40]
        if self._ERROR.search(head) or "Traceback" in plain[:60]:
            text.stylize("red")
            text.highlight_regex(self._ERROR, "bold red")
        elif (m := self._WARNING.search(head)) is not None:
            text.stylize("bold yellow", m.start(), m.end())
        elif (m := self._INFO.search(head)) is not None:
            text.stylize("green", m.start(), m.end())
        elif (m := self._DEBUG.search(head)) is not None:
            text.stylize("dim", m.start(), m.end())
        if self.term:
            text.highlight_words([self.term], "black on yellow", case_sensitive=False)


class LiveLog(Log):
    """``Log`` with our highlighter; nothing else changes."""

    def __init__(self, max_lines: int, **kwargs: Any) -> None:
        # auto_scroll off: LogPane decides when to follow (see LogPane.flush).
        super().__init__(max_lines=max_lines, highlight=True, auto_scroll=False, **kwargs)
        self.highlighter = LevelHighlighter()

    def set_term(self, term: str) -> None:
        assert isinstance(self.highlighter, LevelHighlighter)
        self.highlighter.term = term
        self.notify_style_update()   # drops the cached strips so the marks follow the term
        self.refresh()


class LogPane(Vertical):
    """The log column. The app owns the timer; this widget owns the buffers and the filters."""

    def __init__(self, buffer_lines: int, naive: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.buffer_lines = buffer_lines
        #: Write every line as it arrives (the slow way the benchmark compares against).
        self.naive = naive
        self.source = "vllm"
        self.buffers: dict[str, deque[LogLine]] = {}
        self.progress: dict[str, tuple[str, LogLine]] = {}   # source → (bar key, latest update)
        self._pending: list[LogLine] = []
        self.filter_text = ""
        self.min_level = 0
        self.node_filter: str | None = None
        self.find_term = ""
        self._find_from: int | None = None
        self.input_mode: str | None = None   # "find" | "filter" while the input is open
        self.nodes_seen: list[str] = [HEAD]
        self.flushes = 0
        self.lines_written = 0
        #: Follow the end of the log. Paused when the person scrolls up, resumed when they reach the end.
        self.follow = True
        self._auto_y: float | None = None

    def compose(self) -> ComposeResult:
        yield Label(id="log-status")
        yield Label(id="log-progress")
        yield LiveLog(self.buffer_lines, id="log")
        yield Input(id="log-input", compact=True)

    def on_mount(self) -> None:
        self.query_one("#log-input", Input).display = False
        self.query_one("#log-progress", Label).display = False
        self.update_status()

    @property
    def log_widget(self) -> LiveLog:
        return self.query_one("#log", LiveLog)

    # ---- intake -----------------------------------------------------------------------------------
    def add_records(self, source: str, records: Iterable[Any]) -> None:
        ring = self.buffers.get(source)
        if ring is None:
            ring = self.buffers[source] = deque(maxlen=self.buffer_lines)
        shown = source == self.source
        for record in records:
            line, key = format_record(record)
            if line.node not in self.nodes_seen:
                self.nodes_seen.append(line.node)
            current = self.progress.get(source)
            if key is not None:
                # A progress update replaces the previous one of the same bar; only the bar's last state
                # reaches the log, as one line, when something else is logged after it.
                if current is not None and current[0] != key:
                    self._commit(ring, current[1], shown)
                self.progress[source] = (key, line)
                continue
            if current is not None:
                self._commit(ring, current[1], shown)
                del self.progress[source]
            self._commit(ring, line, shown)

    def _commit(self, ring: deque[LogLine], line: LogLine, shown: bool) -> None:
        ring.append(line)
        if shown and self.passes(line):
            if self.naive:
                self.log_widget.write(line.text + "\n")
                self.lines_written += 1
            else:
                self._pending.append(line)

    def passes(self, line: LogLine) -> bool:
        if self.min_level and line.level < self.min_level and line.level != -1:
            return False
        if self.min_level and line.level == -1 and self.min_level > 1:
            return False
        if self.node_filter is not None and line.node != self.node_filter:
            return False
        return not self.filter_text or self.filter_text in line.lower

    def flush(self) -> int:
        """Write what arrived since the last flush in one batch; returns the number of lines written."""
        pending, self._pending = self._pending, []
        log = self.log_widget
        self._update_follow()
        if pending:
            # More lines than the log keeps: the older ones would be pruned at once, so skip them.
            if len(pending) > self.buffer_lines:
                pending = pending[-self.buffer_lines :]
            log.write_lines([p.text for p in pending], scroll_end=False)
            self.lines_written += len(pending)
            self.flushes += 1
        # Also when nothing new came: the end moves when a horizontal scrollbar appears after a long line.
        if self.follow and not log.is_vertical_scroll_end:
            self.scroll_to_end()
        self._show_progress()
        self.update_status()
        return len(pending)

    def _update_follow(self) -> None:
        """Follow state from what the person did since the last flush: scrolled up → pause; back at the
        end → resume. (Textual's own check breaks when a horizontal scrollbar appears and shifts the end.)"""
        log = self.log_widget
        if self.follow:
            # Compare with the lower of where we left it and where the end is now: the end moves up by itself
            # when the log grows taller (the progress line hides), which clamps scroll_y without anyone
            # scrolling.
            if self._auto_y is not None and log.scroll_y < min(self._auto_y, log.max_scroll_y) - 0.5:
                self.follow = False
        elif log.is_vertical_scroll_end:
            self.follow = True

    def scroll_to_end(self) -> None:
        log = self.log_widget
        log.scroll_end(animate=False, immediate=True, x_axis=False)
        self._auto_y = log.max_scroll_y
        self.follow = True

    def _show_progress(self) -> None:
        label = self.query_one("#log-progress", Label)
        current = self.progress.get(self.source)
        label.display = current is not None
        if current is not None:
            label.update(Text("⟳ " + current[1].text.strip(), no_wrap=True, overflow="ellipsis"))

    # ---- filters, sources, find -------------------------------------------------------------------
    def rebuild(self) -> None:
        """Show the current source's buffer again under the current filters (after any change)."""
        self._pending.clear()
        log = self.log_widget
        log.clear()
        lines = [line.text for line in self.buffers.get(self.source, ()) if self.passes(line)]
        log.write_lines(lines[-self.buffer_lines :], scroll_end=False)
        self.scroll_to_end()
        self._show_progress()
        self.update_status()

    def set_source(self, source: str) -> None:
        self.source = source
        self.rebuild()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.lower()
        self.rebuild()

    def cycle_level(self) -> str:
        steps = list(LEVEL_STEPS)
        at = steps.index(self.min_level) if self.min_level in steps else -1
        self.min_level = steps[(at + 1) % len(steps)]
        self.rebuild()
        return LEVELS[self.min_level] if self.min_level else "all"

    def cycle_node(self) -> str:
        options: list[str | None] = [None, *self.nodes_seen]
        i = options.index(self.node_filter) if self.node_filter in options else 0
        self.node_filter = options[(i + 1) % len(options)]
        self.rebuild()
        return self.node_filter or "all"

    def set_find(self, term: str) -> None:
        self.find_term = term
        self._find_from = None
        self.log_widget.set_term(term)

    def find_next(self, backwards: bool = True) -> bool:
        """Scroll to the previous (older) match of the find term, or the next one; False if none."""
        term = self.find_term.lower()
        log = self.log_widget
        lines: Sequence[str] = log.lines
        if not term or not lines:
            return False
        start = self._find_from
        if start is None:
            start = int(log.scroll_y) + log.scrollable_content_region.height if backwards else -1
        rng = range(min(start, len(lines)) - 1, -1, -1) if backwards else range(start + 1, len(lines))
        for y in rng:
            if term in lines[y].lower():
                self._find_from = y
                # Centre the match; looking at a match pauses follow until End.
                self.follow = False
                log.scroll_to(y=max(0, y - log.scrollable_content_region.height // 2), animate=False,
                              immediate=True)
                self.update_status(f"match at line {y + 1}")
                return True
        self.update_status(f"no {'earlier' if backwards else 'later'} match for {self.find_term!r}")
        return False

    @property
    def following(self) -> bool:
        return self.follow

    def update_status(self, extra: str = "") -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" log ", style="bold reverse")
        t.append(f" {source_label(self.source)} ", style="bold")
        if self.following:
            t.append(" following ", style="green")
        else:
            t.append(" paused — End to follow ", style="bold yellow")
        if self.min_level:
            t.append(f" level ≥ {LEVELS[self.min_level]} ", style="cyan")
        if self.node_filter is not None:
            t.append(f" node {self.node_filter} ", style="cyan")
        if self.filter_text:
            t.append(f" filter {self.filter_text!r} ", style="cyan")
        if self.find_term:
            t.append(f" find {self.find_term!r} ", style="black on yellow")
        if extra:
            t.append(f" {extra}", style="dim")
        self.query_one("#log-status", Label).update(t)

    # ---- the input line (find / filter) -----------------------------------------------------------
    def open_input(self, mode: str) -> None:
        box = self.query_one("#log-input", Input)
        self.input_mode = mode
        box.placeholder = ("find (Enter: earlier match, Esc: close)" if mode == "find"
                           else "filter: show only lines containing… (Enter to keep, Esc to clear)")
        box.value = self.find_term if mode == "find" else self.filter_text
        box.display = True
        box.focus()

    def close_input(self) -> None:
        box = self.query_one("#log-input", Input)
        box.display = False
        self.input_mode = None
        self.log_widget.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if self.input_mode == "find":
            self.set_find(event.value)
        elif self.input_mode == "filter":
            self.set_filter(event.value)
        event.stop()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.input_mode == "find":
            self.find_next(backwards=True)
        else:
            self.close_input()

    def key_escape(self) -> None:
        if self.input_mode == "filter":
            self.set_filter("")
        elif self.input_mode == "find":
            self.set_find("")
        self.close_input()


def source_label(source: str) -> str:
    if source == "vllm":
        return "vLLM (head)"
    if source.startswith("ray:"):
        return f"Ray worker log @{source[4:]}"
    return source
