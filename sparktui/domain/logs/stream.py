"""The byte-stream layer: raw bytes from ``tail -f`` / SSH in, complete records out.

Why not a line reader: tqdm's CUDA-graph bar writes every update as ``\\r<bar>`` and only ends the
physical line when capture is over, so ``readline`` sees nothing for the whole capture. Here ``\\r`` ends
a record too (``\\r\\n`` counts once, even split across two chunks), so each update arrives as it is
written. A line that never ends is cut at ``max_record_bytes`` and the rest of it dropped, which
bounds memory whatever the remote side sends. Invalid UTF-8 becomes U+FFFD. A log whose newlines were lost
(a paste) is cut back into its records at vLLM's record starts (:mod:`.runon`): an over-long line at its
last record start rather than at the cap.

On top, ``LogIngest``: a followed log's bytes → the init-stage timeline (every line) and records to show
(bounded). A live log can flood (an NCCL INFO storm, a client hammering the API with access-log lines).
Every line must reach the stage machine — its bulk path skips lines that cannot matter at millions of
lines per second — but the screen keeps only the last few thousand, and turning a line into a
``LogRecord`` costs ~10 µs. So lines for display go through a token bucket: a burst of up to
``display_cap`` lines at once (re-attaching shows the log so far), then at most ``display_rate`` lines a
second; the newest are kept, the rest are counted and said to be skipped in one notice record.
``sparktui logs`` still prints every line.
"""

from __future__ import annotations

from collections import deque

from sparktui.domain.logs.line import LogRecord, inherit_prefix, parse_line, split_glued
from sparktui.domain.logs.runon import last_record_start, restore_newlines
from sparktui.domain.logs.stages import Timeline

DEFAULT_MAX_RECORD_BYTES = 64 * 1024


class LineSplitter:
    """Incremental splitter. ``feed(bytes) -> list[str]`` returns the records completed so far."""

    def __init__(self, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self.max_record_bytes = max(16, max_record_bytes)
        self._buf = bytearray()
        self._swallow_lf = False  # last chunk ended in \r: a leading \n belongs to it
        self._discarding = False  # inside an over-long record: drop until the next boundary
        self.truncated_records = 0

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[str]:
        text = self.feed_block(data)
        return _records(text) if text else []

    def feed_block(self, data: bytes) -> str:
        """Like :meth:`feed`, but return the completed text as one string (bulk readers split it
        themselves; this saves building a list of a million strings)."""
        return self.feed_raw(data).decode("utf-8", "replace")

    def feed_raw(self, data: bytes) -> bytes:
        """Like :meth:`feed_block`, but the completed lines as bytes, undecoded (the bulk scan reads the
        bytes and decodes only the lines it keeps: :meth:`.Timeline.feed_bytes`)."""
        if not data:
            return b""
        if self._swallow_lf:
            self._swallow_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        head = b""
        if self._discarding:
            cut = _first_boundary(data)
            if cut == -1:
                return b""
            self._discarding = False
            data = data[cut:]
        buf = self._buf
        buf += data
        last = max(buf.rfind(b"\n"), buf.rfind(b"\r"))
        if last == -1:
            return self._overflow() if len(buf) > self.max_record_bytes else b""
        block = restore_newlines(bytes(buf[: last + 1]))
        del buf[: last + 1]
        if block.endswith(b"\r"):
            self._swallow_lf = True
        if len(buf) > self.max_record_bytes:  # the unfinished tail is already too long
            head = self._overflow()
        return block + head

    def _overflow(self) -> bytes:
        """The buffer holds more than a record may without a line end: records that ran on (a log that lost
        its newlines) are given up to the last record start, the rest waits for its end; one record that
        long is cut at the cap and the rest of it dropped."""
        buf = self._buf
        cut = last_record_start(bytes(buf))
        if cut > 0:
            head = restore_newlines(bytes(buf[:cut]).rstrip(b" ")) + b"\n"
            del buf[:cut]
            if len(buf) <= self.max_record_bytes:
                return head
        else:
            head = b""
        head += bytes(buf[: self.max_record_bytes]) + b"\n"
        buf.clear()
        self._discarding = True
        self.truncated_records += 1
        return head

    def flush(self) -> list[str]:
        """End of stream: whatever is buffered is the last record."""
        tail = restore_newlines(bytes(self._buf)).decode("utf-8", "replace")
        self._buf.clear()
        self._discarding = False
        self._swallow_lf = False
        return _records(tail) if tail else []


def _first_boundary(data: bytes) -> int:
    """Index just past the first line boundary in ``data``, or -1."""
    positions = [p for p in (data.find(b"\n"), data.find(b"\r")) if p != -1]
    return min(positions) + 1 if positions else -1


def _records(text: str) -> list[str]:
    # str.split in C beats a regex split by a wide margin; \r\n and lone \r become \n first.
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    parts = text.split("\n")
    out: list[str] = []
    for part in parts:
        if not part:
            continue
        if "/s]" in part or "/it]" in part or part.count("pid=") > 1:
            out.extend(split_glued(part))
        else:
            out.append(part)
    return out


class LogReader:
    """Splitter + line layer: ``feed(bytes) -> list[LogRecord]``.

    Ray relays a worker's bar as ``<prefix> \\r<bar>``; after splitting on ``\\r`` the bar has lost its
    prefix, so a bar right after a prefix-only record inherits that record's role, node and pid.
    """

    def __init__(self, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self.splitter = LineSplitter(max_record_bytes)
        self._pending: LogRecord | None = None

    def feed(self, data: bytes) -> list[LogRecord]:
        return self._parse_all(self.splitter.feed(data))

    def flush(self) -> list[LogRecord]:
        return self._parse_all(self.splitter.flush())

    def parse_texts(self, texts: list[str]) -> list[LogRecord]:
        """Records from texts already split (e.g. by a ``LineSplitter`` elsewhere), prefixes carried over."""
        return self._parse_all(texts)

    def _parse_all(self, texts: list[str]) -> list[LogRecord]:
        out: list[LogRecord] = []
        for text in texts:
            rec = parse_line(text)
            if rec.is_prefix_only:
                self._pending = rec
                continue
            pending, self._pending = self._pending, None
            if pending is not None and not rec.has_prefix:
                rec = inherit_prefix(rec, pending)
            out.append(rec)
        return out


#: The burst (lines shown at once, e.g. on re-attach) and the sustained rate of lines parsed for display.
DEFAULT_DISPLAY_CAP = 20_000
DEFAULT_DISPLAY_RATE = 20_000.0


class LogIngest:
    """A followed log: ``feed(bytes)`` sends every line to ``timeline`` and queues it for display;
    ``take_records(now)`` gives what to show, bounded by the token bucket."""

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
