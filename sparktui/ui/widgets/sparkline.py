"""A sparkline on a fixed scale, drawn through the line API from strips kept until its data changes."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Sparkline

from sparktui.ui.state import HISTORY_POINTS

#: Eighths of a cell, lowest first (Textual's sparkline draws with the same blocks).
BARS = "▁▂▃▄▅▆▇█"


class ScaledSparkline(Sparkline):
    """A ``Sparkline`` on a fixed scale (0 to ``scale``) over a fixed window of ``points`` samples.

    Textual's sparkline scales to the data's own min and max, which turns 7.5 ± 0.01 GiB into a wall of
    full bars; here 0 and ``scale`` fix the range and the window is left-padded with zeros, so history
    scrolls in from the right as it fills. Drawn through ``render_line`` from strips built once per
    columns, size and colour: Textual's renderable summarises every bucket once per row and styles every
    cell separately, and the panels' sparklines were half of what an idle dashboard at ready spent its CPU
    on.

    Columns are cut one of two ways:

    * given ``end`` (how many samples the series has taken in all: ``Ring.end``), at fixed places in time:
      a column is ``ceil(points / width)`` consecutive samples counted from the first one ever, the newest
      column the one filling now. Between the moments a column fills, only the newest column can change
      (when a sample beats its maximum), so the chart holds still instead of every column's maximum moving
      as the window slides by one sample, and it is repainted only when a column changes;
    * without it, as Textual's own sparkline cuts the sliding window (its buckets, bars and colour blend:
      ``tests/test_ui_sparkline.py`` compares the two).
    """

    def __init__(self, scale: float, points: int = HISTORY_POINTS, **kwargs: Any) -> None:
        super().__init__([], **kwargs)
        self.scale = scale
        self.points = points
        self._values: tuple[float, ...] = ()
        self._end: int | None = None
        self._strips: tuple[tuple[Any, ...], list[Strip]] | None = None
        self._cuts: tuple[tuple[int, int], list[tuple[int, int]]] | None = None
        #: (width, columns) as ``show`` cut them last (aligned mode), so a frame does not cut them again.
        self._cut: tuple[int, tuple[float, ...]] | None = None
        #: Bar styles by value, for the colours in use: a sliding window brings back the same values.
        self._styles: tuple[tuple[Any, ...], dict[float, Style]] | None = None

    def show(self, values: Sequence[float], scale: float | None = None, end: int | None = None) -> None:
        """The series (oldest first; its last ``points`` are drawn) on 0 to ``scale``; ``end``: see above."""
        before = (self._values, self.scale, self._end)
        if scale:
            self.scale = scale
        tail = tuple(min(v, self.scale) for v in list(values)[-self.points:])
        self._end = end
        if end is None:
            # The two anchors of Textual's way (0 and the scale) take two places of the window.
            pad = (0.0,) * max(0, self.points - len(tail) - 2)
            self._values = (*pad, *tail)
            if (self._values, self.scale, self._end) != before:   # a new window or scale: one repaint
                self.refresh()
            return
        self._values = tail
        width = self.size.width
        self._cut = None
        if width <= 0:
            self.refresh()   # (not laid out yet: drawn when it is)
            return
        self._cut = (width, self._aligned_columns(width))
        # Against the columns and scale last drawn (the strips' key): a sample that changes none asks for
        # no repaint.
        if self._strips is None or self._strips[0][:2] != (self._cut[1], self.scale):
            self.refresh()

    def _aligned_columns(self, width: int) -> tuple[float, ...]:
        """The columns cut at fixed places in time (``show``'s ``end``): each the maximum of its samples
        still held, 0 where none is."""
        end = self._end or 0
        per = max(1, -(-self.points // width))   # (rounded up: all ``points`` shown, as the caption says)
        newest = (end - 1) // per if end > 0 else 0
        values = self._values
        # The window's first place as an index into ``values`` (negative: before its oldest sample). Each
        # column is one slice's maximum; slots before the oldest or past the newest sample are left out,
        # and a column without any is 0. (One comprehension: this runs for 3 charts a node a sample.)
        start = (newest - width + 1) * per - (end - len(values))
        return tuple(max(values[lo if lo > 0 else 0:lo + per if lo + per > 0 else 0], default=0.0)
                     for lo in range(start, start + width * per, per))

    def _sliding_columns(self, width: int) -> list[float]:
        """Each column's value: the bucket's maximum, buckets cut as Textual cuts them (the anchors sit in
        the window's first bucket but are never drawn)."""
        n = len(self._values) + 2
        if self._cuts is None or self._cuts[0] != (n, width):
            step = Fraction(n, width)
            cuts = [(int(step * b), int(step * (b + 1))) for b in range(width)]
            self._cuts = ((n, width), [(max(0, a - 2), max(0, b - 2)) for a, b in cuts if b > a])
        values = self._values
        buckets = [max(values[a:b]) if b > a else 0.0 for a, b in self._cuts[1]]
        # Fewer buckets than columns (a wide widget): a bucket repeats, as Textual's does.
        columns, index, per = [], 0.0, len(buckets) / width
        for _ in range(width):
            columns.append(buckets[int(index)])
            index += per
        return columns

    def render_lines(self, crop: Region) -> list[Strip]:
        self._prepare()   # once per frame; render_line then only indexes
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        if self._strips is None or not self._values:
            return super().render_line(y)
        strips = self._strips[1]
        return strips[y] if 0 <= y < len(strips) else Strip.blank(self.size.width, self.rich_style)

    def _prepare(self) -> None:
        width, height = self.size
        if not self._values or width <= 0 or height <= 0:
            self._strips = None
            return
        _, background = self.background_colors
        low = background + (self.get_component_styles("sparkline--min-color").color
                            if self.min_color is None else self.min_color)
        high = background + (self.get_component_styles("sparkline--max-color").color
                             if self.max_color is None else self.max_color)
        base = self.rich_style
        if self._end is None:
            columns: tuple[float, ...] = tuple(self._sliding_columns(width))
        else:
            cut = self._cut
            columns = cut[1] if cut is not None and cut[0] == width else self._aligned_columns(width)
        key = (columns, self.scale, width, height, low, high, base)
        if self._strips is None or self._strips[0] != key:
            self._strips = (key, self._draw(columns, height, low, high, base))

    def _draw(self, columns: Sequence[float], height: int, low: Color, high: Color,
              base: Style) -> list[Strip]:
        extent = self.scale or 1.0
        levels = len(BARS) * height - 1
        colours = (low, high, base, extent)
        if self._styles is None or self._styles[0] != colours:
            self._styles = (colours, {})
        styles = self._styles[1]
        bars: list[tuple[int, Style]] = []
        for value in columns:
            ratio = value / extent
            style = styles.get(value)
            if style is None:
                style = styles[value] = base + Style.from_color(low.blend(high, ratio).rich_color)
            bars.append((int(ratio * levels), style))
        if len(styles) > 4 * self.points:
            self._styles = None   # bounded: values that left the window are forgotten now and then
        blank = Segment(" ", base)
        rows = []
        for row in reversed(range(height)):
            bottom, top = row * len(BARS), (row + 1) * len(BARS)
            segments = [blank if level < bottom else
                        Segment("█" if level >= top else BARS[level % len(BARS)], style)
                        for level, style in bars]
            rows.append(Strip(Segment.simplify(segments), len(columns)))
        return rows
