"""A sparkline on a fixed scale."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.widgets import Sparkline

from sparktui.ui.state import HISTORY_POINTS


class _Anchor(float):
    """A value that only fixes the sparkline's scale; never drawn as a bar of its own."""


def _ignore_anchors(values: Sequence[float]) -> float:
    real = [v for v in values if not isinstance(v, _Anchor)]
    return max(real) if real else 0.0


class ScaledSparkline(Sparkline):
    """A ``Sparkline`` on a fixed scale (0 to ``scale``) over a fixed window of ``points`` samples.

    Textual's sparkline scales to the data's own min and max, which turns 7.5 ± 0.01 GiB into a wall of
    full bars. Two anchor values (0 and ``scale``) fix the range, the summary function skips them, and the
    window is left-padded with zeros so history scrolls in from the right as it fills.
    """

    def __init__(self, scale: float, points: int = HISTORY_POINTS, **kwargs: Any) -> None:
        super().__init__([], summary_function=_ignore_anchors, **kwargs)
        self.scale = scale
        self.points = points

    def show(self, values: Sequence[float], scale: float | None = None) -> None:
        if scale:
            self.scale = scale
        tail = list(values)[-self.points :]
        pad = [0.0] * max(0, self.points - len(tail) - 2)
        self.data = [_Anchor(0.0), _Anchor(self.scale), *pad, *(min(v, self.scale) for v in tail)]
