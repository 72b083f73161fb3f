"""Widget helpers."""

from __future__ import annotations

import hashlib
import re
from typing import Literal, cast

from rich.text import Text
from textual.content import Content
from textual.css.styles import RulesMap
from textual.widgets import Static

_SHOWN = "_sparktui_shown"
_HEIGHT = "_sparktui_height"   # (width, height) of what ``show(..., layout="height")`` showed last


def show(widget: Static, content: Text | str, *, layout: bool | Literal["height"] = True) -> None:
    """``widget.update(content)`` only when the content changed.

    Panels are re-rendered every second and on every event; an update of an unchanged label still costs a
    repaint, and with ``layout`` a reflow of the whole screen — under a log flood that is latency a key
    press waits behind. Single-line widgets of fixed size pass ``layout=False``; a box of automatic height
    whose text changes often and its height rarely (a start's step list, the serving figures) passes
    ``layout="height"``: a reflow only when the new content's height at the box's width differs from the
    last one's, measured as Textual measures the box for its layout.
    """
    if getattr(widget, _SHOWN, None) == content:
        return
    setattr(widget, _SHOWN, content)
    if layout == "height":
        width = widget.content_region.width
        rules = cast("RulesMap", widget.styles)   # (what Textual itself passes, typed as the rules it reads)
        measured = (width, Content.from_rich_text(content).get_height(rules, width)) if width else None
        layout = measured is None or measured != getattr(widget, _HEIGHT, None)
        setattr(widget, _HEIGHT, measured)
    widget.update(content, layout=layout)


_ID_SAFE = re.compile(r"[A-Za-z0-9_-]+\Z")


def node_widget_id(name: str) -> str:
    """A node panel's widget id: ``node-<name>`` when the name is a valid id as it is, else the name with
    every other character as ``_`` plus a short hash of the whole name, so ``spark1.lan``, ``spark 2`` or
    ``Kühl`` stay distinct and never reach Textual as an invalid id."""
    if _ID_SAFE.match(name):
        return f"node-{name}"
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"node-{safe}-{digest}"
