"""The bulk scan: which lines of a block of a log's bytes can still matter to the stage machine, found
without decoding, splitting or parsing the block.

Every keyword of the rules (:mod:`.rules`) belongs to an anchor, and a line matters when an anchor takes
it (:func:`line_keyword`: the rule, one line at a time). A block is scanned for those lines by one regex
(:func:`regex_lines`: RE2's DFA where it is installed, else a Python regex over a trie) of the keywords
that can still matter: every start-up keyword before "ready", the few serving-time ones after it. Only the
lines found are decoded. A run of updates of one tqdm bar on consecutive candidate lines is cut to its
last update."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from sparktui.domain.logs.keywords import ENGINES, RE2_UNANCHORED, line_regex, matched, re2_line_regex
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
    "Reasons:" lines matter, and other keywords find those. (``_INDENTED_AFTER`` and ``_NOT_INDENTED``
    are this rule as regexes; :func:`_level_takes_bytes` on a block's bytes.)"""
    j = text.find("] ", at, end)
    return j == -1 or text[j + 2 : j + 4] != "  "


def _level_takes_bytes(data: bytes, at: int, end: int) -> bool:
    j = data.find(b"] ", at, end)
    return j == -1 or data[j + 2 : j + 4] != b"  "


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
# The same rule for RE2, which has no lookahead: what may follow a level keyword that takes its line, read up
# to the end of the line or to the first "] " and the two characters after it that tell. Runs of "]" are
# read whole, so that the "] " found is the first one.
_NOT_INDENTED = rb"(?:[^\]\n]|\]+[^ \n\]])*(?:\]*(?m:$)|\]+  ?(?:[^ \n]|(?m:$)))"


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
    """The regexes of one keyword set, for each engine (built once: a set is one of this module's
    constants)."""

    def __init__(self, groups: dict[str, tuple[str, ...]]) -> None:
        keywords = tuple(kw for group in groups.values() for kw in group)
        chars = _ENTRY_CHARS.get(id(groups), "")
        levels = frozenset(a for a in _LEVEL_ANCHORS if a in groups)
        assert all(groups[a] == (a,) for a in levels)  # a level anchor stands for itself alone
        self.level_bytes = {level: level.encode() for level in sorted(levels)}  # (the levels, and as bytes)
        others = tuple(kw for kw in keywords if kw not in levels)
        self.pattern, self.tails = line_regex(keywords, levels, f"(?!{_INDENTED_AFTER})", chars)
        self.others, self.other_tails = line_regex(others, chars=chars)
        if "re2" in ENGINES:
            self.re2, self.re2_keywords = re2_line_regex(keywords, levels, _NOT_INDENTED)
            self.re2_others, _ = re2_line_regex(others)

    def first_other(self, data: bytes, start: int, end: int, engine: str) -> str | None:
        """The first keyword of the line ``data[start:end]`` that is no level."""
        if engine == "re2":
            ((s, e),) = self.re2_others.Match(RE2_UNANCHORED, data, start, end)
            return None if s == -1 else self.re2_keywords[data[s:e]]
        m = self.others.search(data, start, end)
        return None if m is None else matched(data, m, self.other_tails)

    def judged_by_levels(self, data: bytes, start: int, end: int, engine: str) -> str | None:
        """A line where a level keyword was found past its first place: the levels' first places judge
        it, then the other keywords."""
        for level, level_b in self.level_bytes.items():
            at = data.find(level_b, start, end)
            if at != -1 and _level_takes_bytes(data, at, end):
                return level
        return self.first_other(data, start, end, engine)


# The entry characters found for the two sets (rules.py; any other set is covered greedily).
_ENTRY_CHARS = {id(STARTUP_GROUPS): STARTUP_ENTRY_CHARS, id(SERVING_GROUPS): SERVING_ENTRY_CHARS}


_SCANNERS: dict[int, tuple[dict[str, tuple[str, ...]], _Scanner]] = {}


def _scanner(groups: dict[str, tuple[str, ...]]) -> _Scanner:
    known = _SCANNERS.get(id(groups))
    if known is None or known[0] is not groups:
        known = _SCANNERS[id(groups)] = (groups, _Scanner(groups))
    return known[1]


