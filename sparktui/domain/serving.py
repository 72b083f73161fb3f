"""vLLM's ``/metrics`` turned into the serving panel's numbers.

Three layers, each pure:

1. ``parse_metrics(text)``: Prometheus text → ``ParsedMetrics`` (values summed over label sets), using
   ``prometheus_client``'s own parser so every exposition detail (escaping, ``+Inf``, e-notation, the
   ``_total``/``_created`` dance of counters) is handled the way the server's library wrote it.
2. ``resolve(parsed)``: version-tolerant name map → ``ServingSample`` with *canonical* names. vLLM renamed
   several metrics between releases (``gpu_cache_usage_perc`` → ``kv_cache_usage_perc``,
   ``gpu_prefix_cache_*`` → ``prefix_cache_*``, ``time_per_output_token_seconds`` →
   ``inter_token_latency_seconds``); some releases emit both, so the newest name wins and the two are
   never added.
3. ``ServingTracker.update(sample, at)``: rates and latency quantiles over a sliding window of scrapes
   (counter and histogram *deltas*, so the figures describe "now", not the server's lifetime), counter
   resets (engine restart), and history rings for sparklines → ``ServingSnapshot``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.parser import text_string_to_metric_families

from sparktui.probe import has_vllm_stats, only_families

if TYPE_CHECKING:
    from sparktui.domain.pace_reading import PaceReading

# ---- the version-tolerant name map ----------------------------------------------------------------
# Each canonical quantity lists its exposition names, newest first. Counter names are the family names
# prometheus_client reports (without ``_total``; its parser strips and re-adds the suffix, and accepts
# emulators that omit it).

GAUGE_NAMES: Mapping[str, tuple[str, ...]] = {
    "requests_running": ("vllm:num_requests_running",),
    "requests_waiting": ("vllm:num_requests_waiting",),
    # A fraction 0..1 in every version. Renamed in 0.9.2; the old name hidden in 0.11, gone in 0.12.
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    # V0 (≤0.7) only: a lifetime ratio, -1 when prefix caching is off.
    "prefix_cache_hit_rate_v0": ("vllm:gpu_prefix_cache_hit_rate",),
}

COUNTER_NAMES: Mapping[str, tuple[str, ...]] = {
    "prompt_tokens": ("vllm:prompt_tokens",),
    "generation_tokens": ("vllm:generation_tokens",),
    "requests_finished": ("vllm:request_success",),
    "preemptions": ("vllm:num_preemptions",),
    # Speculative decoding (``--speculative-config``): V1 from 0.8.5; V0 had the two token counters too.
    "spec_drafts": ("vllm:spec_decode_num_drafts",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens",),
}

#: Accepted tokens by draft position (label ``position``, "0".."k-1"), V1 from 0.8.5.
PER_POSITION_NAME = "vllm:spec_decode_num_accepted_tokens_per_pos"

#: Prefix-cache counters come in pairs: hits and queries must be read under the same naming, because
#: the old pair counted *blocks* (≤0.8) and the new one counts tokens.
PREFIX_CACHE_PAIRS: tuple[tuple[str, str], ...] = (
    ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries"),            # ≥0.9.2
    ("vllm:gpu_prefix_cache_hits", "vllm:gpu_prefix_cache_queries"),    # V1 0.7.3–0.11 (hidden in 0.11)
)

HISTOGRAM_NAMES: Mapping[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    # Same observations under both names; the new one from 0.10.2, the old one gone by 0.15.
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
}

#: Exposition names that newer releases replaced (as ``ServingSample.sources`` spells them).
LEGACY_NAMES: frozenset[str] = frozenset({
    "vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_hit_rate",
    "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total",
    "vllm:time_per_output_token_seconds",
})

#: Counters and histograms whose deltas the tracker uses (a decrease of any of them is a reset).
TRACKED_COUNTERS: tuple[str, ...] = (
    "prompt_tokens", "generation_tokens", "requests_finished", "preemptions",
    "prefix_cache_hits", "prefix_cache_queries", "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens",
)


# ---- layer 1: parsing -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Histogram:
    """A cumulative histogram summed over label sets: ``buckets`` are ``(le, count)`` sorted by ``le``,
    the last one ``le = inf``."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float

    def minus(self, earlier: Histogram) -> Histogram | None:
        """The observations made since ``earlier``; ``None`` if the two cannot be compared (bucket
        bounds changed, or counts went down: the server restarted)."""
        if [le for le, _ in self.buckets] != [le for le, _ in earlier.buckets]:
            return None
        deltas = tuple((le, c - c0) for (le, c), (_, c0) in zip(self.buckets, earlier.buckets, strict=True))
        if any(d < 0 for _, d in deltas) or self.count < earlier.count:
            return None
        return Histogram(deltas, self.count - earlier.count, self.sum - earlier.sum)


