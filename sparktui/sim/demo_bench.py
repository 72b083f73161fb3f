"""The demo's benchmark (``b``) and its bench history (``B``): made-up runs of the demo's one setup
(``demo_story.STORY``), with figures in line with what the demo serves (ITL p50 44 ms → ~23 tok/s for one
stream) and the decode ceiling the issue's field notes give for Qwen3.5-122B-A10B FP8 on two Sparks at TP 2
(~10 GB of active weights per token, 5 GB a node at 273 GB/s, 96 all-reduces of ~30 µs: ~47 tok/s).

Nothing is measured and nothing is written to the real bench history: the history lives in this object.
"""

from __future__ import annotations

import asyncio
import random

from sparktui.domain.bench import BenchRecord, LevelResult, Quantiles
from sparktui.domain.bench_chart import BenchDone
from sparktui.domain.bench_fingerprint import Fingerprint
from sparktui.domain.serve_plan import ASSUMED_ALLREDUCE_US, GB10_BANDWIDTH_GBS, DecodeCeiling
from sparktui.sim.demo_story import ORIGIN, STORY

#: Qwen3.5-122B-A10B in FP8: ~10 GB of active weights read per token, 48 layers (field notes, issue 35).
ACTIVE_BYTES = 10_000_000_000
LAYERS = 48
#: The dashboard's quick sweep (``commands.bench.QUICK_PLAN``): 8 requests at c=1, then at c=4.
LEVELS = (1, 4)
INPUT_LEN, OUTPUT_LEN, REQUESTS = 128, 64, 8
#: One stream's inter-token latency at each level (seconds), as the demo's serving figures have it.
ITL = {1: 0.044, 4: 0.051}
TTFT = {1: 0.18, 4: 0.29}


def demo_fingerprint() -> Fingerprint:
    return Fingerprint(model=STORY.model, image=STORY.image, image_id="sha256:5d3f0c9a1b7e" + "0" * 52,
                       vllm_version=STORY.vllm_version, flags=(), nodes=STORY.nodes,
                       tensor_parallel=STORY.tensor_parallel_size,
                       pipeline_parallel=STORY.pipeline_parallel_size,
                       link="linktest 23.6 GB/s pass (all_reduce_perf, 2026-04-07)")


def demo_ceiling() -> DecodeCeiling:
    return DecodeCeiling(GB10_BANDWIDTH_GBS, ACTIVE_BYTES, STORY.tensor_parallel_size,
                         STORY.pipeline_parallel_size, LAYERS, ASSUMED_ALLREDUCE_US,
                         "assumed: no linktest measured the latency")


def demo_level(concurrency: int, speed: float) -> LevelResult:
    """One level of the quick sweep at ``speed`` × the demo's usual pace (each stream: TTFT, then
    ``OUTPUT_LEN - 1`` tokens ``ITL`` apart; the level's requests in rounds of ``concurrency``)."""
    itl, ttft = ITL[concurrency] / speed, TTFT[concurrency] / speed
    seconds = (REQUESTS // concurrency) * (ttft + (OUTPUT_LEN - 1) * itl)
    return LevelResult(
        concurrency=concurrency, requests=REQUESTS, completed=REQUESTS, failed=0, seconds=round(seconds, 3),
        output_tokens=REQUESTS * OUTPUT_LEN, input_tokens=REQUESTS * INPUT_LEN,
        ttft=Quantiles(ttft, ttft * 1.4, ttft * 1.6, ttft * 1.1, REQUESTS),
        itl=Quantiles(itl, itl * 1.2, itl * 1.5, itl * 1.05, REQUESTS * (OUTPUT_LEN - 1)))


def demo_record(started_at: float, speed: float) -> BenchRecord:
    return BenchRecord(started_at=started_at, model=STORY.model, image=STORY.image,
                       levels=tuple(demo_level(c, speed) for c in LEVELS), input_len=INPUT_LEN,
                       output_len=OUTPUT_LEN, client="builtin", vllm_version=STORY.vllm_version,
                       cluster="demo", fingerprint=demo_fingerprint().to_json(),
                       ceiling=demo_ceiling().to_json())


class DemoBench:
    """``run``: the demo's ``b`` (a second or two, unless ``instant``); ``history``: what ``B`` reads."""

    def __init__(self, seed: int = 7, instant: bool = False) -> None:
        self.rng = random.Random(seed + 2)
        self.instant = instant
        # Three earlier runs of the same setup, a day apart, the last a little faster than this one will be.
        self.records = [demo_record(ORIGIN - 86_400 * (3 - i), speed) for i, speed in
                        enumerate((0.93, 0.97, 1.04))]

    def history(self) -> list[BenchRecord]:
        return list(self.records)

    async def run(self, started_at: float) -> BenchDone:
        """A simulated sweep started at ``started_at`` (the demo's clock), saved in this history."""
        if not self.instant:
            await asyncio.sleep(1.5)
        record = demo_record(started_at, self.rng.uniform(0.95, 1.0))
        self.records.append(record)
        rates = " · ".join(f"c={lv.concurrency} {lv.output_tok_s or 0:.1f} tok/s" for lv in record.levels)
        return BenchDone(f"{rates} (simulated)", record)
