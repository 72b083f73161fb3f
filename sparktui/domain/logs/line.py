"""The line layer: one physical log record in, one :class:`LogRecord` out.

A vLLM log line is an onion (see docs in ``__init__``):

    [outer wrapper] [process prefix(es)] [header] message [Ray dedup suffix]

* outer wrappers: ``docker logs -t`` / k8s RFC 3339 timestamps, Slurm's ``0: ``, ``kubectl --prefix``;
* process prefixes nest: ``(EngineCore_DP0 pid=1) (RayWorkerWrapper pid=2, ip=10.0.0.2) ...`` and Ray's
  own ``(autoscaler +10s, ip=...)`` / ``(raylet)``; the innermost *named* group is the role, the Ray
  ``ip=`` is the node (none means the head);
* headers by emitter: vLLM (``INFO 04-08 23:32:43 [core.py:101]``, and the pre-0.8 bracket-less form),
  uvicorn (``INFO:     ...``), Ray's Python logger, ``- LEVEL -`` loggers and glog/c10d
  (``[W716 19:53:12.33 socket.cpp:764]``);
* Ray's ``[repeated Nx across cluster]`` suffix.

Everything here is defensive: :func:`parse_line` never raises, whatever bytes were decoded into it.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, fields, replace

# --- ANSI -----------------------------------------------------------------------------------------
# CSI sequences (colours, cursor moves), two-byte escapes and a lone ESC left by a cut sequence.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|\x1b")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


# --- outer wrappers -------------------------------------------------------------------------------
_DOCKER_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? ")
# srun --label: "0: "; right-aligned to the widest task id when there are 10+ tasks (" 0: ").
_SLURM = re.compile(r" {0,4}\d{1,5}: ")
_KUBECTL = re.compile(r"\[pod/[^\]\s]+\] ")
# journald: ``Aug 18 14:15:04 host python3[28059]: `` (month names in any locale)
_JOURNALD = re.compile(r"[^\W\d_]{3,5}\.? {1,2}\d{1,2} \d\d:\d\d:\d\d \S+ [\w.@-]+\[\d+\]: ")
# docker compose: ``vllm-head-1  | ``
_COMPOSE = re.compile(r"[\w.-]{1,64} *\| ")

# --- process prefixes -----------------------------------------------------------------------------
# ``(Name pid=N[, ip=X]) `` — the name may hold spaces (``VllmWorker rank=0``) or be absent (``(pid=N)``).
_PREFIX = re.compile(r"\((?:(?P<name>[^()]*?) )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]+))?\) ?")
_RAY_SPECIAL = re.compile(r"\((?P<name>autoscaler \+[^,)\s]+|raylet)(?:, ip=(?P<ip>[^)\s]+))?\) ?")
# A paste cut inside the first prefix: ``RayWorkerWrapper pid=1861983) INFO ...``.
_CUT_PREFIX = re.compile(
    r"(?P<name>[A-Za-z_][\w:.\-]*(?: [\w=]+)?) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]+))?\) "
)

# --- headers --------------------------------------------------------------------------------------
_LEVELS = "DEBUG|INFO|WARNING|ERROR|CRITICAL"
# vLLM >= 0.8: ``LEVEL MM-DD hh:mm:ss [file:line] ``; <= 0.7: ``LEVEL MM-DD hh:mm:ss file:line] ``.
_VLLM_HEADER = re.compile(
    rf"(?P<level>{_LEVELS}) (?P<time>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? "
    r"(?:\[(?P<file>[^\]\s]+:\d+)\]|(?P<file2>[^\]\s]+:\d+)\])(?: |$)"
)
_HEADER_FIRST = "DIWEC"  # the levels' first letters
_UVICORN_HEADER = re.compile(rf"(?P<level>{_LEVELS}|TRACE):\s+")
# Ray's logger: ``2025-04-20 18:28:18,394\tINFO worker.py:1654 -- ``
_RAY_HEADER = re.compile(
    r"(?P<date>\d{4}-(?P<md>\d\d-\d\d)) (?P<hms>\d\d:\d\d:\d\d),\d+\s+(?P<level>[A-Z]+) (?P<file>\S+:\d+) -- "
)
# ``2026-07-16 20:03:57,095 - INFO - autotuner.py:651 - `` (flashinfer, launcher scripts)
_DASH_HEADER = re.compile(
    r"(?P<date>\d{4}-(?P<md>\d\d-\d\d)) (?P<hms>\d\d:\d\d:\d\d)(?:[,.]\d+)? - (?P<level>[A-Z]+) - "
    r"(?:(?P<file>\S+:\d+) - )?"
)
# glog / c10d: ``[W716 19:53:12.333618227 socket.cpp:764] `` or ``[rank2]:E0716 18:21:22.79 1 f.py:874] ``
_GLOG_HEADER = re.compile(
    # c10's own MessageLogger prints the date as (tm_mon + 1) * 100 + tm_mday, unpadded: "E219" is Feb 19.
    r"(?:\[rank\d+\]:)?\[?(?P<lv>[IWEF])(?P<mmdd>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)\.\d+ "
    r"(?:\d+ )?(?P<file>[^\]\s]+:\d+)\] ?"
)
_GLOG_LEVEL = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
# Ray's C++ logger (src/ray/util/logging.cc, spdlog's "[%Y-%m-%d %H:%M:%S,%e %L %P %t] %v"; RAY_LOG adds
# "file.cc:N: ", the raylet "(raylet) " before it, RAY_CHECK a second space): ``[2025-03-29 12:59:53,123 C
# 1879 1900] core_worker.cc:912:  Check failed: ...``. %L is spdlog's one-letter level: C (critical) is Ray's
# FATAL; a glog build of Ray prints F.
_RAY_CPP_HEADER = re.compile(
    r"\[(?P<date>\d{4}-(?P<md>\d\d-\d\d)) (?P<hms>\d\d:\d\d:\d\d),\d+ (?P<lv>[TDIWECF]) \d+ \d+\] "
    r"(?:\((?:raylet|gcs_server)\) )?(?P<file>[\w.-]+:\d+): +"
)
_RAY_CPP_LEVEL = {"T": "DEBUG", "D": "DEBUG", "I": "INFO", "W": "WARNING", "E": "ERROR", "C": "CRITICAL",
                  "F": "CRITICAL"}
# A vLLM record behind free text (VLLM_LOGGING_PREFIX, a launcher's own log format): where its process
# prefix or header starts, searched near the start of the line only.
_EMBEDDED = re.compile(rf"\((?:[^()]*? )?pid=\d+(?:, ip=[^)\s]+)?\) |(?:{_LEVELS}) \d\d-\d\d \d\d:\d\d:\d\d ")
_EMBED_WINDOW = 160
# The regex needs "pid=" or a level name and a space inside its window: without either (a bar, most free
# text) the search is skipped (a few ``in`` tests instead of a regex search over 220 characters).
_EMBED_NEEDLES = ("pid=", *(f"{level} " for level in _LEVELS.split("|")))


def _embedded(rest: str) -> re.Match[str] | None:
    """``_EMBEDDED.search(rest, 1, window)``: where a vLLM record starts behind free text, if it does."""
    window = rest[1 : _EMBED_WINDOW + 60]
    for needle in _EMBED_NEEDLES:
        if needle in window:
            return _EMBEDDED.search(rest, 1, _EMBED_WINDOW + 60)
    return None

# --- suffix and progress --------------------------------------------------------------------------
_REPEAT = re.compile(
    r"\s*\[repeated (?P<n>\d+)x across cluster\](?: \(Ray deduplicates logs by default\..*)?\s*$"
)
# tqdm: vLLM's ``desc: 50% Completed | 4/8 [..]`` and the default ``desc:  45%|████▌ | 30/67 [..]``.
# The shape of a bar; :func:`parse_progress` reads it the faster way that finds the same match.
_PROGRESS = re.compile(
    r"(?P<desc>[^\r\n]{1,200}?):\s+(?P<pct>\d{1,3})%(?: Completed \||\|[^|]{0,200}\|) "
    r"(?P<n>\d+)/(?P<total>\d+)(?: \[|\s*$)"
)
# The end of a tqdm bar (``[00:01<00:00,  3.33it/s]``); text after it on the same line is a glued record.
_BAR_TAIL = re.compile(r"\[[\d:]+<[\d:?]+,\s*[^\]\r\n]{0,40}?(?:it/s|s/it)\]")

_CUM_DAYS = (0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335)  # leap year, so 02-29 fits


# seconds_in_year's answers by text: a log's lines come many to a second, so most are asked again at once (a
# dict lookup instead of five int() parses). Bounded: emptied when full.
_SECONDS_SEEN: dict[str, float | None] = {}
_SECONDS_SEEN_MAX = 4096


def seconds_in_year(md_hms: str) -> float | None:
    """``MM-DD hh:mm:ss`` -> seconds since Jan 1st of an (unknown, leap) year; None if malformed."""
    try:
        return _SECONDS_SEEN[md_hms]
    except KeyError:
        pass
    if len(_SECONDS_SEEN) >= _SECONDS_SEEN_MAX:
        _SECONDS_SEEN.clear()
    seconds = _SECONDS_SEEN[md_hms] = _seconds_in_year(md_hms)
    return seconds


def _seconds_in_year(md_hms: str) -> float | None:
    try:
        month = int(md_hms[0:2])
        day = int(md_hms[3:5])
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
        return float(
            (_CUM_DAYS[month - 1] + day - 1) * 86400
            + int(md_hms[6:8]) * 3600
            + int(md_hms[9:11]) * 60
            + int(md_hms[12:14])
        )
    except (ValueError, IndexError):
        return None


def md_hms(seconds: float) -> str:
    """Inverse of :func:`seconds_in_year` (modulo the year): seconds -> ``MM-DD hh:mm:ss``."""
    total = int(seconds) % (366 * 86400)
    day, rest = divmod(total, 86400)
    month = max(i for i, start in enumerate(_CUM_DAYS) if start <= day)
    hh, rest = divmod(rest, 3600)
    mm, ss = divmod(rest, 60)
    return f"{month + 1:02d}-{day - _CUM_DAYS[month] + 1:02d} {hh:02d}:{mm:02d}:{ss:02d}"


@dataclass(frozen=True, slots=True)
class Progress:
    """One tqdm update: ``desc`` (e.g. "Loading safetensors checkpoint shards"), ``done`` of ``total``."""

    desc: str
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One log record with its wrappers peeled off.

    ``raw`` is the record after ANSI stripping; ``message`` what the program logged. ``time`` is the
    log's own ``MM-DD hh:mm:ss`` (None when the emitter prints none, e.g. tqdm or uvicorn) and
    ``seconds`` the same as seconds into an unknown year (see :class:`~.stages.Timeline` for rollover).
    ``role`` is the innermost named process prefix (``EngineCore_DP0``, ``RayWorkerWrapper``,
    ``Worker_TP0``, ``APIServer``); ``node`` the Ray ``ip=`` (None: the head node); ``repeat`` Ray's
    ``[repeated Nx across cluster]`` count (0 when absent).
    """

    raw: str
    message: str
    level: str | None = None
    time: str | None = None
    seconds: float | None = None
    role: str | None = None
    node: str | None = None
    pid: int | None = None
    repeat: int = 0
    is_progress: bool = False
    source_file: str | None = None
    progress: Progress | None = None
    has_prefix: bool = False
    # The calendar year, where the line carries one (a ``docker logs -t`` / k8s stamp, Ray's logger, a
    # JSON asctime); vLLM's own header has none.
    year: int | None = None

    @property
    def is_prefix_only(self) -> bool:
        """A process prefix with nothing after it (Ray relays a bar as ``<prefix> \\n<bar>``)."""
        return self.has_prefix and not self.message.strip()


