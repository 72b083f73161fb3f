"""The live log: Textual's ``Log`` fed in batches, with filters, find, progress collapsing and sources.

Why it is shaped like this (Textual issues 2187/2432): one message or one ``write`` per line freezes the UI
under a flood, so records are only *queued* here (``add_records``) and the app calls ``flush`` on a
10–20 Hz timer, which writes the whole batch with one ``write_lines``. Memory is bounded twice: each source's
ring of formatted lines (``buffer_lines``) and the ``Log``'s own ``max_lines``.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from rich.highlighter import Highlighter
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, Log

from sparktui.domain.logs import LogRecord, parse_line
from sparktui.ui.widgets.util import show

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_LEVEL_NO = {name: i for i, name in enumerate(LEVELS)}
#: Level filter steps the ``l`` key cycles through (index into LEVELS; 0 = everything).
LEVEL_STEPS = (0, 1, 2, 3)
#: Longer lines are cut before highlighting and search (toolong's limit; regex cost grows with length).
MAX_LINE_CHARS = 1000
HEAD = "head"


#: The level column, padded once per level instead of once per line.
_LEVEL_COLUMN = {name: f"{name[:7]:<7}" for name in (*LEVELS, "TRACE")}
_NO_TIME = " " * 8
_NO_LEVEL = " " * 7


def progress_key(message: str) -> str:
    """The bar a progress record belongs to: the text before its first ``:`` (tqdm's description)."""
    return message.split(":", 1)[0].strip()


def as_record(item: LogRecord | str) -> LogRecord:
    return parse_line(item) if isinstance(item, str) else item


def level_of(record: LogRecord) -> int:
    """Index into LEVELS; -1 when the line has none (continuations, tracebacks' inner lines, plain output)."""
    return _LEVEL_NO.get(record.level, -1) if record.level else -1


def node_of(record: LogRecord, aliases: Mapping[str, str] | None = None) -> str:
    if record.node is None:
        return HEAD
    return aliases.get(record.node, record.node) if aliases else record.node


def format_record(record: LogRecord, aliases: Mapping[str, str] | None = None) -> str:
    """One record as a screen line: fixed columns (time, level) so messages line up, then ``[node role]``.

    This runs for every line that reaches the screen — 100,000 a second in a flood — so it is plain string
    building on the record's slots, nothing more."""
    stamp = record.time
    level = record.level
    node = record.node
    if node is not None and aliases:
        node = aliases.get(node, node)   # Ray names a worker node by IP; show the node's name
    role = record.role
    column = _LEVEL_COLUMN.get(level, _NO_LEVEL) if level else _NO_LEVEL
    text = (stamp[-8:] if stamp else _NO_TIME) + " " + column
    if node and role:
        text += f" [{node} {role}] "
    elif node or role:
        text += f" [{node or role}] "
    else:
        text += " "
    text += record.message
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS]


def progress_key_of(record: LogRecord) -> str | None:
    if not record.is_progress:
        return None
    return record.progress.desc if record.progress is not None else progress_key(record.message)


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

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        """Widen the virtual size for new lines, here and now.

        ``Log`` does this in a thread worker, and Textual's ``@work`` builds the worker's description from the
        ``repr`` of its arguments — the whole batch: ~20 ms per 20,000-line flush in a flood, and cell widths
        computed under the GIL besides. Our lines are capped at ``MAX_LINE_CHARS``; their length in characters
        is the width that matters for horizontal scrolling (a wide character undercounts by one cell)."""
        if lines:
            self._update_maximum_width(updates, max(map(len, lines)))

    def set_term(self, term: str) -> None:
        assert isinstance(self.highlighter, LevelHighlighter)
        self.highlighter.term = term
        self.notify_style_update()   # drops the cached strips so the marks follow the term
        self.refresh()


