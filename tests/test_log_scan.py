"""The bulk scan (sparktui.domain.logs.scan): one regex pass over a trie of every keyword must find the lines
that the rule finds line by line (``line_keyword``: the first anchor that takes the line)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparktui.domain.logs import LineSplitter, Timeline, timeline_from_bytes
from sparktui.domain.logs.keywords import ENGINES
from sparktui.domain.logs.scan import (
    SERVING_GROUPS,
    STARTUP_GROUPS,
    candidate_lines,
    line_keyword,
    regex_lines,
)

ROOT = Path(__file__).parent
LOGS = sorted([*(ROOT / "data" / "vllm-logs").glob("*.txt"), *(ROOT / "public_logs").glob("*.log")])


def _by_lines(data: bytes, groups: dict[str, tuple[str, ...]]) -> dict[int, tuple[int, str]]:
    """The rule, one line at a time: line start -> (line end, the anchor order's keyword)."""
    spans: dict[int, tuple[int, str]] = {}
    start = 0
    for line in data.split(b"\n"):
        kw = line_keyword(line.decode("utf-8", "replace"), groups)
        if kw is not None:
            spans[start] = (start + len(line), kw)
        start += len(line) + 1
    return spans


def _same_lines(data: bytes, groups: dict[str, tuple[str, ...]], engine: str) -> None:
    by_line = _by_lines(data, groups)
    by_regex = {start: (end, kw) for start, end, kw in regex_lines(data, groups, engine=engine)}
    assert by_line.keys() == by_regex.keys()
    for start, (end, _) in by_line.items():
        assert by_regex[start][0] == end
        assert by_regex[start][1] in data[start:end].decode("utf-8", "replace")  # a keyword of the line


GROUPS = [STARTUP_GROUPS, SERVING_GROUPS]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("groups", GROUPS, ids=["startup", "serving"])
def test_regex_scan_finds_the_lines_the_rule_finds_line_by_line(groups: dict[str, tuple[str, ...]],
                                                                engine: str) -> None:
    assert len(LOGS) > 40
    for path in LOGS:
        _same_lines(LineSplitter().feed_raw(path.read_bytes()), groups, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_regex_scan_on_keywords_cut_glued_and_shuffled(engine: str) -> None:
    """Random lines made of keyword pieces (a keyword cut short, two glued, one inside another, level
    headers with a logger.exception's indented code, invalid UTF-8) find the same lines both ways."""
    rnd = random.Random(7)
    words = [kw.encode() for group in STARTUP_GROUPS.values() for kw in group]
    pieces = [*words, *(w[: rnd.randrange(1, len(w) + 1)] for w in words), *(w[1:] for w in words),
              b"ERROR 01-02 03:04:05 [f.py:1]   ", b"CRITICAL 01-02 [a.py:3]    x", b"] ", b"]", b"]]",
              b"   ", b"  ", b" ", b"x", "█".encode(), b"\r", b"\xff", b"\xe2\x96"]
    lines = [b"".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6))) for _ in range(20_000)]
    data = b"\n".join(lines)
    _same_lines(data, STARTUP_GROUPS, engine)
    _same_lines(data, SERVING_GROUPS, engine)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("groups", GROUPS, ids=["startup", "serving"])
def test_a_block_scanned_in_pieces_finds_what_it_finds_whole(groups: dict[str, tuple[str, ...]],
                                                             engine: str) -> None:
    """The stage machine scans a block piece by piece (``lo`` and ``hi`` at line ends, ``hi`` at a newline):
    no line is lost or found twice at a piece's edges, a level's guard included (RE2 reads the end of a
    line at ``hi``)."""
    data = LineSplitter().feed_raw(next((ROOT / "data" / "vllm-logs").glob("12_*")).read_bytes())
    whole = list(regex_lines(data, groups, engine=engine))
    rnd = random.Random(3)
    cuts = sorted({data.find(b"\n", rnd.randrange(len(data))) for _ in range(300)} - {-1})
    pieces: list[tuple[int, int, str]] = []
    lo = 0
    for cut in [*cuts, len(data)]:
        pieces += regex_lines(data, groups, lo, cut, engine=engine)
        lo = cut + 1
    assert [(s, e) for s, e, _ in pieces] == [(s, e) for s, e, _ in whole]


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
    data = LineSplitter().feed_raw(next((ROOT / "data" / "vllm-logs").glob("02_*")).read_bytes())
    kept = [line for _, line, _ in candidate_lines(data, STARTUP_GROUPS)
            if "Capturing CUDA" in line]
    assert data.count(b"Capturing CUDA graph shapes") > 140
    assert len(kept) < 20
