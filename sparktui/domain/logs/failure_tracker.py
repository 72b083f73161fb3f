"""The failure tracker: what a start-up's error lines say went wrong, kept apart from the stage machine.

It holds the best failure found so far (kind, stage, message, rank), the traceback frames each process
(node, pid) has printed since its last ``Traceback``, a message's continuation lines ("Reasons:" ...), a
pydantic ValidationError's detail line, and the errors logged while serving (the cause of a later crash).
Which *stages* a failure marks, and taking a tentative one back, is the stage machine's part
(:class:`~.stages.Timeline`); the rules that classify a message are in :mod:`.failures`.
"""

from __future__ import annotations

from collections import deque

from sparktui.domain.logs import failures as fl

#: (kind, stage, message, rank): rank orders root-cause candidates (see :meth:`FailureTracker.rank`).
Found = tuple[str, str, str, int]
ProcessKey = tuple[str | None, int | None]

#: Lines of a traceback that are code, carets or chaining, never the exception itself.
TRACEBACK_NOISE = ("File ", "Traceback", "^", "raise ", "return ", "The above exception", "During handling")
_DETAIL_LINES = 12  # lines a "Reasons:" message may go on for


class FailureTracker:
    def __init__(self) -> None:
        self.found: Found | None = None
        #: The node of the process that logged ``found``: Ray's ``ip=`` (or the name a feed gave it), None
        #: for a line without a Ray node prefix (the head's own processes).
        self.node: str | None = None
        # A failure is only tentative while all it rests on is an unexplained exception line (no signature,
        # no "failed to start"-style marker): a library printing a caught exception's traceback.
        self.confirmed = False
        self.pydantic_open = False  # the failure is a pydantic ValidationError awaiting its detail line
        # Errors logged after ready: (records seen, text, kind, is a root-cause exception line, node).
        self._recent_errors: deque[tuple[int, str, str | None, bool, str | None]] = deque(maxlen=200)
        # Traceback frames (function names, outermost first) per (node, pid) since its last "Traceback".
        self._frames: dict[ProcessKey, list[str]] = {}
        # The failure message announced detail on the next lines ("Reasons:"): whose lines, how many left.
        self._detail_from: ProcessKey | None = None
        self._detail_left = 0

    @staticmethod
    def rank(kind: str | None, exc: bool, marker: bool) -> int:
        """A classified exception line (4) beats a classified summary line ("Triton compilation failed: x"
        < "OSError: [Errno 122] Disk quota exceeded", 3), which beats an unclassified exception (2), which
        beats a bare "EngineCore failed to start" (1); 0: no candidate."""
        if kind is not None:
            return 4 if exc else 3
        if marker:
            return 1
        return 2 if exc else 0

    def follow(self, key: ProcessKey, msg: str) -> bool:
        """Bookkeeping for one message of process ``key``: the failure's continuation lines, traceback frames,
        a traceback's start. True when the line was consumed (a detail line or a frame)."""
        if self._detail_from is not None:
            if self._detail_from == key and self._take_detail(msg):
                return True
            self._detail_from = None
        if msg[:1] in (" ", "\t") and 'File "' in msg:
            func = fl.frame_func(msg)
            if func is not None:
                self._frames.setdefault(key, []).append(func)  # the traceback's frames, outermost first
                return True
        if "Traceback (most recent call last)" in msg:
            self._frames[key] = []
        return False

    def framed_stage(self, key: ProcessKey) -> str | None:
        """The stage the frames of ``key``'s current traceback point at (the innermost vLLM method)."""
        return fl.frames_stage(self._frames.get(key, []))

    def set(self, found: Found, key: ProcessKey) -> None:
        """The failure is now ``found`` (logged by process ``key``)."""
        self.found = found
        self.node = key[0]
        self.pydantic_open = "validation error for" in found[2]
        if fl.announces_detail(found[2]):
            self._detail_from, self._detail_left = key, _DETAIL_LINES

    def clear(self) -> None:
        """A tentative failure taken back."""
        self.found = None
        self.node = None
        self.pydantic_open = False

    def _take_detail(self, msg: str) -> bool:
        """A line after a message that announced detail ("Reasons:"): appended to the failure's message
        while it reads as the message going on (not a traceback, not a new exception)."""
        text = msg.strip()
        if (self.found is None or not text or self._detail_left <= 0 or text.startswith(TRACEBACK_NOISE)
                or fl.is_exception_line(text) or fl.is_marker(text)):
            return False
        kind, stage, message, rank = self.found
        self.found = (kind, stage, f"{message}\n{text}", rank)
        self._detail_left -= 1
        return True

    def pydantic_detail(self, detail: str, running: str | None) -> tuple[str, str] | None:
        """The first detail line of a pydantic ValidationError carries the real message: the failure becomes
        "<exception line>: <detail>", of the kind the detail shows. Returns (new stage, old stage)."""
        self.pydantic_open = False
        if self.found is None:
            return None
        old_kind, old_stage, msg, rank = self.found
        text = detail.split(" [type=", 1)[0]
        for head in fl.PYDANTIC_DETAIL:
            text = text.removeprefix(head)
        running = running or old_stage
        kind = fl.classify(text, running) or old_kind
        stage = fl.failure_stage(kind, running, text) if kind != old_kind else old_stage
        self.found = (kind, stage, f"{msg}: {text}", rank)
        return stage, old_stage

    def note_serving_error(self, seen: int, msg: str, node: str | None = None) -> None:
        """An error line while serving (logged on ``node``): a candidate cause of a crash that may follow."""
        text = msg.strip()
        if not text.startswith(TRACEBACK_NOISE):
            self._recent_errors.append((seen, text, fl.classify(text),
                                        fl.is_exception_line(text) and not fl.is_wrapper(text), node))

    def fail_after_ready(self, msg: str, node: str | None = None) -> None:
        """The engine died while serving. The cause is the best error logged before the fatal line (a
        classified exception, then any classified line, then an exception line); later lines (the
        traceback the EngineCore prints after "encountered a fatal error") may still replace it."""
        msg = msg.strip()
        kind, message, rank = fl.classify(msg) or "worker_died", msg, 1
        best = 0
        for _, text, k, exc, where in self._recent_errors:
            score = (4 if exc else 3) if k is not None else (2 if exc else 0)
            if score > best:
                best, kind, message, rank, node = score, k or "unknown", text, score, where
        self.found = (kind, "serving", message, rank)  # after ready: not a start-up stage
        self.node = node
        self.confirmed = True
        self._frames.clear()
