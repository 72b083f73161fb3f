"""The bulk scan's two ways to find the lines that can matter (sparktui.domain.logs.scan): one ``str.find``
pass per anchor, and one regex pass over a trie of every keyword. They must find the same lines."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparktui.domain.logs import LineSplitter
from sparktui.domain.logs.scan import SERVING_GROUPS, STARTUP_GROUPS, _find_spans, _regex_spans, line_keyword

ROOT = Path(__file__).parent
LOGS = sorted([*(ROOT / "data" / "vllm-logs").glob("*.txt"), *(ROOT / "public_logs").glob("*.log")])


def _same_lines(text: str, groups: dict[str, tuple[str, ...]]) -> None:
    by_find, by_regex = _find_spans(text, groups), _regex_spans(text, groups)
    assert by_find.keys() == by_regex.keys()
    for start, (end, kw) in by_find.items():
        assert by_regex[start][0] == end
        assert by_regex[start][1] in text[start:end]  # a keyword of the line, maybe another one
        assert line_keyword(text[start:end], groups) == kw  # the anchor order's keyword, line by line


@pytest.mark.parametrize("groups", [STARTUP_GROUPS, SERVING_GROUPS], ids=["startup", "serving"])
def test_regex_scan_finds_the_lines_the_anchor_passes_find(groups: dict[str, tuple[str, ...]]) -> None:
    assert len(LOGS) > 40
    for path in LOGS:
        _same_lines(LineSplitter().feed_block(path.read_bytes()), groups)


def test_regex_scan_on_keywords_cut_glued_and_shuffled() -> None:
    """Random lines made of keyword pieces (a keyword cut short, two glued, one inside another, level
    headers with a logger.exception's indented code) find the same lines both ways."""
    rnd = random.Random(7)
    words = [kw for group in STARTUP_GROUPS.values() for kw in group]
    pieces = [*words, *(w[: rnd.randrange(1, len(w) + 1)] for w in words), *(w[1:] for w in words),
              "ERROR 01-02 03:04:05 [f.py:1]   ", "] ", "  ", " ", "x", "█", "\r"]
    lines = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6))) for _ in range(20_000)]
    text = "\n".join(lines)
    _same_lines(text, STARTUP_GROUPS)
    _same_lines(text, SERVING_GROUPS)
