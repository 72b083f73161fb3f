"""The only place the product reaches into Textual's private parts.

Everything else in ``sparktui`` uses Textual's public API (``tests/test_textual_compat.py`` scans for it).
What is here has no public way yet; each use is one small name, its docstring says which behaviour of
Textual it relies on, and ``tests/test_textual_compat.py`` has a test per use that fails naming that
behaviour when a Textual release changes it. Textual is pinned (``pyproject.toml``) to the version these
tests pass on; CI also runs them against the newest Textual, as a warning.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Log

# The type of every key ``Footer.compose`` yields (``FooterKey``: its ``key_display``, ``description`` and
# ``action``; the command palette's key carries the class ``-command-palette``). Not re-exported by
# ``textual.widgets``; ``ui/widgets/fitted_footer.py`` ranks and drops these keys to fit the width.
from textual.widgets._footer import FooterKey as FooterKey

__all__ = ["FooterKey", "InlineWidthLog", "update_scrollbars", "widen_log"]


def widen_log(log: Log, updates: int, width: int) -> None:
    """Widen ``log``'s virtual size to ``width`` cells for lines written at update ``updates``.

    Relies on ``Log._update_maximum_width(updates, size)``: it keeps the widest width seen and sets
    ``virtual_size`` from it, unless the log was cleared since (its update counter moved past
    ``updates``)."""
    log._update_maximum_width(updates, width)


def update_scrollbars(widget: Widget, virtual_size: Size) -> None:
    """Give ``widget``'s scrollbars its new ``virtual_size`` and keep its scroll offsets in range, without the
    layout of the whole screen that setting ``virtual_size`` asks for.

    Relies on ``Widget._scroll_update(virtual_size)``: it sets the scrollbars' window sizes and validates
    ``scroll_x``/``scroll_y``, which is what Textual does after a layout that changed a virtual size."""
    widget._scroll_update(virtual_size)


class InlineWidthLog(Log):
    """A ``Log`` that hands each batch of written lines to :meth:`lines_written`, here and now.

    Relies on ``Log.write_lines`` calling ``self._update_size(updates, new_lines)`` once per batch (Textual's
    is a thread worker measuring cell widths; ``@work`` builds the worker's description from the ``repr`` of
    its arguments, the whole batch: ~20 ms per 20,000-line flush in a flood)."""

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        self.lines_written(updates, lines)

    def lines_written(self, updates: int, lines: list[str]) -> None:
        """Lines were written at update ``updates``: widen the virtual size for them (see
        :func:`widen_log`), measured in cells here; a subclass may measure cheaper."""
        if lines:
            widen_log(self, updates, max(map(cell_len, lines)))
