"""Is the engine serving as fast as it should? Pure: snapshots and a clock in, a verdict out.

Two rules, each sustained for ``slow_seconds`` before it speaks (a burst, a long prompt or a scrape's
jitter is no slowdown):

- **throughput**: output tok/s below ``slow_ratio`` of the recipe's baseline at comparable load. The
  baseline is the last ``sparktui bench`` with the same model, image and flags (``baseline_from``); the
  load is comparable when the requests running are in the band of one of its concurrency levels (within a
  factor ``LOAD_BAND`` of it). Samples at another load say nothing and leave the count where it is; an idle
  engine ends it.
- **acceptance** (speculative decoding): the window's acceptance rate below ``1 - acceptance_drop`` of its
  early level (the drafted-token-weighted mean over the first ``early_seconds`` of drafting). A draft
  model whose weights are missing on one node halves the speed and logs nothing above debug level.

The verdict names the likely cause where evidence points at one (``Evidence``, gathered by the caller): an
acceptance drop (the draft model on one node), NCCL on sockets (the log's NCCL verdict), a GPU's clocks
held down (telemetry's clock events), a cold start (the slowdown began right after ready).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sparktui.domain.bench import BenchRecord
from sparktui.domain.bench_profiles import ceiling_tok_s
from sparktui.domain.pace_reading import PaceReading, SlowServing
from sparktui.domain.serving import ServingSnapshot

if TYPE_CHECKING:
    from sparktui.config import ServingConfig, SparkConfig

#: Requests running within this factor of a bench level's concurrency count as that level's load.
LOAD_BAND = 1.5


@dataclass(frozen=True)
class PaceSettings:
    """``[serving]`` ``slow_ratio``, ``slow_seconds``, ``acceptance_drop``, ``acceptance_early_seconds``."""

    slow_ratio: float = 0.8
    slow_seconds: float = 300.0
    acceptance_drop: float = 1.0 / 3.0
    early_seconds: float = 120.0
    #: a slowdown that began this soon after ready is put down to a cold start (nothing else to blame)
    cold_start_seconds: float = 180.0


def settings_from(serving: ServingConfig) -> PaceSettings:
    return PaceSettings(serving.slow_ratio, serving.slow_seconds, serving.acceptance_drop,
                        serving.acceptance_early_seconds)


@dataclass(frozen=True)
class Baseline:
    """Output tok/s by concurrency, of one benchmark."""

    levels: tuple[tuple[int, float], ...]     # (concurrency, output tok/s), by concurrency
    started_at: float                         # epoch seconds of the benchmark
    #: the decode ceiling for one stream the benchmark recorded (``serve_plan``); None: not counted
    ceiling_tok_s: float | None = None

    def level_for(self, running: float) -> tuple[int, float] | None:
        """The level whose load ``running`` requests match (the nearest on a log scale, within
        ``LOAD_BAND``); ``None`` at no comparable load."""
        if running <= 0 or not self.levels:
            return None
        conc, rate = min(self.levels, key=lambda lv: abs(math.log(running / lv[0])))
        return (conc, rate) if abs(math.log(running / conc)) <= math.log(LOAD_BAND) + 1e-9 else None

    def to_json(self) -> dict[str, Any]:
        return {"started_at": self.started_at,
                "levels": [{"concurrency": c, "output_tok_s": round(r, 2)} for c, r in self.levels],
                "ceiling_tok_s": self.ceiling_tok_s}


def baseline_from(history: Iterable[BenchRecord], model: str, image: str,
                  flags: Iterable[str]) -> Baseline | None:
    """The newest benchmark of the same model, image and flags with a measured level (the recipe's
    baseline: another image or other flags measure another engine)."""
    wanted = tuple(flags)
    same = [r for r in history if r.model == model and r.image == image and tuple(r.flags) == wanted]
    for record in sorted(same, key=lambda r: r.started_at, reverse=True):
        levels = tuple(sorted((lv.concurrency, rate) for lv in record.levels
                              if lv.completed and (rate := lv.output_tok_s)))
        if levels:
            return Baseline(levels, record.started_at, ceiling_tok_s(record.ceiling))
    return None


def baseline_for(config: SparkConfig, history: Iterable[BenchRecord]) -> Baseline | None:
    """:func:`baseline_from` for the engine the config starts (named as ``bench_record`` names it)."""
    engine = config.engine
    return baseline_from(history, engine.model, engine.image if engine.runtime == "docker" else "",
                         engine.extra_args)


@dataclass(frozen=True)
class Evidence:
    """What else is known while the engine serves (the caller reads it; empty: nothing known)."""

    #: the log's NCCL verdict when it is a warning (NCCL on sockets, one HCA only)
    nccl_warning: str | None = None
    #: node → the clock events its GPU reports now (thermal, power cap …), idle left out
    clock_events: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: seconds since the engine became ready
    served_seconds: float | None = None


class ServingPace:
    """Fed every serving snapshot with a monotonic ``now``."""

    def __init__(self, settings: PaceSettings | None = None, baseline: Baseline | None = None) -> None:
        self.settings = settings or PaceSettings()
        self.baseline = baseline
        self._slow_since: float | None = None       # throughput below the ratio since (comparable load)
        self._low_accept_since: float | None = None
        self._drafting_since: float | None = None
        self._early: tuple[float, float] = (0.0, 0.0)   # (accepted-rate × drafted, drafted) in the early span
        self._reported = False

    @property
    def early_acceptance(self) -> float | None:
        weighted, drafted = self._early
        return weighted / drafted if drafted > 0 else None

    def reset(self) -> None:
        """The engine restarted: the early acceptance level and any count start again."""
        self._slow_since = self._low_accept_since = self._drafting_since = None
        self._early = (0.0, 0.0)
        self._reported = False

    def observe(self, snap: ServingSnapshot, now: float,
                evidence: Callable[[], Evidence] | None = None) -> PaceReading:
        """Judge one snapshot; ``evidence`` is asked only when a rule holds (to name the cause)."""
        if snap.counter_reset:
            self.reset()
        ratio, level = self._throughput(snap, now)
        acceptance = self._acceptance(snap, now)
        early = self.early_acceptance
        slow: SlowServing | None = None
        if self._low_accept_since is not None and now - self._low_accept_since >= self.settings.slow_seconds:
            slow = SlowServing("acceptance", now - self._low_accept_since,
                               snap.generation_tokens_per_s if level is not None else None,
                               None if level is None else level[1], None if level is None else level[0],
                               acceptance, early)
        if self._slow_since is not None and now - self._slow_since >= self.settings.slow_seconds \
                and level is not None:
            slow = SlowServing("throughput", now - self._slow_since, snap.generation_tokens_per_s, level[1],
                               level[0], acceptance, early)
        stream = self._single_stream(snap)
        if slow is None:
            self._reported = False
            return PaceReading(None, False, ratio, early, *stream)
        began = now - slow.seconds
        known = evidence() if evidence is not None else Evidence()
        slow = _with_cause(slow, known, self._low_accept_since is not None,
                           known.served_seconds is not None
                           and known.served_seconds - (now - began) <= self.settings.cold_start_seconds)
        raised = not self._reported
        self._reported = True
        return PaceReading(slow, raised, ratio, early, *stream)

    def _single_stream(self, snap: ServingSnapshot) -> tuple[float | None, float | None]:
        """(one stream's decode rate, the ceiling) while a single request runs and the ceiling is known;
        the rate is 1 ÷ the window's ITL p50 (the stream's own pace, not the aggregate tok/s)."""
        ceiling = self.baseline.ceiling_tok_s if self.baseline is not None else None
        running, itl = snap.requests_running or 0.0, snap.itl.p50
        if ceiling is None or not 0 < running < 2 or not itl:
            return None, None
        return 1.0 / itl, ceiling

    def _throughput(self, snap: ServingSnapshot, now: float) -> tuple[float | None, tuple[int, float] | None]:
        running = snap.requests_running or 0.0
        rate = snap.generation_tokens_per_s
        if running <= 0:
            self._slow_since = None          # idle: nothing to compare, and a slowdown is no longer seen
            return None, None
        if self.baseline is None or rate is None:
            return None, None
        level = self.baseline.level_for(running)
        if level is None:
            return None, None                # another load: says nothing either way
        ratio = rate / level[1]
        if ratio < self.settings.slow_ratio:
            if self._slow_since is None:
                self._slow_since = now
        else:
            self._slow_since = None
        return ratio, level

    def _acceptance(self, snap: ServingSnapshot, now: float) -> float | None:
        spec = snap.spec
        if spec is None:
            if not snap.requests_running:
                self._low_accept_since = None    # idle: a drop must be seen again while drafting
            return None
        if self._drafting_since is None:
            self._drafting_since = now
        if now - self._drafting_since <= self.settings.early_seconds:
            weighted, drafted = self._early
            self._early = (weighted + spec.rate * spec.drafted_tokens, drafted + spec.drafted_tokens)
            return spec.rate
        early = self.early_acceptance
        if early is not None and spec.rate < early * (1.0 - self.settings.acceptance_drop):
            if self._low_accept_since is None:
                self._low_accept_since = now
        else:
            self._low_accept_since = None
        return spec.rate


def _with_cause(slow: SlowServing, evidence: Evidence, acceptance_low: bool, cold: bool) -> SlowServing:
    """The likely cause, strongest evidence first."""
    cause: str | None = None
    if acceptance_low:
        cause = ("speculative decoding's acceptance dropped: the draft model's files or settings differ on "
                 "a node (sparktui audit compares them)")
    elif evidence.nccl_warning:
        cause = evidence.nccl_warning
    elif evidence.clock_events:
        node, events = sorted(evidence.clock_events.items())[0]
        cause = f"{node}'s GPU clocks held down ({', '.join(events)})"
    elif cold:
        cause = "a cold start (caches and CUDA graphs still warming up)"
    return slow if cause is None else replace(slow, cause=cause)
