"""The engine panel's summary after ready names a slow start's slowest stage and its remedy on one line."""

from __future__ import annotations

from pathlib import Path

from sparktui.domain.events import StageView
from sparktui.domain.logs.timeline import timeline_from_bytes
from sparktui.ui.widgets.engine_panel import slow_start_line, stage_summary

PUBLIC = Path(__file__).parent / "public_logs"


def views(name: str) -> tuple[list[StageView], dict[str, object]]:
    snap = timeline_from_bytes((PUBLIC / name).read_bytes())
    return [StageView(s.name, s.name, s.status, s.seconds) for s in snap.stages], dict(snap.facts)


def test_a_slow_spark_load_gets_one_line_that_fits_80_columns() -> None:
    stages, facts = views("18-dgx-spark-gemma26-dflash-ready.log")   # 17.17 GiB in 120 s through mmap
    line = slow_start_line(facts)
    assert line == "slow: weights 2m00s at 0.14 GiB/s (~17s) → eager or fastsafetensors load"
    assert len(line) <= 78   # the panel's width at 80x24, less its border
    text = stage_summary(stages, line).plain.split("\n")
    assert text[0].startswith("ready after ") and text[-1] == line


def test_a_quick_start_keeps_the_summary_as_it_was() -> None:
    stages, facts = views("27-v0.19.1-ready.log")   # 7.1 GiB at 1.6 GiB/s, compile from the cache
    assert slow_start_line(facts) == ""
    assert "\n" not in stage_summary(stages, slow_start_line(facts)).plain