def regex_lines(data: bytes, groups: dict[str, tuple[str, ...]], lo: int = 0, hi: int | None = None,
                engine: str = ENGINES[0]) -> Iterator[tuple[int, int, str]]:
    """(line start, line end, a keyword in it) for every line of ``data[lo:hi]`` (a log's bytes) that
    :func:`line_keyword` takes, in order, by one regex pass (lazily: a reader that stops early has the rest
    unscanned). A line's keyword is the first one found in it, not always the one the anchor order would
    give (both are in the line: the caller only asks whether one is in the message). A level ("ERROR")
    takes a line as :func:`line_keyword` says, at its first place in the line and only where no
    logger.exception's indented code follows: the regex itself skips the places code follows (such a line
    of a traceback costs nothing here), and a level found past its first place has the line judged by the
    levels' first places and a second regex, of the other keywords. ``engine``: "re2" (RE2's DFA) or "re"
    (Python's, over a trie); they find the same lines."""
    sc = _scanner(groups)
    end_at = len(data) if hi is None else hi
    if engine == "re2":
        return _re2_lines(data, sc, lo, end_at)
    return _re_lines(data, sc, lo, end_at)


def _re2_lines(data: bytes, sc: _Scanner, lo: int, hi: int) -> Iterator[tuple[int, int, str]]:
    # One RE2 search per line found, from the start of the next line: the DFA skips what matters not.
    search, keywords, level_bytes = sc.re2.Match, sc.re2_keywords, sc.level_bytes
    find, rfind = data.find, data.rfind
    pos = lo
    while pos < hi:
        ((s, e),) = search(RE2_UNANCHORED, data, pos, hi)
        if s == -1:
            return
        start = rfind(b"\n", lo, s) + 1 or lo
        end = find(b"\n", s, hi)
        if end == -1:
            end = hi
        kw = keywords.get(data[s:e])
        if kw is None:  # a level, its match run on past it (its guard)
            kw = next(level for level, level_b in level_bytes.items() if data.startswith(level_b, s))
        if kw in level_bytes and find(level_bytes[kw], start, s) != -1:
            kw = sc.judged_by_levels(data, start, end, "re2")  # (its first place has indented code after it)
        if kw is not None:
            yield start, end, kw
        pos = end + 1


def _re_lines(data: bytes, sc: _Scanner, lo: int, hi: int) -> Iterator[tuple[int, int, str]]:
    level_bytes, tails = sc.level_bytes, sc.tails
    find, rfind = data.find, data.rfind
    for m in sc.pattern.finditer(data, lo, hi):
        start = rfind(b"\n", lo, m.start()) + 1 or lo
        end = m.end()
        kws = tails[m.group(1)]
        kw: str | None = kws[0] if len(kws) == 1 else matched(data, m, tails)
        if kw in level_bytes and find(level_bytes[kw], start, m.end(1) - len(kw)) != -1:
            kw = sc.judged_by_levels(data, start, end, "re")  # (its first place has indented code after it)
        if kw is not None:
            yield start, end, kw


def candidate_lines(data: bytes, groups: dict[str, tuple[str, ...]], lo: int = 0, hi: int | None = None,
                    engine: str = ENGINES[0]) -> Iterator[tuple[int, str, str]]:
    """(end offset, line, a keyword in it) of every line of ``data[lo:hi]`` (a log's bytes, whole lines)
    holding a keyword that can still matter, in order (:func:`regex_lines`), each line decoded (invalid
    UTF-8 becomes U+FFFD, as :class:`~.stream.LineSplitter` does). A run of updates of one tqdm bar on
    consecutive candidate lines keeps its last update. Lazy: a line is given once the lines after it can no
    longer take its place (three on), so a reader that stops early (the start reached "ready": the rest is
    read for the serving keywords) leaves the rest unread."""
    out: list[tuple[int, str, str]] = []
    keys: list[str | tuple[str, str] | None] = []  # each held line's bar key (see below)
    for start, end, kw in regex_lines(data, groups, lo, hi, engine):
        line = data[start:end].decode("utf-8", "replace")
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