@dataclass(frozen=True)
class ParsedMetrics:
    """One scrape, with every family's samples aggregated over label sets.

    ``gauges`` keep one value per label set (KV usage wants the max over engines, counts want the sum);
    counters and histograms are summed (per engine, per finished reason, …).
    """

    gauges: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    counters: Mapping[str, float] = field(default_factory=dict)
    histograms: Mapping[str, Histogram] = field(default_factory=dict)

    #: False when no ``vllm:`` family is present: the server runs with ``--disable-log-stats``.
    stats_enabled: bool = True
    #: ``PER_POSITION_NAME`` by its ``position`` label (summed over engines)
    accepted_per_position: Mapping[int, float] = field(default_factory=dict)


class MetricsParseError(ValueError):
    """The ``/metrics`` body is not Prometheus text."""


def _le(value: str) -> float:
    return math.inf if value in ("+Inf", "Inf", "inf") else float(value)


def _add_position(per_position: dict[int, float], family: str, labels: Mapping[str, str],
                  value: float) -> None:
    if family == PER_POSITION_NAME and labels.get("position", "").isdigit():
        pos = int(labels["position"])
        per_position[pos] = per_position.get(pos, 0.0) + value


def parse_metrics(
    text: str, model_name: str | None = None, families: Iterable[str] | None = None, *,
    stats_enabled: bool | None = None,
) -> ParsedMetrics:
    """Parse Prometheus text. With ``model_name``, samples labelled with another model are left out;
    with ``families``, only families whose names start with one of those are parsed. ``stats_enabled``:
    already known of the whole scrape (``text`` then may be its wanted families only)."""
    if stats_enabled is None:
        stats_enabled = has_vllm_stats(text)
    if families is not None:
        text = only_families(text, tuple(families))
    gauges: dict[str, list[float]] = {}
    counters: dict[str, float] = {}
    hist_buckets: dict[str, dict[float, float]] = {}
    hist_count: dict[str, float] = {}
    hist_sum: dict[str, float] = {}
    per_position: dict[int, float] = {}
    try:
        metric_families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise MetricsParseError(f"not Prometheus text: {exc}") from exc
    for family in metric_families:
        for sample in family.samples:
            if model_name is not None and sample.labels.get("model_name", model_name) != model_name:
                continue
            name, value = sample.name, float(sample.value)
            kind = family.type
            if kind == "unknown":
                # No ``# TYPE`` line: guess from the suffix the way Prometheus conventions name things.
                if name.endswith("_total"):
                    base = name.removesuffix("_total")
                    counters[base] = counters.get(base, 0.0) + value
                    _add_position(per_position, base, sample.labels, value)
                else:
                    gauges.setdefault(name, []).append(value)
            elif kind == "counter":
                if name.endswith("_total"):
                    counters[family.name] = counters.get(family.name, 0.0) + value
                    _add_position(per_position, family.name, sample.labels, value)
            elif kind == "gauge":
                gauges.setdefault(family.name, []).append(value)
            elif kind == "histogram":
                base = family.name
                if name == base + "_bucket" and "le" in sample.labels:
                    bucket = hist_buckets.setdefault(base, {})
                    le = _le(sample.labels["le"])
                    bucket[le] = bucket.get(le, 0.0) + value
                elif name == base + "_count":
                    hist_count[base] = hist_count.get(base, 0.0) + value
                elif name == base + "_sum":
                    hist_sum[base] = hist_sum.get(base, 0.0) + value
            # summaries, info, stateset …: nothing the dashboard reads
    histograms = {
        base: Histogram(
            tuple(sorted(buckets.items())),
            hist_count.get(base, max(buckets.values(), default=0.0)),
            hist_sum.get(base, 0.0),
        )
        for base, buckets in hist_buckets.items()
        if buckets
    }
    return ParsedMetrics({k: tuple(v) for k, v in gauges.items()}, counters, histograms, stats_enabled,
                         per_position)