# A frozen dataclass's ``__init__`` sets each of its 14 fields through ``object.__setattr__``: about half of
# what building a record costs, and a record is built for every line the stage machine reads. The line layer
# builds its records through the slots' own setters (the same object: frozen, equal, hashable).
_SLOT_SETTERS = tuple(getattr(LogRecord, f.name).__set__ for f in fields(LogRecord))
assert tuple(f.name for f in fields(LogRecord)) == LogRecord.__slots__


def _record(raw: str, message: str, level: str | None, time: str | None, seconds: float | None,
            role: str | None, node: str | None, pid: int | None, repeat: int, is_progress: bool,
            source_file: str | None, progress: Progress | None, has_prefix: bool,
            year: int | None) -> LogRecord:
    """``LogRecord(...)`` with every field, positional in field order (unrolled: a loop costs what it
    saves)."""
    rec = object.__new__(LogRecord)
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13 = _SLOT_SETTERS
    s0(rec, raw)
    s1(rec, message)
    s2(rec, level)
    s3(rec, time)
    s4(rec, seconds)
    s5(rec, role)
    s6(rec, node)
    s7(rec, pid)
    s8(rec, repeat)
    s9(rec, is_progress)
    s10(rec, source_file)
    s11(rec, progress)
    s12(rec, has_prefix)
    s13(rec, year)
    return rec


