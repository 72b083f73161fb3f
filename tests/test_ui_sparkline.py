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


def aligned_reference(series: list[float], points: int, width: int, scale: float) -> list[float]:
    """Columns at fixed places in time, the plain way: of the whole series ever taken (only its last
    ``points`` still held), column b holds samples b*per … b*per+per-1; the newest column is the one the
    last sample fell in."""
    per = -(-points // width)
    held = {i: min(v, scale) for i, v in enumerate(series)}
    for i in range(len(series) - points):
        held.pop(i, None)
    newest = (len(series) - 1) // per if series else 0
    out = []
    for b in range(newest - width + 1, newest + 1):
        got = [held[i] for i in range(b * per, b * per + per) if i in held]
        out.append(max(got) if got else 0.0)
    return out


@pytest.mark.parametrize("width", [30, 47, 120, 180])
async def test_aligned_columns_are_fixed_places_in_time(width: int) -> None:
    rng = random.Random(width)
    app = One(width)
    async with app.run_test(size=(width, 8)) as pilot:
        spark = app.query_one(ScaledSparkline)
        series: list[float] = []
        for _ in range(400):
            series.append(rng.uniform(0, 130))
            spark.show(series[-spark.points:], end=len(series))
            if len(series) in (1, 2, 5, 119, 120, 121, 241, 399, 400):
                await pilot.pause()
                assert list(spark._aligned_columns(width)) == aligned_reference(series, spark.points, width,
                                                                                spark.scale), len(series)


async def test_aligned_chart_holds_still_until_a_column_changes() -> None:
    """Four samples a column (120 points over 30): a sample below its column's maximum asks for no
    repaint; one above it, or the first of a new column (the chart moves on by one), does."""
    app = One(30)
    async with app.run_test(size=(30, 8)) as pilot:
        spark = app.query_one(ScaledSparkline)
        series = [50.0] * 200   # 200 = 50 columns of 4: the next sample starts column 50
        spark.show(series[-120:], end=len(series))
        await pilot.pause()
        spark._prepare()
        calls: list[Any] = []
        original = spark.refresh
        spark.refresh = lambda *a, **k: calls.append(a) or original(*a, **k)  # type: ignore[method-assign]

        def add(value: float) -> None:
            series.append(value)
            spark.show(series[-120:], end=len(series))
            spark._prepare()   # as a frame would draw it

        add(40.0)                    # a new column begins: the chart moves on
        assert len(calls) == 1
        add(30.0)                    # below its column's maximum (40): nothing to draw
        add(40.0)
        assert len(calls) == 1
        add(45.0)                    # above it: the newest column grows
        assert len(calls) == 2
        add(10.0)                    # the next column begins
        assert len(calls) == 3


def test_aligned_columns_are_each_buckets_maximum() -> None:
    """The one-comprehension cut equals the definition, sample by sample: column ``b`` of the window is the
    maximum of the samples held whose place in the series lies in ``[b·per, (b+1)·per)``, 0 without any."""
    rng = random.Random(18)
    for _ in range(3000):
        points, width = rng.choice((10, 60, 120, 300)), rng.randint(1, 80)
        held = rng.randint(0, points)
        end = held + (rng.randint(0, 500) if rng.random() < 0.8 else 0)
        spark = ScaledSparkline(100.0, points=points)
        spark._values = tuple(rng.random() * 100 for _ in range(held))
        spark._end = end
        per = max(1, -(-points // width))
        newest = (end - 1) // per if end > 0 else 0
        first = end - held
        expected = []
        for b in range(newest - width + 1, newest + 1):
            inside = [spark._values[i - first] for i in range(b * per, (b + 1) * per) if first <= i < end]
            expected.append(max(inside, default=0.0))
        assert spark._aligned_columns(width) == tuple(expected), (points, width, held, end)
