"""Is this input a log at all? ``sparktui timeline`` refuses one that is not (a README, a config, a binary).

The stage machine's own evidence (``TimelineSnapshot.is_vllm_log``) is that something in the input is text
vLLM prints; prose about vLLM (this project's README quotes its messages) has that too. What prose lacks is
the shape of a log record: a header with a level and a time or a source file (vLLM's, Ray's logger, glog /
c10d, a JSON record) or a Ray process prefix. A headerless snippet (a pasted traceback) counts when the
stage machine found a failure in it.
"""

from __future__ import annotations

from sparktui.domain.logs.line import LogRecord, parse_physical_line
from sparktui.domain.logs.stages import TimelineSnapshot


def is_log_record(rec: LogRecord) -> bool:
    """A line a logger wrote: a level with a time or a source file, or a Ray process prefix."""
    return (rec.level is not None and (rec.time is not None or rec.source_file is not None)) or rec.has_prefix


def has_log_line(data: bytes) -> bool:
    """Whether any line of ``data`` is shaped like a log record (stops at the first)."""
    text = data.decode("utf-8", "replace")
    return any(is_log_record(rec) for line in text.splitlines() if line.strip()
               for rec in parse_physical_line(line))


def is_vllm_log(data: bytes, snap: TimelineSnapshot) -> bool:
    """The verdict for a whole input read into ``snap``: vLLM's text in it, and either a log-shaped line or
    a failure the stage machine recognised (a pasted traceback without headers)."""
    return snap.is_vllm_log and (snap.failure is not None or has_log_line(data))
