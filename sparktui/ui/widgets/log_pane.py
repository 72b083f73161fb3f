"""The live log: Textual's ``Log`` fed in batches, with filters, find, progress collapsing and sources.

Why it is shaped like this (Textual issues 2187/2432): one message or one ``write`` per line freezes the UI
under a flood, so records are only *queued* here (``add_records``) and the app calls ``flush`` on a
10–20 Hz timer, which writes the whole batch with one ``write_lines``. Memory is bounded twice: each source's
ring of formatted lines (``buffer_lines``) and the ``Log``'s own ``max_lines``.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from rich.highlighter import Highlighter
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input, Label

from sparktui.domain.logs import LogRecord, is_probe_request, parse_line
from sparktui.ui.textual_compat import InlineWidthLog, update_scrollbars, widen_log
from sparktui.ui.widgets.util import show

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_LEVEL_NO = {name: i for i, name in enumerate(LEVELS)}
#: Level filter steps the ``l`` key cycles through (index into LEVELS; 0 = everything).
LEVEL_STEPS = (0, 1, 2, 3)
#: Longer lines are cut before highlighting and search (toolong's limit; regex cost grows with length).
MAX_LINE_CHARS = 1000
HEAD = "head"
#: Folded continuation lines start under the message, past the time and level columns.
FOLD_INDENT = 17


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
    """The node that printed a record, by name: the head's own lines carry none (``HEAD``), a worker's carry
    the address Ray prints; ``aliases`` names both as the panels do."""
    node = HEAD if record.node is None else record.node
    return aliases.get(node, node) if aliases else node


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


class LiveLog(InlineWidthLog):
    """``Log`` with our highlighter, the current find match marked, and scroll keys that tell the pane.

    Textual's own scroll bindings (Home/End/PageUp…, active while the log has focus) animate, so the pane's
    follow check could catch the log mid-scroll and leave it paused; here they go through the pane, which
    scrolls at once and decides follow from where the scroll ended."""

    #: The style of the line holding the current find match (the other matches only mark the term).
    CURRENT_MATCH_STYLE = Style(bgcolor="grey30", bold=True)

    def __init__(self, max_lines: int, **kwargs: Any) -> None:
        # auto_scroll off: LogPane decides when to follow (see LogPane.flush).
        super().__init__(max_lines=max_lines, highlight=True, auto_scroll=False, **kwargs)
        self.highlighter = LevelHighlighter()
        #: Index into ``lines`` of the current find match, or None.
        self.current_line: int | None = None

    # Textual's ``virtual_size`` asks for a layout of the whole screen when it changes, and ``Log`` changes
    # it on every write that adds a line: at ready (a metrics line, an access-log line per request) that
    # reflow and repaint of every panel was most of an idle dashboard's CPU. The log's own box never depends
    # on how many lines it holds, so here a new virtual size updates the scrollbars and repaints the log
    # only; a scrollbar that appears or goes still asks for its layout itself.
    @property
    def virtual_size(self) -> Size:
        return Widget.virtual_size.__get__(self, type(self))

    @virtual_size.setter
    def virtual_size(self, size: Size) -> None:
        if size == self.virtual_size:
            return
        self.set_reactive(Widget.virtual_size, size)
        if self.is_scrollable and self.container_size:
            update_scrollbars(self, size)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        if self.current_line is not None and self.scroll_offset.y + y == self.current_line:
            # Over the line's own styles (the level colours, the log's background), not under them.
            strip = Strip(Segment.apply_style(strip, post_style=self.CURRENT_MATCH_STYLE), strip.cell_length)
        return strip

    def _pane(self) -> LogPane | None:
        parent = self.parent
        return parent if isinstance(parent, LogPane) else None

    def action_scroll_end(self) -> None:
        pane = self._pane()
        if pane is None:
            super().action_scroll_end()
        else:
            pane.scroll_to_end()
            pane.update_status()

    def action_scroll_home(self) -> None:
        pane = self._pane()
        pane.go_top() if pane is not None else super().action_scroll_home()

    def action_page_up(self) -> None:
        pane = self._pane()
        pane.move_pages(-1) if pane is not None else super().action_page_up()

    def action_page_down(self) -> None:
        pane = self._pane()
        pane.move_pages(1) if pane is not None else super().action_page_down()

    def action_scroll_up(self) -> None:
        pane = self._pane()
        pane.move_lines(-1) if pane is not None else super().action_scroll_up()

    def action_scroll_down(self) -> None:
        pane = self._pane()
        pane.move_lines(1) if pane is not None else super().action_scroll_down()

    def lines_written(self, updates: int, lines: list[str]) -> None:
        """Widen the virtual size for new lines, here and now (``InlineWidthLog``: not in Textual's thread
        worker, whose description alone cost ~20 ms per 20,000-line flush in a flood, with cell widths
        computed under the GIL besides). Our lines are capped at ``MAX_LINE_CHARS``; their length in
        characters is the width that matters for horizontal scrolling (a wide character undercounts by one
        cell)."""
        if lines:
            widen_log(self, updates, max(map(len, lines)))

    def set_term(self, term: str) -> None:
        assert isinstance(self.highlighter, LevelHighlighter)
        self.highlighter.term = term
        self.notify_style_update()   # drops the cached strips so the marks follow the term
        self.refresh()


class LogFilters(Vertical):
    """Part of ``LogPane``: which of the buffered lines are shown (level, node, text, monitoring probes), and
    the view as text under those filters."""

    # LogPane's:
    aliases: dict[str, str]
    buffers: dict[str, deque[LogRecord]]
    nodes_seen: list[str]
    if TYPE_CHECKING:
        def rebuild(self) -> None: ...

        @property
        def source(self) -> str: ...

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.filter_text = ""
        self.min_level = 0
        self.node_filter: str | None = None
        #: Monitoring probes' access-log lines (``GET /health`` 200, ``GET /metrics`` 200: the dashboard's own
        #: polls, every two seconds after ready) are hidden unless asked for (``h``); how many were hidden
        #: from the log as shown (the status line says that some were).
        self.show_probes = False
        self.probes_hidden = 0

    @property
    def filtering(self) -> bool:
        return bool(self.min_level or self.node_filter is not None or self.filter_text)

    def _hides(self, record: LogRecord) -> bool:
        """A probe's line while probes are hidden."""
        return not self.show_probes and is_probe_request(record.message)

    def _not_a_hidden_probe(self, record: LogRecord) -> bool:
        """``not _hides(record)``, a hidden one counted."""
        if self._hides(record):
            self.probes_hidden += 1
            return False
        return True

    def passes(self, record: LogRecord) -> bool:
        """Whether a record is shown under the filters (level, node, text); probes are judged apart."""
        if self.min_level:
            level = level_of(record)
            # Lines without a level (continuations) stay with INFO, not with WARNING or ERROR.
            if (level == -1 and self.min_level > 1) or (level != -1 and level < self.min_level):
                return False
        if self.node_filter is not None and node_of(record, self.aliases) != self.node_filter:
            return False
        return not self.filter_text or self.filter_text in format_record(record, self.aliases).lower()

    def probes_in_buffer(self) -> int:
        return sum(1 for r in self.buffers.get(self.source, ()) if is_probe_request(r.message))

    def toggle_probes(self) -> bool:
        self.show_probes = not self.show_probes
        self.rebuild()
        return self.show_probes

    def view_text(self) -> str:
        """The current source's buffer as shown (filters applied, not folded), one record per line."""
        aliases = self.aliases
        return "".join(format_record(r, aliases) + "\n" for r in self.buffers.get(self.source, ())
                       if not self._hides(r) and self.passes(r))

    def filter_summary(self) -> str:
        parts = []
        if self.min_level:
            parts.append(f"level ≥ {LEVELS[self.min_level]}")
        if self.node_filter is not None:
            parts.append(f"node {self.node_filter}")
        if self.filter_text:
            parts.append(f"filter {self.filter_text!r}")
        return ", ".join(parts) or "no filter"

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


