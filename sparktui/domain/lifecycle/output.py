"""Reading what a command on a node printed: the JSON object a constant script reports, the tail shown
under a step."""

from __future__ import annotations

import json
from typing import Any

from sparktui.domain.logs import strip_ansi

#: Output lines kept under a step (the UI's step list and ``sparktui start`` show this many).
TAIL_LINES = 8


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object; ``None`` when there is none.

    The scripts print their report last; anything before it (a sitecustomize's notice, a warning from
    the node's Python) is passed over.
    """
    for line in reversed(text.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def output_tail(*texts: str, lines: int = TAIL_LINES) -> tuple[str, ...]:
    """The last ``lines`` non-blank lines of ``texts`` together, without colour codes; a carriage return
    (a progress bar redrawn in place) ends a line too."""
    out: list[str] = []
    for text in texts:
        out += [ln for ln in strip_ansi(text).replace("\r", "\n").splitlines() if ln.strip()]
    return tuple(out[-lines:])
