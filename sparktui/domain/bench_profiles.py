"""``sparktui bench --profile NAME``: named sweeps, so that two benchmarks (here, or a Spark owner's
elsewhere) measure the same thing (pure).

* ``short``: the quick default (prompt 128, generate 64, concurrency 1 and 4, no context depth).
* ``smoke``: seconds long — does the engine serve at all, with and without context in front (prompt 64,
  generate 16, depths 0 and 1024, concurrency 1 and 2).
* ``llama-benchy``: the community's profile (Spark Arena benchmark profile v2, run with llama-benchy:
  https://github.com/spark-arena/recipe-registry/blob/main/benchmarking/spark-arena-v2.yaml): prompt 2048,
  generate 128, context depths 0, 4096, 8192, 16384, 32768, 65535 and 100000 tokens, concurrency 1/2/5/10.
  A depth is context in front of the prompt, so a level sends ``depth + 2048`` prompt tokens; depths that do
  not fit ``--max-model-len`` are left out and said. (Spark Arena runs its levels in a heat-aware order and
  with prefix caching; here depths run in ascending order, each level's requests with distinct prompts.)

Each level's decode speed for one stream (1 ÷ the median inter-token latency) is set against the decode
ceiling (``serve_plan.DecodeCeiling``): above 100 % means the measurement or the ceiling's inputs are wrong
(or speculative decoding is on, which emits more than one token per weight read).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparktui.domain.bench import BenchPlan, BenchRecord, LevelResult


@dataclass(frozen=True)
class BenchProfile:
    name: str
    summary: str
    input_len: int
    output_len: int
    concurrency: tuple[int, ...]
    depths: tuple[int, ...] = (0,)
    #: requests per level = rounds × concurrency
    rounds: int = 2
    warmup: int = 1

    def plans(self, max_model_len: int | None) -> tuple[list[tuple[int, BenchPlan]], list[str]]:
        """One plan per context depth that fits ``max_model_len``, and a sentence per depth left out."""
        plans, skipped = [], []
        for depth in self.depths:
            need = depth + self.input_len + self.output_len
            if max_model_len and need > max_model_len:
                skipped.append(f"depth {depth:,} left out: {need:,} tokens exceed --max-model-len "
                               f"{max_model_len:,}")
                continue
            plans.append((depth, BenchPlan(concurrency=self.concurrency, input_len=depth + self.input_len,
                                           output_len=self.output_len, rounds=self.rounds,
                                           warmup=self.warmup)))
        return plans, skipped


PROFILES: dict[str, BenchProfile] = {p.name: p for p in (
    BenchProfile("short", "prompt 128, generate 64, concurrency 1 and 4 (the quick default)",
                 128, 64, (1, 4), rounds=4),
    BenchProfile("smoke", "seconds long: prompt 64, generate 16, depths 0 and 1024, concurrency 1 and 2",
                 64, 16, (1, 2), depths=(0, 1024), rounds=2, warmup=0),
    BenchProfile("llama-benchy", "the community's (Spark Arena v2, llama-benchy): prompt 2048, generate 128, "
                 "depths 0 → 100k, concurrency 1/2/5/10", 2048, 128, (1, 2, 5, 10),
                 depths=(0, 4096, 8192, 16384, 32768, 65535, 100_000), rounds=1),
)}


def stream_tok_s(level: LevelResult) -> float | None:
    """One stream's decode speed: 1 ÷ the median inter-token latency."""
    return 1.0 / level.itl.p50 if level.itl.p50 else None


def ceiling_tok_s(ceiling: Mapping[str, Any] | None) -> float | None:
    """The ceiling's tok/s from its recorded form (``DecodeCeiling.to_json``); None when not recorded."""
    value = (ceiling or {}).get("tok_s")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def ceiling_percent(level: LevelResult, ceiling: Mapping[str, Any] | None) -> float | None:
    rate, top = stream_tok_s(level), ceiling_tok_s(ceiling)
    if rate is None or top is None:
        return None
    return 100.0 * rate / top


def depth_chart(record: BenchRecord, width: int = 30) -> list[str]:
    """Output tok/s per level as bars (one row per depth and concurrency), scaled to the fastest level."""
    rates = [(lv, lv.output_tok_s or 0.0) for lv in record.levels]
    top = max((r for _, r in rates), default=0.0)
    if top <= 0:
        return []
    out = []
    for lv, rate in sorted(rates, key=lambda x: (x[0].depth, x[0].concurrency)):
        bar = "█" * max(1, round(width * rate / top)) if rate else ""
        pct = ceiling_percent(lv, record.ceiling)
        tail = f"  {pct:.0f} % of the ceiling per stream" if pct is not None else ""
        out.append(f"depth {lv.depth:>7,} c={lv.concurrency:<3} {bar:<{width}} {rate:7.1f} tok/s{tail}")
    return out


def compare_records(a: BenchRecord, b: BenchRecord) -> list[str]:
    """``bench --compare A B``: what differs in their fingerprints, then each level both measured."""
    lines = []
    fa, fb = dict(a.fingerprint or {}), dict(b.fingerprint or {})
    for key in sorted(set(fa) | set(fb)):
        if key != "key" and fa.get(key) != fb.get(key):
            lines.append(f"{key}: {fa.get(key)!s} → {fb.get(key)!s}")
    if not lines:
        lines.append("same fingerprint" if fa else "no fingerprint on these runs (bench before profiles)")
    if (a.profile, a.input_len, a.output_len) != (b.profile, b.input_len, b.output_len):
        lines.append(f"other request shape: {a.profile or 'flags'} {a.input_len}/{a.output_len} → "
                     f"{b.profile or 'flags'} {b.input_len}/{b.output_len}")
    for lv in b.levels:
        before = a.level(lv.concurrency, lv.depth)
        now, then = lv.output_tok_s, before.output_tok_s if before else None
        if now is None or not then:
            continue
        where = f"c={lv.concurrency}" + (f", depth {lv.depth:,}" if lv.depth else "")
        change = round(100 * (now - then) / then)
        sign = "+" if change > 0 else "−" if change < 0 else "±"
        lines.append(f"{where}: {then:.1f} → {now:.1f} output tok/s ({sign}{abs(change)} %)")
    return lines


__all__ = ["PROFILES", "BenchProfile", "ceiling_percent", "compare_records", "depth_chart", "stream_tok_s"]
