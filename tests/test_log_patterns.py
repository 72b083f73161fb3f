"""The rules' regexes are written so that Python's ``re`` can skip to them (sparktui.domain.logs.patterns):
each begins with a literal, a set of literal characters, or ``^``. One that begins with ``\\b`` or a group
is tried at every character of the message, 30-50 times slower on a 5 KB config dump."""

from __future__ import annotations

import re

# The parser behind re.compile (sre_parse before 3.11): the only way to read a pattern's first element.
import re._constants as sre
import re._parser as sre_parse

import pytest

from sparktui.domain.logs.failures import FATAL_AFTER_READY, SIGNATURES
from sparktui.domain.logs.patterns import word
from sparktui.domain.logs.rules import RULES


def _skippable(items: list[tuple[object, object]]) -> bool:
    """Whether a parsed pattern begins with what ``re`` can search for without trying every place."""
    if not items:
        return False
    op, av = items[0]
    if op in (sre.LITERAL, sre.IN):
        return True
    if op is sre.AT:
        return av in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING)  # tried at one place only
    if op is sre.SUBPATTERN:
        return _skippable(list(av[3]))  # type: ignore[index]
    if op is sre.BRANCH:
        return all(_skippable(list(alt)) for alt in av[1])  # type: ignore[index]
    return False


PATTERNS = [*(r.pattern for r in RULES if r.pattern is not None),
            *(s.pattern for s in SIGNATURES if s.pattern is not None), FATAL_AFTER_READY]


@pytest.mark.parametrize("pattern", PATTERNS, ids=[p.pattern[:40] for p in PATTERNS])
def test_every_rule_regex_begins_with_what_re_can_skip_to(pattern: re.Pattern[str]) -> None:
    assert _skippable(list(sre_parse.parse(pattern.pattern))), pattern.pattern


def test_word_is_a_word_boundary_then_the_literal() -> None:
    rx = re.compile(word("tensor_parallel_size") + r"=(\d+)")
    for text in ("tensor_parallel_size=2", "x, tensor_parallel_size=2", "'tensor_parallel_size=2",
                 "pipeline_parallel_size=1 tensor_parallel_size=2"):
        m = rx.search(text)
        assert m is not None and m.group(1) == "2", text
    for text in ("xtensor_parallel_size=2", "data_tensor_parallel_size=2", "_tensor_parallel_size=2"):
        assert rx.search(text) is None, text
        assert re.search(r"\btensor_parallel_size=(\d+)", text) is None  # the same as \b
    assert not _skippable(list(sre_parse.parse(r"\btensor_parallel_size")))
    assert _skippable(list(sre_parse.parse(word("tensor_parallel_size"))))
