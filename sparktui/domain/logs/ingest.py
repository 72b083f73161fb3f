"""A followed log's bytes → the init-stage timeline (every line) and records to show (bounded).

A live log can flood (an NCCL INFO storm, a client hammering the API with access-log lines). Every line must
reach the stage machine — its bulk path skips lines that cannot matter at millions of lines per second — but
the screen keeps only the last few thousand, and turning a line into a ``LogRecord`` costs ~10 µs. So lines
for display go through a token bucket: a burst of up to ``display_cap`` lines at once (re-attaching shows
the log so far), then at most ``display_rate`` lines a second; the newest are kept, the rest are counted and
said to be skipped in one notice record. ``sparktui logs`` still prints every line.
"""

from __future__ import annotations

from collections import deque

from sparktui.domain.logs.line import LogRecord, parse_line
from sparktui.domain.logs.stages import Timeline
from sparktui.domain.logs.stream import LineSplitter, LogReader

#: The burst (lines shown at once, e.g. on re-attach) and the sustained rate of lines parsed for display.
DEFAULT_DISPLAY_CAP = 20_000
DEFAULT_DISPLAY_RATE = 20_000.0


class LogIngest:
    def __init__(
        self,
        expected_nodes: int | None = None,
        display_cap: int = DEFAULT_DISPLAY_CAP,
        display_rate: float = DEFAULT_DISPLAY_RATE,
    ) -> None:
        self.expected_nodes = expected_nodes
        self.display_cap = display_cap
        self.display_rate = display_rate
        self._display: deque[str] = deque(maxlen=display_cap)
        self._tokens = float(display_cap)
        self._refilled_at: float | None = None
        self.reset()

    def reset(self) -> None:
        """A new file (the next engine run): a fresh timeline; what was waiting for display is dropped."""
        self.timeline = Timeline(expected_nodes=self.expected_nodes)
        self.lines_seen = 0
        self._splitter = LineSplitter()
        self._reader = LogReader()
        self._display.clear()
        self._skipped = 0

    def feed(self, data: bytes, now: float | None = None) -> int:
        """Take bytes as they arrive; returns how many complete lines they finished."""
        lines = self._splitter.feed(data)
        if lines:
            self.lines_seen += len(lines)
            self.timeline.feed_lines(lines, now)
            overflow = len(self._display) + len(lines) - self.display_cap
            if overflow > 0:
                self._skipped += overflow
            self._display.extend(lines)
        return len(lines)

    def take_records(self, now: float) -> list[LogRecord]:
        """The records to show since the last call (``now``: a monotonic clock), after a notice of any
        lines skipped because they came faster than the display rate."""
        if self._refilled_at is not None:
            self._tokens = min(float(self.display_cap),
                               self._tokens + (now - self._refilled_at) * self.display_rate)
        self._refilled_at = now
        if not self._display:
            return []
        take = min(len(self._display), int(self._tokens))
        texts = list(self._display)[len(self._display) - take:]
        self._skipped += len(self._display) - take
        self._display.clear()
        self._tokens -= take
        records: list[LogRecord] = []
        if self._skipped and take:
            records.append(parse_line(
                f"[sparktui] {self._skipped:,} log lines not shown here (they came faster than "
                f"{self.display_rate:,.0f} lines/s); every line reached the stage timeline, and "
                "`sparktui logs` prints them all"))
            self._skipped = 0
        records.extend(self._reader.parse_texts(texts))
        return records
