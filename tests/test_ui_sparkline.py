"""The panels' sparkline draws through the line API what Textual's own sparkline draws for the same window
(the same bars, buckets and colour blend), and asks for no refresh when the window did not change."""

from __future__ import annotations

import random
from typing import Any

import pytest
from rich.console import Console
from textual.app import App, ComposeResult
from textual.renderables.sparkline import Sparkline as SparklineRenderable

from sparktui.ui.widgets.sparkline import ScaledSparkline


class One(App[None]):
    CSS = "ScaledSparkline { width: 1fr; height: 5; }"

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def compose(self) -> ComposeResult:
        yield ScaledSparkline(100.0, points=120, id="s")


class _Anchor(float):
    """Fixes the scale; never a bar of its own."""


def summary(bucket: Any) -> float:
    real = [v for v in bucket if not isinstance(v, _Anchor)]
    return max(real) if real else 0.0


def textual_rows(spark: ScaledSparkline, values: list[float]) -> list[list[tuple[str, Any]]]:
    """Textual's renderable on the window the old way built it: two anchors, zero padding, the values,
    and a summary that skips the anchors."""
    tail = [min(v, spark.scale) for v in values[-spark.points:]]
    pad = [0.0] * max(0, spark.points - len(tail) - 2)
    data = [_Anchor(0.0), _Anchor(spark.scale), *pad, *tail]
    _, background = spark.background_colors
    low = (background + spark.get_component_styles("sparkline--min-color").color).rich_color
    high = (background + spark.get_component_styles("sparkline--max-color").color).rich_color
    width, height = spark.size
    renderable = SparklineRenderable(data, width=width, height=height, min_color=low, max_color=high,
                                     summary_function=summary)
    console = Console(width=width, color_system="truecolor", legacy_windows=False)
    lines = console.render_lines(renderable, console.options.update(width=width, height=height), pad=False)
    return [[(s.text, s.style.color if s.style else None) for s in line] for line in lines]


def drawn_rows(spark: ScaledSparkline) -> list[list[tuple[str, Any]]]:
    rows = []
    for y in range(spark.size.height):
        strip = spark.render_line(y)
        rows.append([(s.text, s.style.color if s.style else None) for s in strip])
    return rows


def normalise(rows: list[list[tuple[str, Any]]]) -> list[list[tuple[str, Any]]]:
    """Per cell: the character, and its colour where a bar is drawn."""
    out = []
    for row in rows:
        cells = []
        for text, colour in row:
            for ch in text:
                cells.append((ch, colour if ch != " " else None))
        out.append(cells)
    return out


@pytest.mark.parametrize("width", [30, 61, 119, 180])
async def test_draws_what_textuals_sparkline_draws(width: int) -> None:
    rng = random.Random(width)
    app = One(width)
    async with app.run_test(size=(width, 8)) as pilot:
        spark = app.query_one(ScaledSparkline)
        for n in (1, 7, 118, 119, 120, 300):
            values = [rng.uniform(0, 130) for _ in range(n)]
            spark.show(values)
            await pilot.pause()
            spark._prepare()
            expected = normalise(textual_rows(spark, values))
            assert normalise(drawn_rows(spark)) == expected, (width, n)


async def test_an_unchanged_window_asks_for_no_refresh() -> None:
    app = One(40)
    async with app.run_test(size=(40, 8)) as pilot:
        spark = app.query_one(ScaledSparkline)
        spark.show([10.0, 20.0, 30.0])
        await pilot.pause()
        calls: list[Any] = []
        original = spark.refresh
        spark.refresh = lambda *a, **k: calls.append(a) or original(*a, **k)  # type: ignore[method-assign]
        spark.show([10.0, 20.0, 30.0])
        spark.show((10.0, 20.0, 30.0))
        assert calls == []
        spark.show([10.0, 20.0, 31.0])
        assert calls
        calls.clear()
        spark.show([10.0, 20.0, 31.0], scale=200.0)   # the same values on a new scale: bars change
        assert calls
