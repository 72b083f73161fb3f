"""The byte-stream layer: raw bytes from ``tail -f`` / SSH in, complete records out.

Why not a line reader: tqdm's CUDA-graph bar writes every update as ``\\r<bar>`` and only ends the
physical line when capture is over, so ``readline`` sees nothing for the whole capture. Here ``\\r`` ends
a record too (``\\r\\n`` counts once, even split across two chunks), so each update arrives as it is
written. A line that never ends is cut at ``max_record_bytes`` and the rest of it dropped, which
bounds memory whatever the remote side sends. Invalid UTF-8 becomes U+FFFD.
"""

from __future__ import annotations

from sparktui.domain.logs.line import LogRecord, inherit_prefix, parse_line, split_glued

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
        if not data:
            return ""
        if self._swallow_lf:
            self._swallow_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        head = ""
        if self._discarding:
            cut = _first_boundary(data)
            if cut == -1:
                return ""
            self._discarding = False
            data = data[cut:]
        buf = self._buf
        buf += data
        last = max(buf.rfind(b"\n"), buf.rfind(b"\r"))
        if last == -1:
            if len(buf) > self.max_record_bytes:
                head = bytes(buf[: self.max_record_bytes]).decode("utf-8", "replace") + "\n"
                buf.clear()
                self._discarding = True
                self.truncated_records += 1
            return head
        block = bytes(buf[: last + 1])
        del buf[: last + 1]
        if block.endswith(b"\r"):
            self._swallow_lf = True
        if len(buf) > self.max_record_bytes:  # the unfinished tail is already too long
            head = bytes(buf[: self.max_record_bytes]).decode("utf-8", "replace") + "\n"
            buf.clear()
            self._discarding = True
            self.truncated_records += 1
        return block.decode("utf-8", "replace") + head

    def flush(self) -> list[str]:
        """End of stream: whatever is buffered is the last record."""
        tail = bytes(self._buf).decode("utf-8", "replace")
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

