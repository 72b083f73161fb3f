"""A stage's bar: Textual's ProgressBar, cheaper to keep on screen all day.

Two of ProgressBar's habits cost frames for nothing a stage row shows:

* a bar without a total (a stage running with no count in the log: compile, KV cache, engine init) sweeps
  at 15 frames a second on a timer of its own; during a start that was most of the frames the dashboard
  drew (a frame costs the compositor and the terminal, whatever else changed). A :class:`StageBar` sweeps
  only when its row is redrawn (:meth:`StageBar.sweep`), which the engine panel does once a second during
  a start for the rows' elapsed times: the sweep moves :data:`SWEEP_CELLS_PER_SECOND` cells then, in the
  frame that was drawn anyway;
* every ProgressBar calls its ``update`` once a second to feed its ETA, which a stage row does not show
  (the row's own label gives the elapsed time): nine timers waking nine widgets at ready, none of whose
  data changed.
"""

from __future__ import annotations

from rich.style import Style
from textual import events
from textual.app import ComposeResult, RenderResult
from textual.widgets import ProgressBar
from textual.widgets._progress_bar import Bar

SWEEP_CELLS_PER_SECOND = 3.0


class _SweepBar(Bar):
    """Textual's Bar without a timer for its indeterminate sweep (it is still a ``Bar`` to CSS)."""

    def watch_percentage(self, percentage: float | None) -> None:
        self.auto_refresh = None  # (Bar's own: 1/15 s while the percentage is None)

    def render_indeterminate(self) -> RenderResult:
        width = self.size.width
        lit = 0.25 * width
        span = width + lit  # the lit part runs into the corners before it turns back
        if self.app.animation_level == "none" or not span:
            start, end = 0.0, float(width)
        else:
            at = (SWEEP_CELLS_PER_SECOND * self._clock.time) % (2 * span)
            start = (at if at <= span else 2 * span - at) - lit
            end = start + lit
        style = self.get_component_rich_style("bar--indeterminate")
        return self.bar_renderable(
            highlight_range=(max(0.0, start), min(end, float(width))),
            highlight_style=Style.from_color(style.color),
            background_style=Style.from_color(style.bgcolor),
        )


class StageBar(ProgressBar):
    """A ProgressBar without its ETA timer, drawing :class:`_SweepBar` (see the module's docstring)."""

    def __init__(self, total: float | None = None, *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(total, show_eta=False, show_percentage=False, id=id, classes=classes)

    def compose(self) -> ComposeResult:
        yield (
            _SweepBar(id="bar", clock=self._clock, bar_renderable=self.BAR_RENDERABLE)
            .data_bind(ProgressBar.percentage)
            .data_bind(ProgressBar.gradient)
        )

    def sweep(self) -> None:
        """Move a bar without a total on to where the sweep is now (nothing for any other bar)."""
        if self.percentage is None:
            self.query_one(_SweepBar).refresh()

    def _on_mount(self, event: events.Mount) -> None:
        # ProgressBar's on_mount is this, plus a 1 s interval of update() for the ETA: skipped (Textual
        # calls each class's handler up the MRO until one prevents the default), the rest done here and
        # the handlers above ProgressBar called as Textual would.
        event.prevent_default()
        self.update()
        self._clock.reset()
        super(ProgressBar, self)._on_mount(event)
