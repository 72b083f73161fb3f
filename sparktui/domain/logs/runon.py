"""Run-on records: a log whose newlines were lost, cut back into records before anything judges it.

A log pasted through a web form, a chat or a rendered page often arrives with its line ends gone (turned
into spaces, or dropped): every record of the start runs on in one line, and a line reader sees one record
(or, past :data:`~.stream.DEFAULT_MAX_RECORD_BYTES`, the first 64 KB of one). vLLM begins each record it
prints with a process prefix, ``(APIServer pid=49)``, ``(EngineCore_DP0 pid=79)``, a chain such as
``(EngineCore_DP0 pid=79) (RayWorkerWrapper pid=2, ip=10.0.0.2)`` (the stdout patch and Ray's relay put one
on every line, traceback lines included), or, in a log without prefixes, with its header ``INFO 04-08
23:32:43 [core.py:101]`` (``INFO 04-08 23:32:43 core.py:101]`` up to 0.7). Those starts are where the lost
line ends were: a run-on line is cut before each of them.

Only a block whose lines are far longer than a log's (:data:`RUN_ON_LINE_BYTES` on average) is looked at
line by line, and only a line holding two record starts or more after its first (not a glued pair: those
are :func:`~.line.split_glued`'s) is cut, so a log with its newlines costs two ``bytes.count`` calls on a
window of each block. Never raises.
"""

from __future__ import annotations

import itertools
import re

#: A block whose lines average more bytes than this (in its first :data:`_WINDOW` bytes) may hold run-on
#: records; a vLLM log's lines average 100-200 bytes (a config dump of 5 KB is one line among many).
RUN_ON_LINE_BYTES = 512
_WINDOW = 16 * 1024
# A record's start: a chain of process prefixes (Ray's colour codes around them allowed), or vLLM's header
# where no prefix comes first. (``(pid=N, ip=X, actor_id=...)`` inside a Ray error is no prefix: no ``)``
# follows the ip.)
_LEVELS = rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
RECORD_START = re.compile(
    rb"(?:(?:\x1b\[[\d;]*m)?\((?:[^()\n\r]{0,80}? )?pid=\d+(?:, ip=[^)\s]{1,64})?\)(?:\x1b\[[\d;]*m)? ?)+"
    rb"|" + _LEVELS + rb" \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:\[[^\]\s]{1,200}:\d+\]|[^\]\s]{1,200}:\d+\]) "
)
#: Record starts after the first that make a line a run-on (one is a glued pair, split elsewhere).
_MIN_CUTS = 2


def record_cuts(line: bytes) -> list[int]:
    """Where records start in ``line`` after its beginning: the start of each prefix chain, and of each
    header that does not follow a prefix chain (the same record's)."""
    cuts: list[int] = []
    last_end = -1
    for m in RECORD_START.finditer(line):
        start = m.start()
        if start > 0 and start != last_end:
            cuts.append(start)
        last_end = m.end()
    return cuts


def _split_line(line: bytes) -> bytes:
    if b"\r" in line or len(line) < RUN_ON_LINE_BYTES or line.count(b"pid=") + line.count(b"] ") < _MIN_CUTS:
        return line
    cuts = record_cuts(line)
    if len(cuts) < _MIN_CUTS:
        return line
    bounds = [0, *cuts, len(line)]
    # The space (or nothing) that stood where a newline was goes with the record before it.
    return b"\n".join(line[a:b].rstrip(b" ") for a, b in itertools.pairwise(bounds))


def restore_newlines(block: bytes) -> bytes:
    """``block`` (whole lines) with each run-on line cut into its records; the block itself when its lines
    are of a log's length (the usual case: two counts over a window of it)."""
    window = block[:_WINDOW] if len(block) > _WINDOW else block
    if len(window) <= RUN_ON_LINE_BYTES * (window.count(b"\n") + window.count(b"\r") + 1):
        return block
    try:
        return b"\n".join(_split_line(line) for line in block.split(b"\n"))
    except Exception:  # defensive: whatever the bytes, the block as it came is still a log
        return block


def last_record_start(data: bytes) -> int:
    """The offset of the last record start in ``data`` past its beginning (where an over-long unfinished
    line can be cut without cutting a record), or 0."""
    cuts = record_cuts(data)
    return cuts[-1] if cuts else 0