def inherit_prefix(rec: LogRecord, prefix: LogRecord) -> LogRecord:
    """``rec`` as if it carried ``prefix``'s process prefix (a bar Ray relayed as ``<prefix> \\r<bar>``)."""
    return replace(rec, role=prefix.role, node=prefix.node, pid=prefix.pid, has_prefix=True)


# ``_PROGRESS`` after its description: tried at each ":" in turn, which is what the description's lazy
# ``{1,200}?`` does, without re-entering the regex at every character of the description.
_PROGRESS_TAIL = re.compile(
    r":\s+(?P<pct>\d{1,3})%(?: Completed \||\|[^|]{0,200}\|) (?P<n>\d+)/(?P<total>\d+)(?: \[|\s*$)"
)


def parse_progress(message: str) -> Progress | None:
    """A tqdm update (``_PROGRESS``), or None."""
    if "%" not in message:
        return None
    text = message.lstrip()
    limit = 201  # the description: 1 to 200 characters, no line break
    for brk in ("\r", "\n"):
        j = text.find(brk, 0, limit)
        if j != -1:
            limit = j
    colon = text.find(":", 1, limit)
    while colon != -1:
        m = _PROGRESS_TAIL.match(text, colon)
        if m is not None:
            try:
                return Progress(text[:colon].strip(), int(m["n"]), int(m["total"]))
            except ValueError:
                return None
        colon = text.find(":", colon + 1, limit)
    return None


