"""The main screen's compositor: a partial update renders only the widgets it can show.

Textual's compositor answers a partial update (the regions that changed since the last frame) by rendering
every widget whose *clip* overlaps the box around all of them. A widget's clip is its container's region, so
the screen's direct children (header, footer, log pane) clip to the whole screen and render in every frame,
and one frame that changes a node's readings (top left), a stage's bar (top right) and a log line (bottom)
boxes the whole screen and renders all ~70 widgets, the nine stage rows' labels included. Measured on the
test bed while a start streams, that was half the dashboard's CPU.

Here a widget renders only when its visible part (its region within its clip) overlaps one of the changed
regions themselves. That is exact, not an approximation: Textual writes out only the changed regions' cells
(the update's spans), a cell's winner is the front-most widget covering it, and every widget covering a
changed cell overlaps that changed region, so it is still rendered, in the same front-to-back order.
``tests/test_ui_compositor.py`` writes each frame of a start both ways and compares the bytes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip


class LeanCompositor(Compositor):
    #: The regions of the partial update being rendered (``render_partial_update`` clears Textual's copy).
    _update_regions: Collection[Region] = ()

    def render_partial_update(self) -> ChopsUpdate | None:
        self._update_regions = self._dirty_regions.copy()
        try:
            return super().render_partial_update()
        finally:
            self._update_regions = ()

    def _get_renders(self, crop: Region | None = None) -> Iterable[tuple[Region, Region, list[Strip]]]:
        changed = self._update_regions
        if crop is None or not changed:   # a full frame (first paint, resize): Textual's own way
            yield from super()._get_renders(crop)
            return
        for widget, (region, clip) in self.visible_widgets.items():
            visible = region.intersection(clip)
            if not (visible and crop.overlaps(visible) and any(visible.overlaps(r) for r in changed)):
                continue
            yield region, clip, widget.render_lines(visible.translate((-region.x, -region.y)))


class MainScreen(Screen[None]):
    """The dashboard's screen (``SparkApp.get_default_screen``), composited by ``LeanCompositor``."""

    def __init__(self) -> None:
        super().__init__(id="_default")
        self._compositor = LeanCompositor()
