"""The bulk scan (sparktui.domain.logs.scan): one regex pass over a trie of every keyword must find the lines
that the rule finds line by line (``line_keyword``: the first anchor that takes the line)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparktui.domain.logs import LineSplitter, Timeline, timeline_from_bytes
from sparktui.domain.logs.scan import (
    SERVING_GROUPS,
    STARTUP_GROUPS,
    candidate_lines,
    line_keyword,
    regex_lines,
)

ROOT = Path(__file__).parent
LOGS = sorted([*(ROOT / "data" / "vllm-logs").glob("*.txt"), *(ROOT / "public_logs").glob("*.log")])


def _by_lines(text: str, groups: dict[str, tuple[str, ...]]) -> dict[int, tuple[int, str]]:
    """The rule, one line at a time: line start -> (line end, the anchor order's keyword)."""
    spans: dict[int, tuple[int, str]] = {}
    start = 0
    for line in text.split("\n"):
        kw = line_keyword(line, groups)
        if kw is not None:
            spans[start] = (start + len(line), kw)
        start += len(line) + 1
    return spans


def _same_lines(text: str, groups: dict[str, tuple[str, ...]]) -> None:
    by_line = _by_lines(text, groups)
    by_regex = {start: (end, kw) for start, end, kw in regex_lines(text, groups)}
    assert by_line.keys() == by_regex.keys()
    for start, (end, kw) in by_line.items():
        assert by_regex[start][0] == end
        assert by_regex[start][1] in text[start:end]  # a keyword of the line, maybe another one
        assert line_keyword(text[start:end], groups) == kw  # the anchor order's keyword, line by line


@pytest.mark.parametrize("groups", [STARTUP_GROUPS, SERVING_GROUPS], ids=["startup", "serving"])
def test_regex_scan_finds_the_lines_the_rule_finds_line_by_line(groups: dict[str, tuple[str, ...]]) -> None:
    assert len(LOGS) > 40
    for path in LOGS:
        _same_lines(LineSplitter().feed_block(path.read_bytes()), groups)


def test_regex_scan_on_keywords_cut_glued_and_shuffled() -> None:
    """Random lines made of keyword pieces (a keyword cut short, two glued, one inside another, level
    headers with a logger.exception's indented code) find the same lines both ways."""
    rnd = random.Random(7)
    words = [kw for group in STARTUP_GROUPS.values() for kw in group]
    pieces = [*words, *(w[: rnd.randrange(1, len(w) + 1)] for w in words), *(w[1:] for w in words),
              "ERROR 01-02 03:04:05 [f.py:1]   ", "CRITICAL 01-02 [a.py:3]    x", "] ", "]", "   ", "  ", " ",
              "x", "█", "\r"]
    lines = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6))) for _ in range(20_000)]
    text = "\n".join(lines)
    _same_lines(text, STARTUP_GROUPS)
    _same_lines(text, SERVING_GROUPS)


@pytest.mark.parametrize("path", LOGS, ids=[p.stem[:40] for p in LOGS])
def test_a_block_reads_as_its_lines_one_by_one(path: Path) -> None:
    """Fed line by line (each line a block of its own: no bar update is cut, no scan spans two lines), a log
    reads the same timeline as in 1 MB blocks, where a bar's updates are cut to the last one, Ray's relayed
    pairs of bars (<bar><worker prefix>, <bar>) included, and one scan covers the whole block."""
    data = path.read_bytes()
    splitter, timeline = LineSplitter(), Timeline()
    for line in splitter.feed(data) + splitter.flush():
        timeline.feed_text(line)
    assert timeline.to_json() == timeline_from_bytes(data).to_json()


def test_relayed_bar_pairs_are_cut_to_the_last_pair() -> None:
    """Log 02 draws the CUDA-graph bars of two processes through Ray, a worker prefix glued after every
    other update: 151 updates reach the stage machine as a few."""
    text = LineSplitter().feed_block(next((ROOT / "data" / "vllm-logs").glob("02_*")).read_bytes())
    kept = [line for _, line, _ in candidate_lines(text, STARTUP_GROUPS)
            if "Capturing CUDA" in line]
    assert text.count("Capturing CUDA graph shapes") > 140
    assert len(kept) < 20
