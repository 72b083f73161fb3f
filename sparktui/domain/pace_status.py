"""What ``sparktui status`` can honestly say of the serving pace (pure).

"Slower than it should" (``serving_pace``) holds only after ``[serving] slow_seconds`` (5 min) of serving at a
comparable load; status reads ``/metrics`` for a couple of seconds, so it never gives that verdict: it says
who watches for it (the dashboard, ``sparktui supervise``), and what one short window shows — output tok/s
against the last benchmark at this load, one stream against the decode ceiling — with the bench's own
figures beside them.
"""

from __future__ import annotations

import time
from typing import Any

from sparktui.domain.pace_reading import PaceReading, minutes_text
from sparktui.domain.serving import ServingSnapshot
from sparktui.domain.serving_pace import Baseline, PaceSettings


def _bench_text(baseline: Baseline) -> str:
    when = time.strftime("%Y-%m-%d", time.localtime(baseline.started_at))
    levels = " · ".join(f"c={c} {rate:.1f}" for c, rate in baseline.levels)
    text = f"bench of {when}: {levels} tok/s"
    if baseline.ceiling_tok_s is not None:
        text += f"; ceiling {baseline.ceiling_tok_s:.0f} tok/s for one stream"
    return text


def pace_status(baseline: Baseline | None, settings: PaceSettings, snap: ServingSnapshot | None,
                reading: PaceReading | None) -> dict[str, Any]:
    """The report's ``pace``: ``verdict`` is always None here (it needs minutes), ``now`` the one window's
    reading when requests ran, ``text`` one line for people."""
    note = (f"a slowdown is judged over {minutes_text(settings.slow_seconds)} of serving at a comparable "
            "load: the dashboard and `sparktui supervise` watch for it")
    out: dict[str, Any] = {"verdict": None, "verdict_note": note,
                           "baseline": None if baseline is None else baseline.to_json(), "now": None,
                           "window_seconds": None if snap is None else round(snap.window_seconds, 1)}
    if baseline is None:
        out["text"] = ("serving pace: no benchmark of this engine (model, image, flags) to hold it against — "
                       "`sparktui bench` or b in the dashboard makes one")
        return out
    bench = _bench_text(baseline)
    running = None if snap is None else snap.requests_running
    if snap is None or not running or snap.generation_tokens_per_s is None or not snap.window_seconds:
        why = "no request running" if snap is not None and not running else "not measured"
        out["text"] = f"serving pace: {why} now; {bench}; {note}"
        return out
    out["now"] = {"requests_running": running, "output_tok_s": round(snap.generation_tokens_per_s, 2),
                  **(reading.to_json() if reading is not None else {})}
    phrases = reading.against() if reading is not None else []
    figures = " · ".join(phrases) if phrases else "no bench level at this load"
    out["text"] = (f"serving pace now: {snap.generation_tokens_per_s:.1f} tok/s with {running:.0f} running "
                   f"over {snap.window_seconds:.0f} s = {figures}; {bench}; {note}")
    return out


__all__ = ["pace_status"]