class LogPane(Vertical):
    """The log column. The app owns the timer; this widget owns the buffers and the filters."""

    def __init__(self, buffer_lines: int, naive: bool = False, aliases: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: Node address → node name (Ray prints ``ip=``; the config knows which node that is).
        self.aliases = dict(aliases or {})
        self.buffer_lines = buffer_lines
        #: Write every line as it arrives (the slow way the benchmark compares against).
        self.naive = naive
        self.source = "vllm"
        self.buffers: dict[str, deque[LogRecord]] = {}
        self.progress: dict[str, tuple[str, LogRecord]] = {}   # source → (bar key, latest update)
        self._pending: list[LogRecord] = []
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
    def add_records(self, source: str, records: Iterable[LogRecord | str]) -> None:
        """Queue records for the next flush. Nothing is formatted here: most lines of a flood are pushed out
        of the buffer before anyone could see them, so formatting waits until a line goes to the screen."""
        ring = self.buffers.get(source)
        if ring is None:
            ring = self.buffers[source] = deque(maxlen=self.buffer_lines)
        shown = source == self.source
        filtered = self.filtering
        seen = self.nodes_seen
        pending = self._pending
        current = self.progress.get(source)
        batch: Sequence[LogRecord | str] = records if isinstance(records, list | tuple) else list(records)
        if current is None and not filtered and not self.naive and all(
            isinstance(r, LogRecord) and not r.is_progress for r in batch
        ):
            # The common case of a flood (no bar moving, no filter): whole-batch operations, no per-line work.
            plain = cast("Sequence[LogRecord]", batch)
            ring.extend(plain)
            if shown:
                pending.extend(plain)
            for new_node in {r.node for r in plain if r.node is not None} - set(seen):
                seen.append(new_node)
            return
        for item in batch:
            record = item if isinstance(item, LogRecord) else as_record(item)
            if record.is_progress:
                # A progress update replaces the previous one of the same bar; only the bar's last state
                # reaches the log, as one line, when something else is logged after it.
                key = progress_key_of(record)
                if current is not None and current[0] != key:
                    self._commit(ring, current[1], shown, filtered)
                current = (key or "", record)
                continue
            if current is not None:
                self._commit(ring, current[1], shown, filtered)
                current = None
            ring.append(record)
            if shown and (not filtered or self.passes(record)):
                if self.naive:
                    self.log_widget.write(format_record(record, self.aliases) + "\n")
                    self.lines_written += 1
                else:
                    pending.append(record)
            if record.node is not None and record.node not in seen:
                seen.append(record.node)
        if current is None:
            self.progress.pop(source, None)
        else:
            self.progress[source] = current

    def _commit(self, ring: deque[LogRecord], record: LogRecord, shown: bool, filtered: bool) -> None:
        ring.append(record)
        if shown and (not filtered or self.passes(record)):
            if self.naive:
                self.log_widget.write(format_record(record, self.aliases) + "\n")
                self.lines_written += 1
            else:
                self._pending.append(record)

    @property
    def filtering(self) -> bool:
        return bool(self.min_level or self.node_filter is not None or self.filter_text)

    def passes(self, record: LogRecord) -> bool:
        if self.min_level:
            level = level_of(record)
            # Lines without a level (continuations) stay with INFO, not with WARNING or ERROR.
            if (level == -1 and self.min_level > 1) or (level != -1 and level < self.min_level):
                return False
        if self.node_filter is not None and node_of(record, self.aliases) != self.node_filter:
            return False
        return not self.filter_text or self.filter_text in format_record(record, self.aliases).lower()

    def flush(self) -> int:
        """Write what arrived since the last flush in one batch; returns the number of lines written."""
        pending, self._pending = self._pending, []
        log = self.log_widget
        self._update_follow()
        if pending:
            # More lines than the log keeps: the older ones would be pruned at once, so skip them.
            if len(pending) > self.buffer_lines:
                pending = pending[-self.buffer_lines :]
            aliases = self.aliases
            log.write_lines([format_record(r, aliases) for r in pending], scroll_end=False)
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
        if label.display != (current is not None):
            label.display = current is not None
        if current is not None:
            show(label, Text("⟳ " + format_record(current[1], self.aliases).strip(), no_wrap=True,
                             overflow="ellipsis"),
                 layout=False)

    # ---- filters, sources, find -------------------------------------------------------------------
    def rebuild(self) -> None:
        """Show the current source's buffer again under the current filters (after any change)."""
        self._pending.clear()
        log = self.log_widget
        log.clear()
        lines = [format_record(r, self.aliases) for r in self.buffers.get(self.source, ()) if self.passes(r)]
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
        named = [self.aliases.get(n, n) for n in self.nodes_seen]
        options: list[str | None] = [None, *dict.fromkeys(named)]
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
        show(self.query_one("#log-status", Label), t, layout=False)

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
