"""The bulk scan: which lines of a block of text can still matter to the stage machine, found without
splitting or parsing the block.

Every keyword of the rules (:mod:`.rules`) belongs to an anchor, and a line matters when an anchor takes
it (:func:`line_keyword`: the rule, one line at a time). A block is scanned for those lines by one regex
pass over a trie of the keywords that can still matter (:func:`regex_lines`): every start-up keyword
before "ready", the few serving-time ones after it. A run of updates of one tqdm bar on consecutive
candidate lines is cut to its last update."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from sparktui.domain.logs.keywords import line_regex, matched
from sparktui.domain.logs.line import split_glued, strip_ansi
from sparktui.domain.logs.nccl import KEYWORDS as NCCL_KEYWORDS
from sparktui.domain.logs.rules import (
    SERVING_ENTRY_CHARS,
    SERVING_KEYWORDS,
    STARTUP_ENTRY_CHARS,
    STARTUP_KEYWORDS,
    anchor_groups,
)

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


def _level_takes(text: str, at: int, end: int) -> bool:
    """A level keyword at ``at`` takes its line (ending at ``end``) unless the first "] " after it opens
    indented code: ``ERROR MM-DD hh:mm:ss [file:N]   <indented>`` is a traceback's code, carets or frame,
    printed with the header on every line (logger.exception). Only its frames, pydantic details and
    "Reasons:" lines matter, and other keywords find those. (``_INDENTED_AFTER`` is this rule as a regex.)"""
    j = text.find("] ", at, end)
    return j == -1 or text[j + 2 : j + 4] != "  "


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


def relayed_bar_key(line: str) -> tuple[str, str] | None:
    """A bar update with the next record's process prefix glued on (Ray relays a worker's bar as
    ``<bar>(RayWorkerWrapper pid=N, ip=X) `` then the bar on the next line): the bar's key and the glued
    prefix, or None for any other line."""
    if "pid=" not in line or "%" not in line or "\r" in line:
        return None
    parts = split_glued(strip_ansi(line))
    if len(parts) != 2 or "%" in parts[1]:
        return None
    key = bar_key(parts[0])
    return None if key is None else (key, parts[1])


# After a level keyword: the first "] " after it in the line opens a logger.exception's indented code ("]" and
# three spaces; :func:`_level_takes` as a regex). Its alternatives exclude each other at their first
# character, so it runs in linear time.
_INDENTED_AFTER = r"(?:[^\]\n]|\](?! ))*\]   "


def line_keyword(line: str, groups: dict[str, tuple[str, ...]]) -> str | None:
    """Whether a line matters, and by which keyword: that of the first anchor (in the groups' order) that
    takes it, or None. An anchor takes a line holding one of its keywords; a level anchor ("ERROR") only
    where its first place in the line has no logger.exception's indented code after it."""
    for anchor, group in groups.items():
        i = line.find(anchor)
        if i == -1:
            continue
        if anchor in _LEVEL_ANCHORS:
            if _level_takes(line, i, len(line)):
                return anchor
        elif len(group) == 1 and group[0] == anchor:
            return anchor
        else:
            for kw in group:
                if kw in line:
                    return kw
    return None


class _Scanner:
    """The regexes of one keyword set (built once: a set is one of this module's constants)."""

    def __init__(self, groups: dict[str, tuple[str, ...]]) -> None:
        keywords = tuple(kw for group in groups.values() for kw in group)
        chars = _ENTRY_CHARS.get(id(groups), "")
        self.levels = tuple(a for a in _LEVEL_ANCHORS if a in groups)
        assert all(groups[a] == (a,) for a in self.levels)  # a level anchor stands for itself alone
        self.pattern, self.tails = line_regex(keywords, frozenset(self.levels), f"(?!{_INDENTED_AFTER})",
                                              chars)
        self.others, self.other_tails = line_regex(tuple(kw for kw in keywords if kw not in self.levels),
                                                   chars=chars)


# The entry characters found for the two sets (rules.py; any other set is covered greedily).
_ENTRY_CHARS = {id(STARTUP_GROUPS): STARTUP_ENTRY_CHARS, id(SERVING_GROUPS): SERVING_ENTRY_CHARS}


_SCANNERS: dict[int, tuple[dict[str, tuple[str, ...]], _Scanner]] = {}


def _scanner(groups: dict[str, tuple[str, ...]]) -> _Scanner:
    known = _SCANNERS.get(id(groups))
    if known is None or known[0] is not groups:
        known = _SCANNERS[id(groups)] = (groups, _Scanner(groups))
    return known[1]


def regex_lines(text: str, groups: dict[str, tuple[str, ...]], lo: int = 0,
                hi: int | None = None) -> Iterator[tuple[int, int, str]]:
    """(line start, line end, a keyword in it) for every line of ``text[lo:hi]`` that :func:`line_keyword`
    takes, in order, by one regex pass (lazily: a reader that stops early has the rest unscanned). A line's
    keyword is the first one found in it, not always the one the anchor order would give (both are in the
    line: the caller only asks whether one is in the message). A level ("ERROR") takes a line as
    :func:`line_keyword` says, at its first place in the line and only where no logger.exception's indented
    code follows: the regex itself skips the places code follows (such a line of a traceback costs nothing
    here), and a level found past its first place has the line judged by the levels' first places and a
    second regex, of the other keywords."""
    sc = _scanner(groups)
    levels, tails = sc.levels, sc.tails
    find, rfind = text.find, text.rfind
    for m in sc.pattern.finditer(text, lo, len(text) if hi is None else hi):
        start = rfind("\n", lo, m.start()) + 1 or lo
        end = m.end()
        kws = tails[m.group(1)]
        kw: str | None = kws[0] if len(kws) == 1 else matched(text, m, tails)
        if kw in levels and find(kw, start, m.end(1) - len(kw)) != -1:
            kw = None  # (its first place in the line has indented code after it)
            for level in levels:
                at = find(level, start, end)
                if at != -1 and _level_takes(text, at, end):
                    kw = level
                    break
            if kw is None:
                m2 = sc.others.search(text, start, end)
                if m2 is not None:
                    kw = matched(text, m2, sc.other_tails)
        if kw is not None:
            yield start, end, kw


def candidate_lines(text: str, groups: dict[str, tuple[str, ...]], lo: int = 0,
                    hi: int | None = None) -> Iterator[tuple[int, str, str]]:
    """(end offset, line, a keyword in it) of every line of ``text[lo:hi]`` (whole lines) holding a keyword
    that can still matter, in order (:func:`regex_lines`; for the 20 serving anchors too: 2x faster than
    their ``str.find`` passes, ASCII or not). A run of updates of one tqdm bar on consecutive candidate lines
    keeps its last update. Lazy: a line is given once the lines after it can no longer take its place (three
    on), so a reader that stops early (the start reached "ready": the rest is read for the serving keywords)
    leaves the rest unread."""
    out: list[tuple[int, str, str]] = []
    keys: list[str | tuple[str, str] | None] = []  # each held line's bar key (see below)
    for start, end, kw in regex_lines(text, groups, lo, hi):
        line = text[start:end]
        # (Most lines are no bar: the two tests inline spare them the calls.)
        bar: str | tuple[str, str] | None = bar_key(line) if line[-1:] == "]" else None
        if bar is None and "%" in line and "pid=" in line:
            bar = relayed_bar_key(line)
        if isinstance(bar, str) and keys and bar == keys[-1]:
            # The next update of the same bar, with nothing the stage machine reads in between (only lines
            # that are no candidates, such as the blank lines tqdm leaves between updates): the last counts.
            out[-1] = (end, line, kw)
            continue
        if (isinstance(bar, str) and len(keys) >= 3 and isinstance(keys[-1], tuple)
                and keys[-1] == keys[-3] and keys[-2] == bar):
            # Ray's relay of two bars at once: <bar A><worker prefix>, <bar B> (it takes the prefix), again
            # and again. A pair that repeats the pair before it, nothing else in between: the last pair counts
            # (the prefix goes to the same bar as before, and a bar's progress is its furthest update).
            del out[-3:-1], keys[-3:-1]
        out.append((end, line, kw))
        keys.append(bar)
        if len(out) > 3:  # (the rules above change only the last three)
            yield out.pop(0)
            del keys[0]
    yield from out


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
