"""A stage's bar: drawn as Textual's ProgressBar draws its bar, cheaper to keep on screen all day.

It draws with Textual's bar renderable and the same component classes (``bar--bar``, ``bar--complete``,
``bar--indeterminate``), so it looks as a ``ProgressBar`` without percentage and ETA does; but two of
ProgressBar's habits would cost frames for nothing a stage row shows:

* a bar without a total (a stage running with no count in the log: compile, KV cache, engine init) sweeps
  at 15 frames a second on a timer of its own; during a start that was most of the frames the dashboard
  drew (a frame costs the compositor and the terminal, whatever else changed). A :class:`StageBar` sweeps
  only when its row is redrawn (:meth:`StageBar.sweep`), which the engine panel does once a second during
  a start for the rows' elapsed times: the sweep moves :data:`SWEEP_CELLS_PER_SECOND` cells then, in the
  frame that was drawn anyway;
* every ProgressBar calls its ``update`` once a second to feed its ETA, which a stage row does not show
  (the row's own label gives the elapsed time): nine timers waking nine widgets at ready, none of whose
  data changed.

Removing those from a ``ProgressBar`` took Textual's private parts (its ``Bar`` and its mount handler);
one widget of its own needs none.
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from textual.app import RenderResult
from textual.clock import Clock
from textual.renderables.bar import Bar as BarRenderable
from textual.widget import Widget

SWEEP_CELLS_PER_SECOND = 3.0


class StageBar(Widget, can_focus=False):
    """A bar with a total (filled to ``progress / total``) or without one (a sweep that moves when
    :meth:`sweep` is called); no timers (see the module's docstring)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"bar--bar", "bar--complete", "bar--indeterminate"}

    # Textual's ``Bar`` colours, so a stage bar looks as a ProgressBar's does.
    DEFAULT_CSS = """
    StageBar {
        width: 32;
        height: 1;

        &> .bar--bar {
            color: $primary;
            background: $surface;
        }
        &> .bar--indeterminate {
            color: $error;
            background: $surface;
        }
        &> .bar--complete {
            color: $success;
            background: $surface;
        }
    }
    """

    def __init__(self, total: float | None = None, *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.clock = Clock()
        self.total: float | None = None
        self.progress = 0.0
        #: The fraction drawn, in half cells of the width it was drawn at (None: the sweep).
        self._drawn: float | None = None
        self.update(total=total)

    def on_mount(self) -> None:
        self.clock.reset()

    @property
    def percentage(self) -> float | None:
        """The fraction done, 0 to 1 (1 for a total of 0, as ProgressBar); None without a total."""
        if self.total is None:
            return None
        if not self.total:
            return 1.0
        return min(1.0, max(0.0, self.progress / self.total))

    def update(self, *, total: float | None, progress: float = 0.0) -> None:
        """Show ``progress`` of ``total`` (``total`` None: a stage without a count). Repaints only when the
        bar moves by half a cell or more."""
        self.total = None if total is None else max(0.0, total)
        self.progress = progress
        drawn = self._half_cells(self.percentage)
        if drawn != self._drawn:
            self._drawn = drawn
            self.refresh()

    def _half_cells(self, percentage: float | None) -> float | None:
        width = self.size.width * 2
        if percentage is None or not width:
            return percentage
        return int(percentage * width) / width

    def sweep(self) -> None:
        """Move a bar without a total on to where the sweep is now (nothing for any other bar)."""
        if self.total is None:
            self.refresh()

    def render(self) -> RenderResult:
        percentage = self._half_cells(self.percentage)
        width = self.size.width
        if percentage is None:
            return self.render_indeterminate()
        style = self.get_component_rich_style("bar--bar" if percentage < 1 else "bar--complete")
        return BarRenderable(
            highlight_range=(0, width * percentage),
            highlight_style=Style.from_color(style.color),
            background_style=Style.from_color(style.bgcolor),
        )

    def render_indeterminate(self) -> RenderResult:
        width = self.size.width
        lit = 0.25 * width
        span = width + lit  # the lit part runs into the corners before it turns back
        if self.app.animation_level == "none" or not span:
            start, end = 0.0, float(width)
        else:
            at = (SWEEP_CELLS_PER_SECOND * self.clock.time) % (2 * span)
            start = (at if at <= span else 2 * span - at) - lit
            end = start + lit
        style = self.get_component_rich_style("bar--indeterminate")
        return BarRenderable(
            highlight_range=(max(0.0, start), min(end, float(width))),
            highlight_style=Style.from_color(style.color),
            background_style=Style.from_color(style.bgcolor),
        )