# A record's start in the middle of a line: a process prefix (or a chain of them) right before a vLLM
# header. Two processes writing to one pipe without a newline between them glue their records this way.
_GLUED_START = re.compile(
    r"\((?:[^()]{0,80}? )?pid=\d+(?:, ip=[^)\s]{1,64})?\) "
    r"(?:\((?:[^()]{0,80}? )?pid=\d+(?:, ip=[^)\s]{1,64})?\) ){0,3}"
    rf"(?:{_LEVELS}) \d\d-\d\d \d\d:\d\d:\d\d"
)
_LEVEL_TIME = re.compile(rf"(?:{_LEVELS}) \d\d-\d\d \d\d:\d\d:\d\d")


def split_glued_records(record: str) -> list[str]:
    """Split a line holding two records glued together with a process prefix in the middle
    (``... took 2.1 s(RayWorkerWrapper pid=2, ip=X) INFO 04-01 ...``) at that prefix. A prefix chain at the
    start of the line, or after an outer wrapper, is no split: a record must already have begun."""
    if record.count("pid=") < 2:
        return [record]
    first = _LEVEL_TIME.search(record)
    if first is None or _LEVEL_TIME.search(record, first.end()) is None:
        return [record]  # one header at most: nothing glued
    cuts: list[int] = []
    pos = 0
    for m in _GLUED_START.finditer(record, 1):
        start = m.start()
        if record[start - 1] == " " and record[start - 2 : start] == ") ":
            continue  # inside a prefix chain
        if _LEVEL_TIME.search(record, pos, start) is None:
            continue  # no record before it (an outer wrapper, free text)
        cuts.append(start)
        pos = start
    if not cuts:
        return [record]
    bounds = [0, *cuts, len(record)]
    return [record[a:b] for a, b in itertools.pairwise(bounds)]


def split_glued(record: str) -> list[str]:
    """Split a record whose tqdm bar has the next log line glued on (no newline in between), and two
    records glued at a process prefix."""
    if "pid=" in record and record.count("pid=") > 1:
        parts = split_glued_records(record)
        if len(parts) > 1:
            return [piece for part in parts for piece in split_glued(part)]
    if "/s]" not in record and "/it]" not in record:
        return [record]
    out: list[str] = []
    rest = record
    while True:
        m = _BAR_TAIL.search(rest)
        if m is None or m.end() >= len(rest) or not rest[m.end():].strip():
            out.append(rest)
            return out
        out.append(rest[: m.end()])
        rest = rest[m.end():]


def parse_line(text: str) -> LogRecord:
    """Parse one record (one physical line, or one ``\\r`` segment). Never raises."""
    try:
        return _parse_common(text) or _parse(text)
    except Exception:  # defensive: a parser bug must never take the dashboard down
        return LogRecord(raw=text, message=text)