class LogFind(Vertical):
    """Part of ``LogPane``: the find term, its matches and the current one, and the input line that takes a
    find term or a filter."""

    # LogPane's (and LogFilters'):
    follow: bool
    filter_text: str
    if TYPE_CHECKING:
        def update_status(self, extra: str = "") -> None: ...
        def set_filter(self, text: str) -> None: ...

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.find_term = ""
        #: Line indices (into the log's lines) that hold the find term; None = not counted since a change.
        self._matches: list[int] | None = None
        #: Position in ``_matches`` of the current match (the one marked and counted as [k/N]).
        self._match_at: int | None = None
        self._counted_at = 0.0
        self._count_text = ""
        #: What the last find step has to say ("wrapped to the top", "no match …"), until the next one.
        self._find_note = ""
        self.input_mode: str | None = None   # "find" | "filter" while the input is open

    @property
    def log_widget(self) -> LiveLog:
        return self.query_one("#log", LiveLog)

    def current_text(self) -> str | None:
        """The current find match's line, else the last line in view; None when the log is empty."""
        log = self.log_widget
        lines = log.lines
        if not lines:
            return None
        y = log.current_line
        if y is None or y >= len(lines):
            y = min(len(lines), int(log.scroll_y) + log.scrollable_content_region.height) - 1
        return lines[max(0, y)].rstrip()

    def set_find(self, term: str) -> None:
        self.find_term = term
        self._matches = None
        self._match_at = None
        log = self.log_widget
        log.current_line = None
        log.set_term(term)
        self._find_note = ""
        self._counted_at = 0.0
        self.update_status()

    def matches(self) -> list[int]:
        """Lines holding the find term, counted again only after the log or the term changed."""
        if self._matches is None:
            term = self.find_term.lower()
            lines: Sequence[str] = self.log_widget.lines
            self._matches = [y for y, line in enumerate(lines) if term in line.lower()] if term else []
            current = self.log_widget.current_line
            self._match_at = self._matches.index(current) if current in self._matches else None
        return self._matches

    def _match_count(self) -> str:
        """``[k/N]`` (or ``[N matches]`` before a jump). While lines stream in, recounted at most once a
        second: a count over the whole buffer on every 20 Hz flush would be most of a flood's UI cost."""
        now = time.monotonic()
        if self._matches is not None or now - self._counted_at >= 1.0:
            self._counted_at = now
            found = self.matches()
            self._count_text = (f"[{self._match_at + 1}/{len(found)}]" if self._match_at is not None
                                else f"[{len(found)} match{'es' if len(found) != 1 else ''}]")
        return self._count_text

    def find_first(self) -> bool:
        """The match to start from when a search is entered: the newest one above the bottom of the view
        (so from a following log, the latest match), else the first one."""
        found = self.matches()
        if not found:
            return self._no_match()
        log = self.log_widget
        bottom = int(log.scroll_y) + log.scrollable_content_region.height - 1
        above = [i for i, y in enumerate(found) if y <= bottom]
        return self._go_to_match(above[-1] if above else 0)

    def find_next(self, forward: bool = True) -> bool:
        """``n``: the next (later) match; ``N``: the previous (earlier) one; wraps round at either end, as
        less does with its wrap-search option, and says so."""
        found = self.matches()
        if not found:
            return self._no_match()
        if self._match_at is None:
            return self.find_first()
        at = self._match_at + (1 if forward else -1)
        wrapped = at >= len(found) or at < 0
        return self._go_to_match(at % len(found), "wrapped to the " + ("top" if forward else "end")
                                 if wrapped else "")

    def _go_to_match(self, index: int, note: str = "") -> bool:
        found = self.matches()
        self._match_at = index
        y = found[index]
        log = self.log_widget
        log.current_line = y
        log.notify_style_update()
        # Centre the match; looking at a match pauses follow until End.
        self.follow = False
        log.scroll_to(y=max(0, y - log.scrollable_content_region.height // 2), animate=False, immediate=True)
        log.refresh()
        self._counted_at = 0.0
        self._find_note = note
        self.update_status()
        return True

    def _no_match(self) -> bool:
        self._find_note = f"no match for {self.find_term!r}" if self.find_term else ""
        self.update_status()
        return False

    # ---- the input line (find / filter) -----------------------------------------------------------
    def open_input(self, mode: str) -> None:
        box = self.query_one("#log-input", Input)
        self.input_mode = mode
        box.placeholder = ("find (Enter: go to it; then n next, N previous; Esc: clear)" if mode == "find"
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
        # The box closes either way, so n/N (and every other key) work at once on the log.
        find = self.input_mode == "find"
        self.close_input()
        if find:
            self.find_first()

    def key_escape(self) -> None:
        if self.input_mode == "filter":
            self.set_filter("")
        elif self.input_mode == "find" or self.find_term:
            self.set_find("")
        if self.input_mode is not None:
            self.close_input()


class LogPane(LogFind, LogFilters):
    """The log column. The app owns the timer; this widget owns the buffers, the filters (``LogFilters``)
    and the find (``LogFind``)."""

    def __init__(self, buffer_lines: int, aliases: Mapping[str, str] | None = None,
                 source: Callable[[], str] = lambda: "vllm", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: Node address → node name (Ray prints ``ip=``; the config knows which node that is), and ``HEAD``
        #: → the head node's name (its own lines name no node).
        self.aliases = dict(aliases or {})
        self.buffer_lines = buffer_lines
        #: The log source shown, as its owner says it now (the dashboard's: the backend's ``log_source``).
        self.source_of = source
        self.buffers: dict[str, deque[LogRecord]] = {}
        self.progress: dict[str, tuple[str, LogRecord]] = {}   # source → (bar key, latest update)
        self._pending: list[LogRecord] = []
        #: Long lines folded at the log's width instead of cut (``W``); toggled, rebuilt on resize.
        self.wrap = False
        self._wrap_width = 0
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
        yield Label("", id="log-empty")
        yield Input(id="log-input", compact=True)

    def on_mount(self) -> None:
        self.query_one("#log-input", Input).display = False
        self.query_one("#log-progress", Label).display = False
        self.query_one("#log-empty", Label).display = False
        self.update_status()

    def on_resize(self) -> None:
        if self.wrap and self._content_width() != self._wrap_width:
            self.rebuild()

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
        if current is None and not filtered and all(
            isinstance(r, LogRecord) and not r.is_progress for r in batch
        ):
            # The common case of a flood (no bar moving, no filter): whole-batch operations, no per-line work.
            plain = cast("Sequence[LogRecord]", batch)
            ring.extend(plain)
            if shown:
                if self.show_probes:
                    pending.extend(plain)
                else:
                    kept = [r for r in plain if not is_probe_request(r.message)]
                    self.probes_hidden += len(plain) - len(kept)
                    pending.extend(kept)
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
            if shown and self._not_a_hidden_probe(record) and (not filtered or self.passes(record)):
                pending.append(record)
            if record.node is not None and record.node not in seen:
                seen.append(record.node)
        if current is None:
            self.progress.pop(source, None)
        else:
            self.progress[source] = current

    def _commit(self, ring: deque[LogRecord], record: LogRecord, shown: bool, filtered: bool) -> None:
        ring.append(record)
        if shown and self._not_a_hidden_probe(record) and (not filtered or self.passes(record)):
            self._pending.append(record)

    def flush(self) -> int:
        """Write what arrived since the last flush in one batch; returns the number of lines written."""
        pending, self._pending = self._pending, []
        log = self.log_widget
        self._update_follow()
        if pending:
            # More lines than the log keeps: the older ones would be pruned at once, so skip them.
            if len(pending) > self.buffer_lines:
                pending = pending[-self.buffer_lines :]
            before = log.line_count
            log.write_lines(self._screen_lines(pending), scroll_end=False)
            self.lines_written += len(pending)
            self.flushes += 1
            self._lines_moved(before + len(pending) - log.line_count)
        # Also when nothing new came: the end moves when a horizontal scrollbar appears after a long line.
        if self.follow and not log.is_vertical_scroll_end:
            self.scroll_to_end()
        self._show_progress()
        self._show_empty()
        self.update_status()
        return len(pending)

    def _screen_lines(self, records: Iterable[LogRecord]) -> list[str]:
        """Records as the log's lines: one each, or folded at the log's width when wrapping."""
        aliases = self.aliases
        lines = [format_record(r, aliases) for r in records]
        if not self.wrap:
            return lines
        width = self._wrap_width = self._content_width()
        return [part for line in lines for part in fold(line, width)]

    def _content_width(self) -> int:
        return max(20, self.log_widget.scrollable_content_region.width)

    def _lines_moved(self, pruned: int) -> None:
        """After a write: the counted matches are stale; the marked one moved up by what the log pruned."""
        self._matches = None
        log = self.log_widget
        if log.current_line is not None and pruned > 0:
            log.current_line = log.current_line - pruned if log.current_line >= pruned else None

    def _show_empty(self) -> None:
        """A filter that hides every line says so, instead of leaving a blank pane."""
        label = self.query_one("#log-empty", Label)
        empty = (self.filtering and self.log_widget.line_count == 0
                 and bool(self.buffers.get(self.source)))
        if label.display != empty:
            label.display = empty
        if empty:
            show(label, Text(f"no matching lines ({self.filter_summary()}) — f, l, o change the filter",
                             style="bold yellow", no_wrap=True, overflow="ellipsis"), layout=False)

    def check_follow(self) -> None:
        """The follow state and status line after scrolling, without a flush (the app's 1 s tick)."""
        was = self.follow
        self._update_follow()
        if self.follow != was:
            self.update_status()

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

    # ---- moving around (less/vim keys; the app binds them, the log's own keys come here too) ---------------
    def move_lines(self, lines: int) -> None:
        self._jump_to(self.log_widget.scroll_y + lines)

    def move_pages(self, pages: int) -> None:
        log = self.log_widget
        self._jump_to(log.scroll_y + pages * max(1, log.scrollable_content_region.height))

    def go_top(self) -> None:
        self._jump_to(0)

    def _jump_to(self, y: float) -> None:
        """Scroll at once (no animation to race the follow check) and follow only if that reached the end."""
        log = self.log_widget
        target = max(0.0, min(y, log.max_scroll_y))
        if target >= log.max_scroll_y:
            self.scroll_to_end()
        else:
            log.scroll_to(y=target, animate=False, immediate=True)
            self.follow = False
        self.update_status()

    def _show_progress(self) -> None:
        label = self.query_one("#log-progress", Label)
        current = self.progress.get(self.source)
        if label.display != (current is not None):
            label.display = current is not None
        if current is not None:
            show(label, Text("⟳ " + format_record(current[1], self.aliases).strip(), no_wrap=True,
                             overflow="ellipsis"),
                 layout=False)

    # ---- the view again: after a filter, a source or the wrap changed ------------------------------
    def rebuild(self) -> None:
        """Show the current source's buffer again under the current filters (after any change)."""
        self._pending.clear()
        log = self.log_widget
        log.clear()
        self.probes_hidden = 0
        kept = [r for r in self.buffers.get(self.source, ())
                if self._not_a_hidden_probe(r) and self.passes(r)]
        log.write_lines(self._screen_lines(kept)[-self.buffer_lines :], scroll_end=False)
        log.current_line = None
        self._matches = None
        self._match_at = None
        self.scroll_to_end()
        self._show_progress()
        self._show_empty()
        self.update_status()

    def toggle_wrap(self) -> bool:
        self.wrap = not self.wrap
        self.rebuild()
        return self.wrap

    @property
    def source(self) -> str:
        """The log shown: ``vllm`` or ``ray:<node>`` (read from ``source_of``, never kept here)."""
        return self.source_of()

    def show_source(self) -> None:
        """The source changed (``source_of`` says which): show its buffer."""
        self.rebuild()

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
        if self.wrap:
            t.append(" wrap ", style="cyan")
        if self.probes_hidden and not self.show_probes:
            # (No running count: it would repaint the line at every poll; ``h`` says how many.)
            t.append(" probes hidden (h) ", style="dim")
        if self.find_term:
            t.append(f" find {self.find_term!r} ", style="black on yellow")
            t.append(f" {self._match_count()} ", style="bold")
            if self._find_note:
                t.append(f" {self._find_note} ", style="yellow")
        if extra:
            t.append(f" {extra}", style="dim")
        show(self.query_one("#log-status", Label), t, layout=False)


def fold(line: str, width: int) -> list[str]:
    """A screen line folded at ``width`` characters; continuations indented under the message column."""
    if len(line) <= width:
        return [line]
    indent = " " * min(FOLD_INDENT, width // 2)
    parts = [line[:width]]
    rest = line[width:]
    step = width - len(indent)
    parts += [indent + rest[i : i + step] for i in range(0, len(rest), step)]
    return parts


def source_label(source: str) -> str:
    if source == "vllm":
        return "vLLM (head)"
    if source.startswith("ray:"):
        return f"Ray worker log @{source[4:]}"
    return source
