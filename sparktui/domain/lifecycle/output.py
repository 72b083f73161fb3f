"""Reading what a command on a node printed: the tail shown under a step (the JSON object a constant
script reports is ``sparktui.domain.json_report``'s)."""

from __future__ import annotations

from sparktui.domain.logs import strip_ansi

#: Output lines kept under a step (the UI's step list and ``sparktui start`` show this many).
TAIL_LINES = 8


def output_tail(*texts: str, lines: int = TAIL_LINES) -> tuple[str, ...]:
    """The last ``lines`` non-blank lines of ``texts`` together, without colour codes; a carriage return
    (a progress bar redrawn in place) ends a line too."""
    out: list[str] = []
    for text in texts:
        out += [ln for ln in strip_ansi(text).replace("\r", "\n").splitlines() if ln.strip()]
    return tuple(out[-lines:])
