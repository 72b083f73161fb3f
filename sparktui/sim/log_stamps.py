"""Putting one clock into a log's lines: the demo replays template lines with its own clock's times.

Three stamp shapes reach the head's vLLM log: vLLM's ``INFO 10-23 15:10:29``, Ray's
``2026-01-01 15:10:30,214`` and glog's (PyTorch's C++ warnings) ``[W1023 15:10:40.851982880``. All three
get the same wall time, so no line keeps the recording's hour among the demo's.
"""

from __future__ import annotations

import re
import time

_VLLM_STAMP = re.compile(r"\b(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d\b")
_RAY_STAMP = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,(\d{3})")
_GLOG_STAMP = re.compile(r"\[([IWEF])\d{4} \d\d:\d\d:\d\d\.(\d+)")


def restamp(text: str, wall: float) -> str:
    """``text`` with its first timestamp (of any of the three shapes) set to ``wall`` (UTC seconds)."""
    tm = time.gmtime(wall)
    fraction = wall % 1.0
    if _VLLM_STAMP.search(text):
        return _VLLM_STAMP.sub(lambda m: f"{m.group(1)} {time.strftime('%m-%d %H:%M:%S', tm)}", text, count=1)
    if _RAY_STAMP.search(text):
        millis = f"{int(fraction * 1000):03d}"
        return _RAY_STAMP.sub(f"{time.strftime('%Y-%m-%d %H:%M:%S', tm)},{millis}", text, count=1)
    glog = _GLOG_STAMP.search(text)
    if glog:
        digits = len(glog.group(2))
        sub = f"{int(fraction * 10**digits):0{digits}d}"
        return _GLOG_STAMP.sub(lambda m: f"[{m.group(1)}{time.strftime('%m%d %H:%M:%S', tm)}.{sub}", text,
                               count=1)
    return text


_CLOCK = re.compile(r"(?:\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d |\b\d{4}-\d\d-\d\d "
                    r"|\[[IWEF]\d{4} )(\d\d):(\d\d):(\d\d)")


def stamp_seconds(text: str) -> int | None:
    """Seconds since midnight of the line's timestamp (any of the three shapes); ``None`` without one."""
    m = _CLOCK.search(text)
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)) if m else None