# ---- layer 2: canonical names ---------------------------------------------------------------------
@dataclass(frozen=True)
class ServingSample:
    """One scrape under canonical names; ``sources`` says which exposition name fed each one."""

    stats_enabled: bool
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None          # fraction 0..1 (max over engines)
    prefix_cache_hit_rate_v0: float | None = None  # V0 lifetime gauge; None when absent or disabled
    counters: Mapping[str, float] = field(default_factory=dict)
    histograms: Mapping[str, Histogram] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    #: accepted tokens at each draft position (speculative decoding), position 0 first
    spec_accepted_per_position: tuple[float, ...] = ()


def _first_present(names: Iterable[str], table: Mapping[str, object]) -> str | None:
    return next((n for n in names if n in table), None)


def resolve(parsed: ParsedMetrics) -> ServingSample:
    """Pick, for each canonical quantity, the newest exposition name present in this scrape."""
    sources: dict[str, str] = {}

    def gauge(canonical: str, combine: str = "sum") -> float | None:
        name = _first_present(GAUGE_NAMES[canonical], parsed.gauges)
        if name is None or not parsed.gauges[name]:
            return None
        sources[canonical] = name
        values = parsed.gauges[name]
        return max(values) if combine == "max" else sum(values)

    counters: dict[str, float] = {}
    for canonical, names in COUNTER_NAMES.items():
        name = _first_present(names, parsed.counters)
        if name is not None:
            counters[canonical] = parsed.counters[name]
            sources[canonical] = name + "_total"
    for hits, queries in PREFIX_CACHE_PAIRS:
        if hits in parsed.counters and queries in parsed.counters:
            counters["prefix_cache_hits"] = parsed.counters[hits]
            counters["prefix_cache_queries"] = parsed.counters[queries]
            sources["prefix_cache_hits"] = hits + "_total"
            sources["prefix_cache_queries"] = queries + "_total"
            break
    histograms: dict[str, Histogram] = {}
    for canonical, names in HISTOGRAM_NAMES.items():
        name = _first_present(names, parsed.histograms)
        if name is not None:
            histograms[canonical] = parsed.histograms[name]
            sources[canonical] = name
    v0_rate = gauge("prefix_cache_hit_rate_v0", "max")
    return ServingSample(
        stats_enabled=parsed.stats_enabled,
        requests_running=gauge("requests_running"),
        requests_waiting=gauge("requests_waiting"),
        kv_cache_usage=gauge("kv_cache_usage", "max"),
        prefix_cache_hit_rate_v0=v0_rate if v0_rate is not None and v0_rate >= 0 else None,
        counters=counters,
        histograms=histograms,
        sources=sources,
        spec_accepted_per_position=tuple(parsed.accepted_per_position.get(i, 0.0)
                                         for i in range(max(parsed.accepted_per_position, default=-1) + 1)),
    )


#: Every family the name map can read (prefixes: a histogram's ``_bucket``/``_sum`` lines match too).
WANTED_FAMILIES: tuple[str, ...] = tuple(sorted({
    *(n for names in GAUGE_NAMES.values() for n in names),
    *(n for names in COUNTER_NAMES.values() for n in names),
    *(n for pair in PREFIX_CACHE_PAIRS for n in pair),
    *(n for names in HISTOGRAM_NAMES.values() for n in names),
    PER_POSITION_NAME,
}))


def sample_from_text(text: str, model_name: str | None = None) -> ServingSample:
    """One ``/metrics`` body → canonical sample (parses only the families the panel uses)."""
    return resolve(parse_metrics(text, model_name, WANTED_FAMILIES))


@dataclass(frozen=True)
class MetricsScrape:
    """One ``/metrics`` answer: its text, whole (as the API sends it) or its wanted families only (as the
    head's probe sends them, with ``stats_enabled`` read from the whole scrape)."""

    text: str
    stats_enabled: bool | None = None


