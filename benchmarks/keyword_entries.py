"""Entry characters for the bulk scan's and the rules' keyword regexes (sparktui.domain.logs.keywords).

The regex stops at every place one of its entry characters occurs, so the cost of a scan is about the sum
of their frequencies; every keyword must hold one. That is a weighted set cover: this script counts the
characters of the real logs (tests/data/vllm-logs, tests/public_logs), then finds a cheap cover for each
keyword set by the greedy cover improved by local search (drop a character and cover its keywords again;
add one and drop what it makes redundant), and prints the frequency table and the covers beside the greedy
ones, with their cost in stops per 100 characters. The covers found are the ``*_ENTRY_CHARS`` constants of
sparktui/domain/logs/rules.py; run this again when the keywords change (a test says when a constant no
longer covers its set).

Run: ``.venv/bin/python benchmarks/keyword_entries.py``
"""

from __future__ import annotations

import collections
from pathlib import Path

from sparktui.domain.logs.keywords import covers, greedy_cover, weight
from sparktui.domain.logs.rules import RULE_KEYWORDS, SERVING_KEYWORDS, STARTUP_KEYWORDS

ROOT = Path(__file__).resolve().parent.parent / "tests"
LOGS = sorted([*(ROOT / "data" / "vllm-logs").glob("*.txt"), *(ROOT / "public_logs").glob("*.log")])


def cost(chars: str) -> int:
    return sum(weight(ch) for ch in chars)


def _greedy(keywords: tuple[str, ...], allowed: set[str], start: set[str]) -> set[str] | None:
    """The greedy weighted cover from ``start``, choosing only among ``allowed`` (None: impossible)."""
    chosen = set(start)
    left = {kw for kw in keywords if not any(ch in kw for ch in chosen)}
    while left:
        options = sorted({ch for kw in left for ch in kw} & allowed)
        if not options:
            return None
        best = min(options, key=lambda ch: weight(ch) / sum(1 for kw in left if ch in kw))
        chosen.add(best)
        left = {kw for kw in left if best not in kw}
    return chosen


def _prune(keywords: tuple[str, ...], chosen: set[str]) -> set[str]:
    for ch in sorted(chosen, key=weight, reverse=True):
        if covers("".join(chosen - {ch}), keywords):
            chosen = chosen - {ch}
    return chosen


def improved_cover(keywords: tuple[str, ...]) -> str:
    """Local search from the greedy cover: a character left out (the rest covered again greedily without
    it), or one forced in (the rest covered greedily around it), whichever makes the cover cheaper, until
    neither does."""
    alphabet = {ch for kw in keywords for ch in kw}
    best = set(greedy_cover(keywords))
    better = True
    while better:
        better = False
        trials = [_greedy(keywords, alphabet - {ch}, best - {ch}) for ch in sorted(best)]
        trials += [_greedy(keywords, alphabet, {ch}) for ch in sorted(alphabet - best)]
        for trial in trials:
            if trial is None:
                continue
            trial = _prune(keywords, trial)
            if cost("".join(trial)) < cost("".join(best)):
                best, better = trial, True
    return "".join(sorted(best))


def main() -> None:
    counts: collections.Counter[str] = collections.Counter()
    for path in LOGS:
        counts.update(path.read_text(encoding="utf-8", errors="replace"))
    total = sum(counts.values())
    printable = sorted((chr(i) for i in range(32, 127)), key=lambda ch: -counts[ch])
    print(f"characters per 100,000 over {len(LOGS)} logs ({total:,} characters):")
    print(", ".join(f"{ch!r}: {counts[ch] * 100_000 // total}" for ch in printable))
    print(f"'█': {counts['█'] * 100_000 // total}")
    for name, keywords in (("STARTUP", STARTUP_KEYWORDS), ("SERVING", SERVING_KEYWORDS),
                           ("RULE", RULE_KEYWORDS)):
        greedy, found = greedy_cover(keywords), improved_cover(keywords)
        print(f"{name}_ENTRY_CHARS = {found!r}  # {cost(found) / 1000:.2f} stops per 100 characters "
              f"(the greedy cover {greedy!r}: {cost(greedy) / 1000:.2f})")


if __name__ == "__main__":
    main()
