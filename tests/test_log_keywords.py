"""keywords.KeywordFinder: every keyword of a set that a text holds, by one regex pass, exactly what
``kw in text`` says of each (the rules' keywords and the scan's, on keyword pieces cut, glued and nested,
and on the real logs)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from sparktui.domain.logs.keywords import ENGINES, KeywordFinder, covers, greedy_cover, weight
from sparktui.domain.logs.rules import (
    RULE_ENTRY_CHARS,
    RULE_KEYWORDS,
    SERVING_ENTRY_CHARS,
    SERVING_KEYWORDS,
    STARTUP_ENTRY_CHARS,
    STARTUP_KEYWORDS,
)

ROOT = Path(__file__).parent
LOGS = sorted([*(ROOT / "data" / "vllm-logs").glob("*.txt"), *(ROOT / "public_logs").glob("*.log")])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("keywords", [RULE_KEYWORDS, STARTUP_KEYWORDS], ids=["rules", "startup"])
def test_finds_what_in_finds_on_keyword_pieces(keywords: tuple[str, ...], engine: str) -> None:
    finder = KeywordFinder(keywords, engine=engine)
    rnd = random.Random(11)
    words = list(keywords)
    # Keywords whole, cut short at either end, and glued in any order: overlaps, one inside another, a
    # keyword that ends where another begins.
    pieces = [*words, *(w[: rnd.randrange(1, len(w) + 1)] for w in words), *(w[rnd.randrange(len(w)):]
              for w in words), " ", "x", "█", ":", "\n"]
    for _ in range(30_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))
        assert finder.find(text) == {kw for kw in words if kw in text}, repr(text)


@pytest.mark.parametrize("engine", ENGINES)
def test_finds_what_in_finds_on_every_line_of_the_real_logs(engine: str) -> None:
    finder = KeywordFinder(RULE_KEYWORDS, engine=engine)
    assert len(LOGS) > 40
    for path in LOGS:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            assert finder.find(line) == {kw for kw in RULE_KEYWORDS if kw in line}, line


@pytest.mark.parametrize("engine", ENGINES)
def test_small_sets_and_shared_tails(engine: str) -> None:
    finder = KeywordFinder(["tensor_parallel_size", "pipeline_parallel_size", "size", "died", "died, exit"],
                           engine=engine)
    assert finder.find("pipeline_parallel_size=2") == {"pipeline_parallel_size", "size"}
    assert finder.find("xtensor_parallel_size") == {"tensor_parallel_size", "size"}
    assert finder.find("Worker died, exit code 1") == {"died", "died, exit"}
    assert finder.find("") == set()
    assert finder.find("size\udcff died") == {"size", "died"}  # (a lone surrogate: text no codec made)


def test_re2_is_the_engine_where_it_is_installed() -> None:
    """google-re2 is a dependency: the bulk scan and the rules run on it (Python's re is the fallback for a
    platform it has no wheel for; ``SPARKTUI_REGEX=re`` asks for it)."""
    expected = ("re",) if os.environ.get("SPARKTUI_REGEX") == "re" else ("re2", "re")
    assert expected == ENGINES


@pytest.mark.parametrize(("keywords", "chars"), [(STARTUP_KEYWORDS, STARTUP_ENTRY_CHARS),
                                                 (SERVING_KEYWORDS, SERVING_ENTRY_CHARS),
                                                 (RULE_KEYWORDS, RULE_ENTRY_CHARS)],
                         ids=["startup", "serving", "rules"])
def test_the_entry_characters_found_offline_still_cover_their_keywords(keywords: tuple[str, ...],
                                                                       chars: str) -> None:
    """Only speed rides on them (a set they do not cover is covered greedily), but a keyword added since
    benchmarks/keyword_entries.py chose them should have them chosen again."""
    assert covers(chars, keywords), [kw for kw in keywords if not any(ch in kw for ch in chars)]
    assert sum(map(weight, chars)) <= sum(map(weight, greedy_cover(keywords)))
