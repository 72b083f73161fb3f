"""vLLM log intelligence: version-tolerant line parser, init-stage timeline, failure diagnosis.

Pure code (standard library only): no Textual, no asyncssh. Proven on real logs (tests/data/vllm-logs).

Public API
----------
Line layer (:mod:`.line`)
    ``LogRecord`` — frozen: ``raw`` (ANSI stripped), ``message``, ``level``, ``time`` (``MM-DD hh:mm:ss``
    as logged, or None), ``seconds`` (same, as seconds into an unknown year), ``role`` (innermost process
    name: ``EngineCore_DP0``, ``RayWorkerWrapper``, ``Worker_TP0``, ``APIServer``), ``node`` (Ray
    ``ip=``; None = head node), ``pid``, ``repeat`` (Ray ``[repeated Nx across cluster]``), ``is_progress``
    and ``progress`` (a tqdm update: desc, done, total), ``source_file`` (``core.py:101``), ``has_prefix``.
    ``parse_line(text) -> LogRecord`` never raises. ``parse_physical_line(text) -> list[LogRecord]``
    splits a line with a log line glued after a progress bar. ``strip_ansi(text)``.
Stream layer (:mod:`.stream`)
    ``LineSplitter(max_record_bytes=65536)``: ``feed(bytes) -> list[str]`` complete records (``\\n``,
    ``\\r\\n`` and ``\\r`` end a record, so CUDA-graph capture animates live; a line without end is cut at
    the cap, the rest dropped; invalid UTF-8 replaced), ``feed_block(bytes) -> str`` (same, one string),
    ``feed_raw(bytes) -> bytes`` (same, undecoded: for ``Timeline.feed_bytes``), ``flush()``.
    ``LogReader``: ``feed(bytes) -> list[LogRecord]`` (splitter + line layer; a bar relayed by Ray as
    ``<prefix>\\n<bar>`` keeps its prefix). ``LogIngest``: a followed log, ``feed(bytes, now)`` (every line
    into its ``timeline``) and ``take_records(now)`` (what to show, rate-bounded).
Stage machine (:mod:`.stages`)
    ``Timeline(expected_nodes=None)``: ``feed(record, now=None)``, ``feed_bytes(data, now=None)``,
    ``feed_text(text, now=None)`` and ``feed_lines(lines, now=None)`` (bulk, fast path: the scan reads
    bytes), ``snapshot(now=None) -> TimelineSnapshot``,
    ``to_json()``, ``stall_seconds(now=None)`` (seconds since the running stage last moved),
    ``waiting_for()``. ``now`` is the wall clock (``time.time()``).
    ``TimelineSnapshot``: ``outcome`` (``ready|failed|incomplete``), ``vllm_version``, ``model``,
    ``stages`` (``StageSnapshot``: name, status, started, ended, seconds, progress ``StageProgress``),
    ``facts`` (read-only mapping), ``failure`` (``Failure``: kind, stage, message, hint, node) or None,
    ``nodes`` ("head" and Ray IPs), ``current`` (running stage, the next one between stages, or the
    failed one), ``last_progress_at``; ``stage(name)``, ``stall_seconds(now)``, ``to_json()``.
    ``STAGES``, ``STATUSES``, ``OUTCOMES``, ``FAILURE_KINDS``.
Whole logs (:mod:`.timeline`)
    ``timeline_from_bytes(data, expected_nodes=None)``, ``parse_log_text(text)``, ``render_human(snapshot)``.
"""

from sparktui.domain.logs.access import is_probe_request
from sparktui.domain.logs.failures import FAILURE_KINDS
from sparktui.domain.logs.line import LogRecord, Progress, parse_line, parse_physical_line, strip_ansi
from sparktui.domain.logs.rules import STAGE_LABELS, STAGES
from sparktui.domain.logs.stages import (
    OUTCOMES,
    STATUSES,
    Failure,
    StageProgress,
    StageSnapshot,
    Timeline,
    TimelineSnapshot,
)
from sparktui.domain.logs.stream import LineSplitter, LogIngest, LogReader
from sparktui.domain.logs.timeline import parse_log_text, render_human, timeline_from_bytes

__all__ = [
    "FAILURE_KINDS",
    "OUTCOMES",
    "STAGES",
    "STAGE_LABELS",
    "STATUSES",
    "Failure",
    "LineSplitter",
    "LogIngest",
    "LogReader",
    "LogRecord",
    "Progress",
    "StageProgress",
    "StageSnapshot",
    "Timeline",
    "TimelineSnapshot",
    "is_probe_request",
    "parse_line",
    "parse_log_text",
    "parse_physical_line",
    "render_human",
    "strip_ansi",
    "timeline_from_bytes",
]
