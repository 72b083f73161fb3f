"""The footer that is never cut: at any width it shows the most important keys that fit whole, in their
usual order, and drops the least important first (Textual's footer cuts whatever passes the right edge,
Help and Quit included at 80 columns). A key whose action is not allowed now is greyed (Textual does that
for ``check_action`` returning None) and its tooltip says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeGuard

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Footer

from sparktui.ui.textual_compat import FooterKey


def key_width(key: FooterKey, compact: bool) -> int:
    """The cells ``key`` takes in the footer, as ``FooterKey``'s default CSS pads it: `` key `` then
    ``description `` (compact: ``key description`` and a one-cell margin)."""
    text = cell_len(key.key_display) + cell_len(key.description)
    return text + 2 if compact else text + 3


class FittedFooter(Footer):
    """A ``Footer`` that keeps, of the keys it would show, those ranked highest by ``rank`` (an action →
    its importance, 0 first) that fit in the screen's width, and gives a disabled key the tooltip
    ``why_not(action)``."""

    def __init__(self, rank: Callable[[str], int], why_not: Callable[[str], str | None],
                 **kwargs: bool | str | None) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rank = rank
        self.why_not = why_not
        self._width = 0

    def compose(self) -> ComposeResult:
        widgets: list[Widget] = list(super().compose())
        keys = [w for w in widgets if _ranked(w)]
        # The palette's key is docked right, with a one-cell padding and a one-cell border before it.
        room = self.app.size.width - sum(key_width(w, self.compact) + 2
                                         for w in widgets if isinstance(w, FooterKey) and not _ranked(w))
        kept: set[int] = set()
        # In order of importance, until one does not fit: a less important key never stands where a more
        # important one was dropped, even when it is short enough to.
        for key in sorted(keys, key=lambda k: self.rank(k.action)):
            width = key_width(key, self.compact)
            if width > room:
                break
            kept.add(id(key))
            room -= width
        for widget in widgets:
            if _ranked(widget):
                if id(widget) not in kept:
                    continue
                if widget.has_class("-disabled") and (reason := self.why_not(widget.action)):
                    widget.tooltip = f"{widget.description}: not now — {reason}"
            yield widget

    def on_resize(self, event: Resize) -> None:
        if event.size.width != self._width:
            self._width = event.size.width
            self.call_after_refresh(self.recompose)

    @property
    def shown_actions(self) -> Sequence[str]:
        """The actions of the keys on show, left to right (tests and the help screen read it)."""
        return [k.action for k in self.query(FooterKey) if _ranked(k)]


def _ranked(widget: Widget) -> TypeGuard[FooterKey]:
    """A key that competes for room (the palette's key, docked right, always stays)."""
    return isinstance(widget, FooterKey) and not widget.has_class("-command-palette")