class SampleReader:
    """:func:`sample_from_text` for one scrape after another, parsed again only when the lines of the
    families the panel uses changed. An idle engine's scrape is the same every time but for the
    ``process_*`` and ``python_gc_*`` families, and the parse was most of what a scrape cost the dashboard
    (every two seconds, all day)."""

    def __init__(self, model_name: str | None = None) -> None:
        self.model_name = model_name
        self.parses = 0
        self._last: tuple[tuple[bool, str], ServingSample] | None = None

    def read(self, text: str, stats_enabled: bool | None = None) -> ServingSample:
        """:func:`sample_from_text` of ``text`` (the wanted families cut out once, for the comparison and
        the parse). With ``stats_enabled`` (known of the whole scrape), ``text`` is already the wanted
        families only, as the head's probe cuts them (``MetricsScrape``), and is not cut again."""
        if stats_enabled is None:
            key = (has_vllm_stats(text), only_families(text, WANTED_FAMILIES))
        else:
            key = (stats_enabled, text)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        sample = resolve(parse_metrics(key[1], self.model_name, stats_enabled=key[0]))
        self.parses += 1
        self._last = (key, sample)
        return sample


# ---- math -----------------------------------------------------------------------------------------
def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The ``q`` quantile of cumulative ``(le, count)`` buckets, linearly interpolated inside a bucket
    (PromQL's ``histogram_quantile``). ``None`` without observations. A quantile that falls in the
    ``+Inf`` bucket is reported as the largest finite bound (all a histogram can say)."""
    if not buckets or not 0.0 <= q <= 1.0:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank and count > prev_count:
            if math.isinf(le):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        if not math.isinf(le):
            prev_le = le
        prev_count = count
    return prev_le


def counter_rate(current: float | None, earlier: float | None, seconds: float) -> float | None:
    """Per-second increase; ``None`` when unknown or when the counter went down (a restart)."""
    if current is None or earlier is None or seconds <= 0 or current < earlier:
        return None
    return (current - earlier) / seconds


# ---- layer 3: the tracker -------------------------------------------------------------------------
@dataclass(frozen=True)
class LatencyQuantiles:
    """p50/p95 in seconds over the window, and how many observations they rest on (few = coarse)."""

    p50: float | None = None
    p95: float | None = None
    count: float = 0.0
    mean: float | None = None

    @staticmethod
    def of(hist: Histogram | None) -> LatencyQuantiles:
        if hist is None or hist.count <= 0:
            return LatencyQuantiles()
        return LatencyQuantiles(
            histogram_quantile(0.50, hist.buckets),
            histogram_quantile(0.95, hist.buckets),
            hist.count,
            hist.sum / hist.count,
        )


@dataclass(frozen=True)
class SpecAcceptance:
    """Speculative decoding over the window, from the ``vllm:spec_decode_*`` counters' deltas (vLLM's own
    definitions): ``rate`` = accepted ÷ drafted tokens; ``mean_length`` = 1 + accepted ÷ drafts (tokens per
    step, the bonus token included; ``None`` before V1, which has no drafts counter); ``per_position``: the
    share of drafts whose token at that position was accepted."""

    rate: float
    drafted_tokens: float
    mean_length: float | None = None
    per_position: tuple[float, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"acceptance_rate": round(self.rate, 4), "drafted_tokens": self.drafted_tokens,
                "mean_acceptance_length": None if self.mean_length is None else round(self.mean_length, 3),
                "per_position": [round(p, 4) for p in self.per_position]}


def spec_acceptance(current: ServingSample, base: ServingSample) -> SpecAcceptance | None:
    """The acceptance between two scrapes; ``None`` when nothing was drafted between them (idle, or no
    speculative decoding) or a counter went down."""
    def delta(name: str) -> float | None:
        now, then = current.counters.get(name), base.counters.get(name)
        return None if now is None or then is None or now < then else now - then

    drafted, accepted = delta("spec_draft_tokens"), delta("spec_accepted_tokens")
    if not drafted or accepted is None:
        return None
    drafts = delta("spec_drafts")
    per_position: tuple[float, ...] = ()
    now_pos, then_pos = current.spec_accepted_per_position, base.spec_accepted_per_position
    if drafts and len(now_pos) == len(then_pos):
        per_position = tuple(max(0.0, a - b) / drafts for a, b in zip(now_pos, then_pos, strict=True))
    return SpecAcceptance(min(1.0, accepted / drafted), drafted,
                          1.0 + accepted / drafts if drafts else None, per_position)


@dataclass(frozen=True)
class ServingHistory:
    """Recent values, oldest first, one per scrape, for sparklines (unknown values as 0.0)."""

    generation_tokens_per_s: tuple[float, ...] = ()
    prompt_tokens_per_s: tuple[float, ...] = ()
    kv_cache_usage: tuple[float, ...] = ()      # fraction 0..1
    requests_running: tuple[float, ...] = ()
    requests_waiting: tuple[float, ...] = ()
    ttft_p95: tuple[float, ...] = ()
    itl_p95: tuple[float, ...] = ()
    spec_acceptance_rate: tuple[float, ...] = ()   # fraction 0..1 (0.0: unknown or nothing drafted)


@dataclass(frozen=True)
class ServingSnapshot:
    """What the serving panel shows. ``None`` means "not known yet / not reported by this server"."""

    at: float                                    # wall-clock time of the scrape (epoch seconds)
    stats_enabled: bool = True                   # False: the server runs with --disable-log-stats
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None          # fraction 0..1
    prefix_cache_hit_rate: float | None = None   # fraction 0..1 over the window
    prefix_cache_hit_rate_lifetime: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    requests_per_s: float | None = None
    preemptions_per_s: float | None = None
    ttft: LatencyQuantiles = field(default_factory=LatencyQuantiles)
    itl: LatencyQuantiles = field(default_factory=LatencyQuantiles)
    window_seconds: float = 0.0                  # the span the rates and quantiles cover
    counter_reset: bool = False                  # counters went down since the last scrape (restart)
    #: Requests running but no generated token for this long (a wedged engine still answers /health).
    generation_stalled_seconds: float | None = None
    #: The counter itself (the wedge rule watches it stand still while requests are in).
    generation_tokens_total: float | None = None
    history: ServingHistory = field(default_factory=ServingHistory)
    #: speculative decoding's acceptance over the window (``None``: none, or nothing drafted in it)
    spec: SpecAcceptance | None = None
    #: output tok/s against the last benchmark, and "slower than it should" (set by the serving watch)
    pace: PaceReading | None = None
    #: canonical quantity → the exposition name it was read from (shows which vLLM naming is in use)
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def kv_cache_usage_percent(self) -> float | None:
        return None if self.kv_cache_usage is None else self.kv_cache_usage * 100.0

    @property
    def legacy_names(self) -> bool:
        """True when some figure came from a name newer vLLM releases renamed (an older server)."""
        return any(name in LEGACY_NAMES for name in self.sources.values())


class ServingTracker:
    """Turns successive scrapes into snapshots: window deltas, reset handling, history rings.

    ``window_seconds``: rates and quantiles are taken between the current scrape and the newest
    earlier one that is at least this old (or the oldest kept), because ``prompt_tokens_total`` jumps by
    a whole prompt at once and a single poll interval shows spikes.
    """

    def __init__(self, window_seconds: float = 20.0, history_length: int = 120) -> None:
        self.window_seconds = window_seconds
        self._window: deque[tuple[float, ServingSample]] = deque()
        self._rings: dict[str, deque[float]] = {
            name: deque(maxlen=history_length) for name in ServingHistory.__dataclass_fields__
        }
        self._last_generation: tuple[float, float] | None = None   # (tokens, since monotonic time)

    def reset(self) -> None:
        """Forget the window (the engine was restarted by us); history rings stay for context."""
        self._window.clear()
        self._last_generation = None

    @staticmethod
    def _is_reset(prev: ServingSample, cur: ServingSample) -> bool:
        # A quantity now read under another name (another vLLM behind the port): deltas mean nothing.
        if any(prev.sources[k] != cur.sources[k] for k in prev.sources.keys() & cur.sources.keys()):
            return True
        for name in TRACKED_COUNTERS:
            if name in cur.counters and cur.counters[name] < prev.counters.get(name, 0.0):
                return True
        for name, hist in cur.histograms.items():
            earlier = prev.histograms.get(name)
            if earlier is not None and hist.minus(earlier) is None:
                return True
        return False

    def update(self, sample: ServingSample, at: float, wall: float | None = None) -> ServingSnapshot:
        """Add one scrape taken at monotonic time ``at``; return the snapshot to show."""
        reset = bool(self._window) and self._is_reset(self._window[-1][1], sample)
        if reset:
            self._window.clear()
            self._last_generation = None
        self._window.append((at, sample))
        # Keep the newest scrape that is at least a window old as the base, drop anything older.
        while len(self._window) > 2 and at - self._window[1][0] >= self.window_seconds:
            self._window.popleft()
        base_at, base = self._window[0]
        span = at - base_at
        has_base = len(self._window) > 1 and span > 0

        def rate(name: str) -> float | None:
            if not has_base:
                return None
            return counter_rate(sample.counters.get(name), base.counters.get(name), span)

        def window_hist(name: str) -> Histogram | None:
            cur = sample.histograms.get(name)
            if cur is None or not has_base:
                return None
            earlier = base.histograms.get(name)
            return None if earlier is None else cur.minus(earlier)

        hits, queries = sample.counters.get("prefix_cache_hits"), sample.counters.get("prefix_cache_queries")
        hit_rate: float | None = sample.prefix_cache_hit_rate_v0
        lifetime: float | None = sample.prefix_cache_hit_rate_v0
        if hits is not None and queries is not None:
            lifetime = hits / queries if queries > 0 else None
            hit_rate = None
            base_hits = base.counters.get("prefix_cache_hits")
            base_queries = base.counters.get("prefix_cache_queries")
            if has_base and base_hits is not None and base_queries is not None and queries > base_queries:
                hit_rate = (hits - base_hits) / (queries - base_queries)

        snapshot = ServingSnapshot(
            at=time.time() if wall is None else wall,
            stats_enabled=sample.stats_enabled,
            requests_running=sample.requests_running,
            requests_waiting=sample.requests_waiting,
            kv_cache_usage=sample.kv_cache_usage,
            prefix_cache_hit_rate=hit_rate,
            prefix_cache_hit_rate_lifetime=lifetime,
            prompt_tokens_per_s=rate("prompt_tokens"),
            generation_tokens_per_s=rate("generation_tokens"),
            requests_per_s=rate("requests_finished"),
            preemptions_per_s=rate("preemptions"),
            ttft=LatencyQuantiles.of(window_hist("ttft")),
            itl=LatencyQuantiles.of(window_hist("itl")),
            window_seconds=span if has_base else 0.0,
            counter_reset=reset,
            generation_stalled_seconds=self._stall(sample, at),
            generation_tokens_total=sample.counters.get("generation_tokens"),
            spec=spec_acceptance(sample, base) if has_base else None,
            sources=dict(sample.sources),
        )
        return self._with_history(snapshot)

    def _stall(self, sample: ServingSample, at: float) -> float | None:
        tokens = sample.counters.get("generation_tokens")
        if tokens is None:
            return None
        if self._last_generation is None or tokens != self._last_generation[0]:
            self._last_generation = (tokens, at)
        if not sample.requests_running:
            return None
        return at - self._last_generation[1]

    def _with_history(self, s: ServingSnapshot) -> ServingSnapshot:
        values = {
            "generation_tokens_per_s": s.generation_tokens_per_s,
            "prompt_tokens_per_s": s.prompt_tokens_per_s,
            "kv_cache_usage": s.kv_cache_usage,
            "requests_running": s.requests_running,
            "requests_waiting": s.requests_waiting,
            "ttft_p95": s.ttft.p95,
            "itl_p95": s.itl.p95,
            "spec_acceptance_rate": None if s.spec is None else s.spec.rate,
        }
        for name, value in values.items():
            self._rings[name].append(0.0 if value is None else float(value))
        history = ServingHistory(**{name: tuple(ring) for name, ring in self._rings.items()})
        return dataclasses.replace(s, history=history)
