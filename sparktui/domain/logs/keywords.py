"""Finding literal keywords in text at C speed: with RE2 (google-re2) where it is installed, else by one
Python regex pass over a trie.

RE2 runs a keyword alternation as a DFA, a few table steps a byte whatever the number of keywords, and an
``RE2::Set`` says every keyword a text holds in one call. Python's ``re`` tries an alternation at every
position; ``str.find`` runs at ~1 ns a character on text that holds a non-ASCII character (a bar's "█"
makes a block two bytes a character), so one pass per keyword costs ~1 ns a character per keyword; even on
ASCII, 20 of them cost twice what one regex does. Without RE2 the keywords are therefore one trie, entered
at one of its characters (:func:`entries`: the regex only stops where one of a dozen uncommon characters
is) with a lookbehind that checks the whole keyword. Each engine builds two shapes:

* :func:`line_regex` / :func:`re2_line_regex`: the first keyword of a line (the bulk scan: a line
  matters or not), on the log's bytes;
* :class:`KeywordFinder`: every keyword a text holds, exactly what ``kw in text`` says of each (the rules:
  which of them a message can match).

Both engines find the same: ``tests/test_log_keywords.py`` and ``tests/test_log_scan.py`` run each on
keyword pieces and on every line of the real logs."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from typing import Any

try:
    import re2
except ImportError:  # (no wheel for this platform: Python's re does the same, about 1.3x slower overall)
    re2 = None

#: The engines, the default first: "re2" where google-re2 is installed, and Python's "re", always.
#: ``SPARKTUI_REGEX=re`` leaves RE2 out (to compare, or to rule it out).
ENGINES: tuple[str, ...] = (("re2", "re") if re2 is not None and os.environ.get("SPARKTUI_REGEX") != "re"
                            else ("re",))
#: RE2's unanchored search, for a :func:`re2_line_regex` regex's ``Match`` (None without RE2).
RE2_UNANCHORED: Any = re2._Anchor.UNANCHORED if re2 is not None else None

# How often each character occurs in vLLM logs, per 100,000 characters: counted over the 58 logs of
# tests/data/vllm-logs and tests/public_logs (1.5 M characters; ``benchmarks/keyword_entries.py`` counts them
# again). Any other character counts as rare. Only the speed depends on these figures, never what is found.
CHAR_FREQUENCY: dict[str, int] = {
    ' ': 11305, 'e': 5748, '0': 3804, 'r': 3632, 'i': 3373, 'n': 3226, 't': 3200, 'o': 3144, '1': 2989,
    'a': 2787, 'p': 2578, 's': 2449, ':': 2374, 'l': 2201, '2': 2046, 'c': 1942, 'd': 1923, '.': 1733,
    '3': 1732, 'm': 1650, '/': 1590, 'u': 1441, '_': 1426, ',': 1379, 'g': 1281, '4': 1194, '-': 1162,
    'h': 1145, '7': 1100, '^': 1043, '5': 1043, '6': 1039, '[': 946, '8': 935, '=': 876, 'v': 863,
    'P': 840, 'I': 789, '9': 751, '(': 740, ')': 719, 'O': 709, 'y': 706, 'f': 693, ']': 640, 'k': 626,
    'T': 608, 'C': 585, 'N': 580, 'F': 571, 'E': 540, 'A': 525, 'S': 471, 'b': 431, "'": 429, '"': 421,
    '█': 413, 'R': 402, '|': 230, 'W': 229, 'w': 220, 'L': 220, 'x': 215, 'D': 208, ';': 203, '%': 162,
    'U': 161, 'K': 152, 'H': 142, 'G': 136, 'M': 130, '<': 129, 'q': 89, '>': 85, 'z': 84, '`': 65,
    'V': 62, 'B': 62, '*': 53, 'j': 51, '}': 29, '{': 29, '\\': 22, 'Q': 15, '?': 15, 'X': 11, '+': 8,
    'Y': 7, '#': 6, 'J': 3, '&': 3, '~': 2, '@': 2, 'Z': 1, '!': 1, '$': 0,
}
_RARE = 5


def weight(ch: str) -> int:
    """What a regex stop at ``ch`` costs, relatively: how often it occurs (+1, so none is free)."""
    return CHAR_FREQUENCY.get(ch, _RARE) + 1


def covers(chars: str, keywords: Iterable[str]) -> bool:
    """Whether every keyword holds one of ``chars``."""
    return all(any(ch in kw for ch in chars) for kw in keywords)


def greedy_cover(keywords: tuple[str, ...]) -> str:
    """Entry characters for ``keywords`` by the greedy weighted set cover: the character that covers the
    most keywords not yet covered per its weight, until every keyword holds one; then any that the others
    make redundant dropped, the costliest first. (A good cover is found once, offline, by
    ``benchmarks/keyword_entries.py`` and given to :func:`entries`: this one is the fallback.)"""
    left = set(keywords)
    chosen: set[str] = set()
    while left:
        best = min(sorted({ch for kw in left for ch in kw}),
                   key=lambda ch: weight(ch) / sum(1 for kw in left if ch in kw))
        chosen.add(best)
        left = {kw for kw in left if best not in kw}
    for ch in sorted(chosen, key=weight, reverse=True):
        if covers("".join(chosen - {ch}), keywords):
            chosen.discard(ch)
    return "".join(sorted(chosen))


def entries(keywords: tuple[str, ...], chars: str = "") -> list[int]:
    """Where the regex enters each keyword: at one of few, rare characters (the regex stops at every place
    one of them is). ``chars``: the entry characters found for this set offline (see
    :func:`greedy_cover`), used when they still cover every keyword. A keyword is entered at its rarest
    entry character (the first of equals)."""
    chosen = chars if chars and covers(chars, keywords) else greedy_cover(keywords)
    return [min((i for i, ch in enumerate(kw) if ch in chosen), key=lambda i: (weight(kw[i]), i))
            for kw in keywords]


def _branch(node: dict[str, Any]) -> str:
    """A trie node as a regex: its children (longest continuation first), then what ends there."""
    alts = [re.escape(ch) + _branch(sub) for ch, sub in sorted(node.items()) if ch]
    alts += node.get("", [])
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def _tails(keywords: tuple[str, ...], at: list[int]) -> dict[str, list[str]]:
    """Each keyword from its entry on (what a match of the trie shows) -> the keywords with that tail."""
    tails: dict[str, list[str]] = {}
    for kw, entry in zip(keywords, at, strict=True):
        tails.setdefault(kw[entry:], []).append(kw)
    return tails


def _trie(keywords: tuple[str, ...], at: list[int], guarded: frozenset[str] = frozenset(),
          guard: str = "") -> dict[str, Any]:
    """Each keyword from its entry on, ending in a lookbehind for the whole keyword (and ``guard`` after a
    keyword of ``guarded``)."""
    trie: dict[str, Any] = {}
    for kw, entry in zip(keywords, at, strict=True):
        node = trie
        for ch in kw[entry:]:
            node = node.setdefault(ch, {})
        node.setdefault("", []).append(f"(?<={re.escape(kw)})" + (guard if kw in guarded else ""))
    return trie


@functools.cache
def line_regex(keywords: tuple[str, ...], guarded: frozenset[str] = frozenset(), guard: str = "",
               chars: str = "") -> tuple[re.Pattern[bytes], dict[bytes, tuple[str, ...]]]:
    """The keywords' trie as one regex on UTF-8 bytes, then the rest of the line, and what the match's
    first group (a keyword from its entry on) may stand for: the keywords with that tail, those of
    ``guarded`` last. A keyword of ``guarded`` matches only where the lookahead ``guard`` holds after it.
    The rest of the line is part of the match so that ``finditer`` goes on at the next line by itself.
    (One group, not one per keyword: 155 groups made every try a third slower.) ``chars``: see
    :func:`entries`."""
    at = entries(keywords, chars)
    pattern = f"({_branch(_trie(keywords, at, guarded, guard))})[^\\n]*"
    return re.compile(pattern.encode()), {
        tail.encode(): tuple(sorted(kws, key=lambda kw: kw in guarded))
        for tail, kws in _tails(keywords, at).items()}


def matched(data: bytes, m: re.Match[bytes], tails: dict[bytes, tuple[str, ...]]) -> str:
    """The keyword a match of :func:`line_regex` found (of those with its tail, the one that ends there; a
    guarded one only when nothing else does)."""
    kws = tails[m.group(1)]
    if len(kws) == 1:
        return kws[0]
    end = m.end(1)
    return next((kw for kw in kws if data.endswith(kw.encode(), 0, end)), kws[-1])


def _re2_options() -> Any:
    """Byte semantics (Latin-1: a byte is a character), as Python's ``re`` on bytes: invalid UTF-8 in a
    log matches a negated class as any other byte does."""
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    return options


def _re2_literal(keyword: str) -> bytes:
    return b"".join(b"\\x%02x" % byte for byte in keyword.encode())


@functools.cache
def re2_line_regex(keywords: tuple[str, ...], guarded: frozenset[str] = frozenset(),
                   guard: bytes = b"") -> tuple[Any, dict[bytes, str]]:
    """The keywords as one RE2 alternation on UTF-8 bytes (a keyword of ``guarded`` followed by ``guard``,
    which RE2 cannot look ahead for: it consumes what it checks) and what a match's text stands for. A
    search gives the leftmost keyword of the text; a guarded one's match runs on past it, and is known by
    its start."""
    alternation = b"|".join(_re2_literal(kw) + (guard if kw in guarded else b"") for kw in keywords)
    regex = re2.compile(alternation, _re2_options())._regexp
    return regex, {kw.encode(): kw for kw in keywords}


class KeywordFinder:
    """Every keyword of a fixed set that a text holds (:meth:`find`): one ``RE2::Set`` match, or one Python
    regex pass (``engine="re"``).

    The Python regex consumes only a keyword's entry character and looks ahead for the rest, so every place an
    entry character is gets tried: no match hides a keyword that starts inside it. At one place only one
    path of the trie is reported, so the keywords that could have been found at that same place instead
    (those entered at the same character whose letters agree with the found one's where they overlap) are
    checked there with ``startswith``."""

    def __init__(self, keywords: Iterable[str], chars: str = "", engine: str = ENGINES[0]) -> None:
        kws = tuple(dict.fromkeys(keywords))
        self._keywords = kws
        self._set: Any = None
        if engine == "re2":
            keyword_set = re2.Set.SearchSet(_re2_options())
            for kw in kws:
                keyword_set.Add(_re2_literal(kw))
            keyword_set.Compile()
            self._set = keyword_set._set  # (the binding itself: its wrapper's Match costs a call more)
            return
        at = entries(kws, chars)
        roots = _trie(kws, at)   # first level: the entry characters
        firsts = sorted(roots)
        # One group per entry character (a dozen): lastindex says which character, the group the rest.
        self._pattern = re.compile("|".join(f"{re.escape(ch)}(?=({_branch(roots[ch])}))" for ch in firsts))
        self._chars = ("", *firsts)
        # A match's tail stands for any keyword with that tail (the lookbehinds at its end), and one of them
        # may hide another that agrees with it there.
        entry_of = dict(zip(kws, at, strict=True))
        self._at_place: dict[str, tuple[tuple[str, int], ...]] = {
            tail: tuple((other, e) for other, e in entry_of.items()
                        if any(_agree(kw, entry_of[kw], other, e) for kw in group))
            for tail, group in _tails(kws, at).items()}

    def find(self, text: str) -> set[str]:
        """The keywords ``text`` holds."""
        if self._set is not None:
            kws = self._keywords
            return {kws[i] for i in self._set.Match(text.encode("utf-8", "surrogatepass"))}
        found: set[str] = set()
        chars, at_place = self._chars, self._at_place
        for m in self._pattern.finditer(text):
            i = m.lastindex or 0
            place = m.start()
            for kw, entry in at_place[chars[i] + m.group(i)]:
                if place >= entry and text.startswith(kw, place - entry):
                    found.add(kw)
        return found


def _agree(a: str, ea: int, b: str, eb: int) -> bool:
    """Whether keyword ``b`` entered at ``eb`` can stand at the same place as ``a`` entered at ``ea``: the
    same entry character, and the same letters wherever the two overlap."""
    if a[ea] != b[eb]:
        return False
    lo, hi = max(-ea, -eb), min(len(a) - ea, len(b) - eb)
    return all(a[ea + x] == b[eb + x] for x in range(lo, hi))
