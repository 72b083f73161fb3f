"""The bulk scan: which lines of a block of text can still matter to the stage machine, found without
splitting or parsing the block.

Every keyword of the rules (:mod:`.rules`) belongs to an anchor; a block is scanned once per anchor with
``str.find`` (C speed) and a line an anchor finds is checked for that anchor's keywords within its bounds.
After "ready" only the few serving-time keywords count. A run of updates of one tqdm bar on consecutive
lines is cut to its last update.
"""

from __future__ import annotations

import itertools

from sparktui.domain.logs.nccl import KEYWORDS as NCCL_KEYWORDS
from sparktui.domain.logs.rules import SERVING_KEYWORDS, STARTUP_KEYWORDS, anchor_groups

STARTUP_GROUPS = anchor_groups(STARTUP_KEYWORDS)
SERVING_GROUPS = anchor_groups(SERVING_KEYWORDS)
SERVING_SET = frozenset(SERVING_KEYWORDS)
assert set(STARTUP_KEYWORDS) >= SERVING_SET  # a start-up scan finds every line a serving scan would


def has_any(text: str, groups: dict[str, tuple[str, ...]]) -> bool:
    for anchor, group in groups.items():
        if anchor in text:
            for kw in group:
                if kw in text:
                    return True
    return False


#: After ready, an NCCL transport line (the API server's own ranks' lines come late) only adds NCCL facts:
#: read without parsing when it holds no other serving keyword.
NCCL_SET = frozenset(NCCL_KEYWORDS)
SERVING_NOT_NCCL_GROUPS = anchor_groups(tuple(k for k in SERVING_KEYWORDS if k not in NCCL_SET))


def late_nccl_line(line: str, kw: str) -> bool:
    """A line the serving scan found by an NCCL keyword that is nothing but an NCCL INFO line (no Ray
    dedup suffix to strip, no other serving keyword): :func:`.nccl.observe` reads it as it is."""
    return (kw in NCCL_SET and "NCCL INFO" in line and "across cluster]" not in line
            and not has_any(line, SERVING_NOT_NCCL_GROUPS))


_LEVEL_ANCHORS = frozenset({"ERROR", "CRITICAL"})


def bar_key(line: str) -> str | None:
    """What identifies a tqdm bar line (its prefix and description), or None for any other line."""
    if not line.endswith("]"):
        return None  # something glued after the bar (a prefix the next record takes): keep the line
    pct = line.find("% Completed |")
    if pct == -1:
        pct = line.find("%|")
        if pct == -1:
            return None
    colon = line.rfind(": ", 0, pct)
    return line[:colon] if colon != -1 else None


def count_ok_requests(text: str) -> int:
    """uvicorn access-log lines with a 2xx status (``"POST /v1/chat/completions HTTP/1.1" 200 OK``)."""
    return text.count('HTTP/1.1" 2') + text.count('HTTP/1.0" 2')


def candidate_lines(text: str, groups: dict[str, tuple[str, ...]]) -> list[tuple[int, str, str]]:
    """(end offset, line, a keyword in it) of every line holding a keyword that can still matter, in
    order. One ``str.find`` pass over the block per anchor; a line an anchor finds is checked for that
    anchor's keywords within the line's bounds (no slicing)."""
    spans: dict[int, tuple[int, str]] = {}
    find, rfind = text.find, text.rfind
    size = len(text)
    for anchor, group in groups.items():
        single = len(group) == 1 and group[0] == anchor
        level = anchor in _LEVEL_ANCHORS
        i = find(anchor)
        while i != -1:
            start = rfind("\n", 0, i) + 1
            end = find("\n", i)
            if end == -1:
                end = size
            if start not in spans:
                if level:
                    # ``ERROR MM-DD hh:mm:ss [file:N]   <indented>``: a traceback's code, carets or frame,
                    # printed with the header on every line (logger.exception). Only its frames, pydantic
                    # details and "Reasons:" lines matter, and other anchors find those.
                    j = find("] ", i, end)
                    if j == -1 or text[j + 2 : j + 4] != "  ":
                        spans[start] = (end, anchor)
                elif single:
                    spans[start] = (end, anchor)
                else:
                    for kw in group:
                        if find(kw, start, end) != -1:
                            spans[start] = (end, kw)
                            break
            if end >= size:
                break
            i = find(anchor, end)
    out: list[tuple[int, str, str]] = []
    prev_bar: str | None = None
    prev_end = -2
    for start, (end, kw) in sorted(spans.items()):
        line = text[start:end]
        bar = bar_key(line)
        if bar is not None and bar == prev_bar and prev_end + 1 == start:
            out[-1] = (end, line, kw)  # the next update of the same bar on the next line: the last counts
        else:
            out.append((end, line, kw))
        prev_bar, prev_end = bar, end
    return out


def cr_segments(part: str) -> list[str]:
    """A physical line holding ``\\r``-separated records: a leading prefix-only piece stays separate so
    the next bar inherits it. Of a run of updates of one bar (tqdm redraws it in place, up to hundreds of
    times on one line) only the last is kept: a bar's progress is the furthest update, and every update on
    the line has the line's time."""
    segs = [seg for seg in part.split("\r") if seg.strip()]
    if len(segs) < 3:
        return segs
    out = [seg for seg, nxt in itertools.pairwise(segs) if seg[:24] != nxt[:24] or "%" not in seg]
    out.append(segs[-1])
    return out