# The commonest record, whole: up to four simple process prefixes (a name without spaces, a pid, maybe an
# ip; of a chain the innermost name and pid count, and the last ip given, as the general reader takes them:
# a repeated group keeps its last capture), then vLLM's header with its ``[file:line]`` and a space. Such a
# line is what :func:`_parse` reads it as, without its detours (no outer wrapper can match a line that
# begins with a prefix or a level and a date, nor can an embedded record behind a header);
# tests/test_log_line.py compares the two on every line of the real logs.
_COMMON = re.compile(
    r"(?:\((?P<name>[A-Za-z_][\w:.\-]*) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]+))?\) ){0,4}"
    rf"(?P<level>{_LEVELS}) (?P<time>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<file>[^\]\s]+:\d+)\] "
)


def _parse_common(text: str) -> LogRecord | None:
    """:func:`_parse` for the commonest records (``_COMMON``), Ray's repeat count after them included, or
    None for any other (ANSI colour, ``\\r`` updates, a line end: the general reader's)."""
    m = _COMMON.match(text)
    if m is None or "\x1b" in text or "\r" in text or text[-1:] == "\n":
        return None
    name, pid, time = m["name"], m["pid"], m["time"]
    message, repeat = text[m.end():], 0
    if "across cluster]" in message:
        m3 = _REPEAT.search(message)
        if m3 is not None:
            repeat, message = int(m3["n"]), message[: m3.start()]
    return _record(text, message, m["level"], time, seconds_in_year(time), name,
                   m["ip"] or None, int(pid) if pid is not None else None, repeat, False, m["file"], None,
                   name is not None, None)


def parse_physical_line(text: str) -> list[LogRecord]:
    """A physical line as a line reader returns it: glued records become separate records."""
    return [parse_line(part) for part in split_glued(strip_ansi(text))]


