"""How long vLLM's API server waits for its engine to be ready, set from this setup's earlier starts.

vLLM's API server gives its engine core ``VLLM_ENGINE_READY_TIMEOUT_S`` (600 s by default) to load the
weights, compile and capture its graphs and answer the handshake; past it, it gives up and exits. A warm
two-node start of a big model on Sparks can take longer than that, and a supervisor restarting such a
model would then fail every time (field reports: a 156 GB model, fixed by setting 3600). So every start
sets it from the run history: the slowest of the recent starts of the same model and image that reached
ready, times a margin — never below vLLM's own default, and generous when there is no history yet.
A value the person set in ``engine.env`` always wins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.domain.history import RunRecord

#: vLLM's variable and its default.
ENV = "VLLM_ENGINE_READY_TIMEOUT_S"
VLLM_DEFAULT_SECONDS = 600
#: With no earlier start that reached ready: a 122B FP8 model's first start on two Sparks takes 10–15 min.
FIRST_START_SECONDS = 1800
#: The slowest recent start × this: a cold page cache or a compile cache miss can double a start.
MARGIN = 2.0
#: How many of the newest starts that reached ready are weighed.
RECENT = 5


@dataclass(frozen=True)
class ReadyTimeout:
    seconds: int
    #: Why this value, in words (shown with the start's plan).
    why: str

    def env(self) -> dict[str, str]:
        return {ENV: str(self.seconds)}


def start_seconds(run: RunRecord) -> float | None:
    """How long a start took to reach ready: its launch → ready, else the sum of its stages."""
    if run.ready_seconds is not None:
        return run.ready_seconds
    return sum(run.stages.values()) if run.stages else None


def engine_ready_timeout(runs: Sequence[RunRecord], engine_env: Mapping[str, str]) -> ReadyTimeout | None:
    """The timeout for the next start, from ``runs`` (earlier runs of the same model and image, oldest
    first); ``None`` when the person set it in ``engine.env`` (theirs reaches vLLM as it is)."""
    if ENV in engine_env:
        return None
    took = [s for s in (start_seconds(r) for r in runs if r.outcome == "ready") if s is not None][-RECENT:]
    if not took:
        return ReadyTimeout(FIRST_START_SECONDS, f"no earlier start reached ready: {FIRST_START_SECONDS} s")
    slowest = max(took)
    seconds = max(VLLM_DEFAULT_SECONDS, math.ceil(slowest * MARGIN))
    return ReadyTimeout(seconds, f"slowest of the last {len(took)} start(s) {slowest:.0f} s × {MARGIN:g}, "
                                 f"at least vLLM's {VLLM_DEFAULT_SECONDS} s")
