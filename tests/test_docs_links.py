"""The user documentation holds together: every relative link in README.md, CHANGELOG.md and docs/ names a
file that exists and, where it names a section, a heading of that file; the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
#: A markdown link or image: [text](target) / ![alt](target).
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """The section anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    found = set()
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def links() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = _FENCE.sub("", page.read_text(encoding="utf-8"))
        for target in _LINK.findall(text):
            if not re.match(r"[a-z]+:", target):   # http(s), mailto: not checked here (no network)
                found.append((str(page.relative_to(REPO)), target))
    return found


def test_the_pages_link_to_each_other() -> None:
    assert len(links()) > 20


@pytest.mark.parametrize(("page", "target"), links())
def test_every_relative_link_resolves(page: str, target: str) -> None:
    path, _, anchor = target.partition("#")
    file = (REPO / page).parent / path if path else REPO / page
    assert file.resolve().is_file(), f"{page}: {target} names no file"
    if anchor:
        assert anchor in anchors(file), f"{page}: {target} names no heading of {file.name}"


def test_the_readme_is_short() -> None:
    assert len((REPO / "README.md").read_bytes()) <= 25_000


def test_every_failure_kind_is_explained_in_docs_failures() -> None:
    from sparktui.domain.logs import FAILURE_KINDS

    text = (REPO / "docs" / "failures.md").read_text(encoding="utf-8")
    logs, _, _nodes = text.partition(POSTMORTEM_HEADING)
    documented = set(re.findall(r"^\| `(\w+)` \|", logs, re.MULTILINE))
    assert documented == set(FAILURE_KINDS)


POSTMORTEM_HEADING = "## When the node itself died"


def test_every_postmortem_cause_is_explained_in_docs_failures() -> None:
    from sparktui.domain.postmortem import Cause

    text = (REPO / "docs" / "failures.md").read_text(encoding="utf-8")
    _, heading, nodes = text.partition(POSTMORTEM_HEADING)
    assert heading
    documented = {k for row in re.findall(r"^\| (`\w+`(?: / `\w+`)*) \|", nodes, re.MULTILINE)
                  for k in re.findall(r"`(\w+)`", row)}
    assert documented == {c.value for c in Cause}