def _parse(text: str) -> LogRecord:
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    raw = text.rstrip("\r\n")
    rest = raw

    year: int | None = None
    # Outer wrappers (in any order, at most a few).
    for _ in range(3):
        c = rest[:1]
        if not c or c == "(":
            break
        if c.isdigit():
            m = _DOCKER_TS.match(rest)
            if m is not None:
                year = int(rest[:4])
            else:
                m = _SLURM.match(rest)
        elif c == " " and rest[:5].lstrip()[:1].isdigit():
            m = _SLURM.match(rest)
        elif c == "[" and rest.startswith("[pod/"):
            m = _KUBECTL.match(rest)
        elif c.isalpha() and "| " in rest[:70]:
            m = _COMPOSE.match(rest)
        elif c.isalpha() and "]: " in rest[:120]:
            m = _JOURNALD.match(rest)
        else:
            m = None
        if m is None:
            break
        rest = rest[m.end():]

    if rest.startswith("{") and '"message"' in rest:
        rec = _parse_json(raw, rest)
        if rec is not None:
            return rec

    # The header of a record without prefixes, matched once: it is read below (``header_of`` is the text it
    # was matched on).
    header_of, header = rest, (_VLLM_HEADER.match(rest) if rest[:1] in _HEADER_FIRST and rest else None)
    if rest and rest[0] != "(" and header is None and not _CUT_PREFIX.match(rest):
        m0 = _embedded(rest)
        if m0 is not None and m0.start() <= _EMBED_WINDOW and rest[m0.start() - 1] in " ]>:|":
            inner = _parse(rest[m0.start():])
            return replace(inner, raw=raw, year=inner.year or year)

    # Process prefixes, outermost first.
    role: str | None = None
    node: str | None = None
    pid: int | None = None
    has_prefix = False
    if rest.startswith("("):
        while rest.startswith("("):
            m = _PREFIX.match(rest)
            if m is not None:
                name = m["name"]
                if name:
                    role = name
                pid = int(m["pid"])
                if m["ip"]:
                    node = m["ip"]
            else:
                m = _RAY_SPECIAL.match(rest)
                if m is None:
                    break
                role = m["name"].split(" ", 1)[0]
                if m["ip"]:
                    node = m["ip"]
            has_prefix = True
            rest = rest[m.end():]
    elif " pid=" in rest[:160]:
        m = _CUT_PREFIX.match(rest)
        if m is not None:
            role, pid, has_prefix = m["name"], int(m["pid"]), True
            node = m["ip"] or None
            rest = rest[m.end():]

    if has_prefix and rest[:1] not in ("", "(", "\r", "{"):
        header_of, header = rest, _VLLM_HEADER.match(rest)
        if header is None:
            # Free text between the process prefixes and the vLLM record: VLLM_LOGGING_PREFIX after the
            # stdout patch's prefix (<= 0.30: "(EngineCore pid=1) (RayWorkerWrapper pid=2) [spark-a] INFO
            # ...") or after Ray's prefix (0.31+: "(RayWorkerProc pid=2, ip=X) [spark-a] (Worker_TP1 pid=2)
            # INFO ...").
            m0 = _embedded(rest)
            if m0 is not None and m0.start() <= _EMBED_WINDOW and rest[m0.start() - 1] in " ]>:|":
                inner = _parse(rest[m0.start():])
                return replace(inner, raw=raw, role=inner.role or role, node=inner.node or node,
                               pid=inner.pid or pid, has_prefix=True)

    if has_prefix and rest.startswith("{") and '"message"' in rest:
        # A JSON record (0.32+ formatter) relayed by Ray behind its own prefix: the prefix gives the node.
        rec = _parse_json(raw, rest)
        if rec is not None:
            return replace(rec, role=role if role is not None else rec.role, node=node, pid=pid or rec.pid,
                           has_prefix=True)

    # Several \r-separated updates on one physical line: the last non-empty one is current.
    if "\r" in rest:
        segments = [s for s in rest.split("\r") if s.strip()]
        rest = segments[-1] if segments else ""

    level: str | None = None
    time: str | None = None
    seconds: float | None = None
    source: str | None = None
    c = rest[:1]
    m2: re.Match[str] | None = None
    if c in _HEADER_FIRST and c:
        m2 = header if rest is header_of else _VLLM_HEADER.match(rest)
        if m2 is not None:
            level, time = m2["level"], m2["time"]
            source = m2["file"] or m2["file2"]
            seconds = seconds_in_year(time)
        else:
            m2 = _UVICORN_HEADER.match(rest)
            if m2 is not None:
                level = m2["level"]
    elif c.isdigit():
        m2 = _RAY_HEADER.match(rest) or _DASH_HEADER.match(rest)
        if m2 is not None:
            level, source = m2["level"], m2["file"]
            time = f"{m2['date']} {m2['hms']}"
            year = int(m2["date"][:4])
            seconds = seconds_in_year(f"{m2['md']} {m2['hms']}")
    elif c == "[":
        m2 = _GLOG_HEADER.match(rest)
        if m2 is not None:
            level, source = _GLOG_LEVEL[m2["lv"]], m2["file"]
            mmdd = m2["mmdd"].zfill(4)
            time = f"{mmdd[:2]}-{mmdd[2:]} {m2['hms']}"
            seconds = seconds_in_year(time)
        else:
            m2 = _RAY_CPP_HEADER.match(rest)
            if m2 is not None:
                level, source = _RAY_CPP_LEVEL[m2["lv"]], m2["file"]
                time = f"{m2['date']} {m2['hms']}"
                year = int(m2["date"][:4])
                seconds = seconds_in_year(f"{m2['md']} {m2['hms']}")
    message = rest[m2.end():] if m2 is not None else rest

    repeat = 0
    if "across cluster]" in message:
        m3 = _REPEAT.search(message)
        if m3 is not None:
            repeat = int(m3["n"])
            message = message[: m3.start()]

    progress = parse_progress(message) if level is None else None
    return _record(raw, message, level, time, seconds, role, node, pid, repeat, progress is not None, source,
                   progress, has_prefix, year)


def _parse_json(raw: str, text: str) -> LogRecord | None:
    """vLLM 0.32+ ``--logging-config.formatter json``: asctime, levelname, name, processName, process,
    message."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("message"), str):
        return None
    message: str = obj["message"]
    asctime = obj.get("asctime")
    time = asctime if isinstance(asctime, str) else None
    seconds = None
    json_year: int | None = None
    if time is not None:
        md = time[5:] if len(time) >= 19 and time[4] == "-" else time  # tolerate a year in front
        json_year = int(time[:4]) if md is not time and time[:4].isdigit() else None
        seconds = seconds_in_year(md)
        if seconds is not None:
            time = md[:14]  # "MM-DD hh:mm:ss" like every other header (asctime may add a year and ms)
    level = obj.get("levelname")
    role = obj.get("processName")
    pid = obj.get("process")
    progress = None if level else parse_progress(message)
    return LogRecord(
        raw=raw,
        message=message,
        level=level if isinstance(level, str) else None,
        time=time,
        seconds=seconds,
        role=role if isinstance(role, str) else None,
        pid=pid if isinstance(pid, int) else None,
        is_progress=progress is not None,
        progress=progress,
        has_prefix=isinstance(role, str),
        year=json_year,
    )
