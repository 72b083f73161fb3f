"""The bench chart's pure parts (``sparktui.domain.bench_chart``) and its text at a width
(``sparktui.ui.screens.bench_chart.chart_text``): rows from bench records, the previous run of the same
fingerprint, the change, and the decode ceiling's percentage or why it is unknown."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sparktui.domain.bench import BenchRecord, LevelResult, Quantiles
from sparktui.domain.bench_chart import (
    ceiling_line,
    change_text,
    chart_of,
    latest_run,
    previous_run,
)
from sparktui.domain.pace_reading import ceiling_text
from sparktui.domain.serve_plan import DecodeCeiling
from sparktui.sim.demo_bench import demo_ceiling
from sparktui.ui.screens.bench_chart import chart_text

CEILING = demo_ceiling().to_json()


def level(c: int, tok_s: float, itl: float = 0.044, ttft: float = 0.18) -> LevelResult:
    return LevelResult(concurrency=c, requests=8, completed=8, failed=0, seconds=8 * 64 / tok_s,
                       output_tokens=8 * 64, input_tokens=8 * 128, ttft=Quantiles(ttft, count=8),
                       itl=Quantiles(itl, count=8 * 63))


def run(at: float, rates: dict[int, float], key: str = "abc", profile: str | None = None,
        ceiling: dict[str, Any] | None = CEILING) -> BenchRecord:
    return BenchRecord(started_at=at, model="/models/m", image="img", input_len=128, output_len=64,
                       levels=tuple(level(c, r) for c, r in rates.items()), client="builtin",
                       profile=profile, fingerprint={"key": key, "nodes": ["a", "b"], "tensor_parallel": 2},
                       ceiling=ceiling)


def test_rows_hold_this_run_against_the_previous_run_of_the_same_fingerprint() -> None:
    older = run(100.0, {1: 20.0, 4: 70.0})
    previous = run(200.0, {1: 22.0, 4: 80.0})
    other_setup = run(250.0, {1: 40.0, 4: 150.0}, key="other")
    other_profile = run(260.0, {1: 30.0}, profile="smoke")
    now = run(300.0, {4: 76.0, 1: 22.0})
    history = [older, previous, other_setup, other_profile, now]
    chart = chart_of(now, history)
    assert chart.previous is previous and chart.runs_of_setup == 3
    rows = [(r.concurrency, r.tok_s, r.previous_tok_s) for r in chart.rows]
    assert rows == [(1, 22.0, 22.0), (4, 76.0, 80.0)]
    assert round(chart.rows[1].change_percent or 0, 1) == -5.0
    assert chart.rows[0].ttft_p50 == 0.18 and chart.top_tok_s == 80.0
    assert chart.spread == (("c=1", 20.0, 22.0), ("c=4", 70.0, 80.0))   # over the 3 runs of the setup
    # One stream's decode (1 ÷ ITL p50 = 22.7 tok/s) against the recorded ceiling (47.2 tok/s).
    assert round(chart.rows[0].ceiling_percent or 0) == round(100 / 0.044 / CEILING["tok_s"])
    # A later run is never "the previous"; the first run of a setup has none.
    assert previous_run(older, history) is None
    assert chart_of(older, history).rows[0].previous_tok_s is None


def test_a_run_without_fingerprint_is_held_against_the_newest_comparable_one() -> None:
    old = replace(run(100.0, {1: 20.0}), fingerprint=None)
    new = replace(run(200.0, {1: 25.0}), fingerprint=None)
    assert previous_run(new, [old, new]) is old
    assert "no fingerprint" in chart_of(new, [old, new]).setup_line()


def test_latest_run_prefers_a_run_that_measured_something() -> None:
    empty = replace(run(300.0, {}), levels=())
    assert latest_run([run(100.0, {1: 20.0}), run(200.0, {1: 21.0}), empty]).started_at == 200.0
    assert latest_run([]) is None


def test_change_and_ceiling_texts() -> None:
    assert [change_text(c) for c in (4.4, -12.6, 0.2, None)] == ["+4 %", "−13 %", "±0 %", ""]
    assert ceiling_text(38.0, 55.0) == "69 % of ceiling 55"
    assert ceiling_text(38.0, None) == ceiling_text(None, 55.0) == ""


def test_ceiling_line_names_its_inputs_or_why_it_is_unknown() -> None:
    ceiling = DecodeCeiling(273.0, 10_000_000_000, 2, 1, 48, 30.0, "assumed: no linktest").to_json()
    line = ceiling_line(ceiling)
    assert line.startswith(f"decode ceiling {ceiling['tok_s']:.1f} tok/s for one stream: 273 GB/s ÷ 5.00 GB")
    assert "96 all-reduces × 30 µs (assumed)" in line
    assert ceiling_line(None).startswith("decode ceiling unknown: the model's config.json")


def test_chart_text_fits_its_width_and_says_what_is_unknown() -> None:
    now = run(300.0, {1: 21.0, 4: 71.0}, ceiling=None)
    chart = chart_of(now, [run(200.0, {1: 22.0, 4: 76.0}), now])
    for width in (76, 116):
        lines = chart_text(chart, width).plain.splitlines()
        assert max(len(line) for line in lines) <= width
        rows = [line for line in lines if line.startswith(("c=1", "c=4"))]
        assert len(rows) == 2 and "−7 %" in rows[1] and rows[1].rstrip().endswith("–")
    text = chart_text(chart, 76).plain
    assert "decode ceiling unknown" in text and "previous run of this setup" in text
