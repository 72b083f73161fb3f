"""Widget helpers."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

_SHOWN = "_sparktui_shown"


def show(widget: Static, content: Text | str, *, layout: bool = True) -> None:
    """``widget.update(content)`` only when the content changed.

    Panels are re-rendered every second and on every event; an update of an unchanged label still costs a
    repaint, and with ``layout`` a reflow of the whole screen — under a log flood that is latency a key
    press waits behind. Single-line widgets of fixed size pass ``layout=False``.
    """
    if getattr(widget, _SHOWN, None) == content:
        return
    setattr(widget, _SHOWN, content)
    widget.update(content, layout=layout)
