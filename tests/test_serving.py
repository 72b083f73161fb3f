"""Serving metrics math: parsing both vLLM namings, quantiles from buckets, rates, resets, hit rate."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparktui.domain.serving import (
    Histogram,
    MetricsParseError,
    SampleReader,
    ServingTracker,
    counter_rate,
    histogram_quantile,
    parse_metrics,
    resolve,
    sample_from_text,
)
from tests.serving_profiles import EngineLoad, exposition, sample_load

FIXTURES = Path(__file__).parent / "fixtures" / "metrics"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# ---- parsing and the name map ---------------------------------------------------------------------
def test_newest_naming_from_the_033_exposition() -> None:
    s = sample_from_text(fixture("vllm-0.33.0.txt"))
    assert s.stats_enabled
    assert s.requests_running == 1.0 and s.requests_waiting == 0.0
    assert s.kv_cache_usage == pytest.approx(0.0187)
    assert s.counters["prompt_tokens"] == 11890.0
    assert s.counters["prefix_cache_hits"] == 2816.0
    assert s.counters["prefix_cache_queries"] == 11890.0
    # request_success is summed over finished_reason
    assert s.counters["requests_finished"] == 12.0
    assert s.sources["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert s.sources["itl"] == "vllm:inter_token_latency_seconds"
    assert s.histograms["ttft"].count == 12.0
    assert s.histograms["ttft"].buckets[-1] == (math.inf, 12.0)
    assert len(s.histograms["ttft"].buckets) == 23   # 22 bounds + Inf, taken from the scrape


def test_older_v1_naming_is_mapped() -> None:
    s = sample_from_text(fixture("vllm-0.8.5-v1.txt"))
    assert s.kv_cache_usage == pytest.approx(0.0187)
    assert s.sources["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert s.sources["prefix_cache_hits"] == "vllm:gpu_prefix_cache_hits_total"
    assert s.sources["itl"] == "vllm:time_per_output_token_seconds"
    assert s.histograms["itl"].count == 2403.0
    assert s.requests_waiting == 2.0


def test_transition_release_prefers_new_names_and_never_adds_both() -> None:
    s = sample_from_text(fixture("vllm-0.10.2-v1.txt"))
    assert s.kv_cache_usage == pytest.approx(0.0187)   # not 2 × 0.0187
    assert s.sources["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert s.sources["prefix_cache_queries"] == "vllm:prefix_cache_queries_total"
    assert s.counters["prefix_cache_queries"] == 11890.0
    assert s.sources["itl"] == "vllm:inter_token_latency_seconds"
    assert s.histograms["itl"].count == 2403.0


def test_v0_naming_and_its_hit_rate_gauge() -> None:
    s = sample_from_text(fixture("vllm-0.6.3-v0.txt"))
    assert s.requests_running == 1.0
    assert s.prefix_cache_hit_rate_v0 == pytest.approx(2816 / 11890)
    assert "prefix_cache_hits" not in s.counters
    assert len(s.histograms["ttft"].buckets) == 17
    snap = ServingTracker().update(s, at=0.0)
    assert snap.prefix_cache_hit_rate == pytest.approx(2816 / 11890)


def test_v0_hit_rate_minus_one_means_prefix_caching_off() -> None:
    s = sample_from_text(exposition("v0", EngineLoad()))
    assert s.prefix_cache_hit_rate_v0 is None


def test_the_reader_reads_what_sample_from_text_reads() -> None:
    reader = SampleReader("qwen3-32b")
    texts = [exposition("new", sample_load()), exposition("v0", sample_load()),
             "# HELP process_open_fds x\n# TYPE process_open_fds gauge\nprocess_open_fds 9.0\n",
             "# HELP process_open_fds x\n# TYPE process_open_fds gauge\nprocess_open_fds 10.0\n"]
    for text in texts:
        assert reader.read(text) == sample_from_text(text, "qwen3-32b")
    assert reader.parses == 3   # the last scrape differs from the one before only outside the wanted families


def test_stats_disabled_when_no_vllm_family() -> None:
    text = "# HELP process_open_fds x\n# TYPE process_open_fds gauge\nprocess_open_fds 9.0\n"
    s = sample_from_text(text)
    assert not s.stats_enabled
    assert ServingTracker().update(s, 0.0).stats_enabled is False


def test_counter_without_total_suffix_as_some_emulators_send() -> None:
    text = ("# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits{engine=\"0\"} 5.0\n"
            "# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries{engine=\"0\"} 10.0\n")
    s = sample_from_text(text)
    assert s.counters["prefix_cache_hits"] == 5.0


def test_untyped_samples_are_guessed_by_suffix() -> None:
    s = sample_from_text("vllm:generation_tokens_total 42\nvllm:num_requests_running 3\n")
    assert s.counters["generation_tokens"] == 42.0
    assert s.requests_running == 3.0


def test_values_sum_over_engines_and_kv_usage_takes_the_max() -> None:
    text = "\n".join([
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 2.0',
        'vllm:num_requests_running{engine="1",model_name="m"} 3.0',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5',
        "# TYPE vllm:generation_tokens counter",
        'vllm:generation_tokens_total{engine="0",model_name="m"} 10.0',
        'vllm:generation_tokens_total{engine="1",model_name="m"} 5.0',
        "",
    ])
    s = sample_from_text(text)
    assert s.requests_running == 5.0
    assert s.kv_cache_usage == 0.5
    assert s.counters["generation_tokens"] == 15.0


def test_model_filter() -> None:
    text = ("# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{model_name="a"} 2.0\nvllm:num_requests_running{model_name="b"} 7.0\n')
    assert sample_from_text(text, model_name="b").requests_running == 7.0


def test_histograms_sum_buckets_across_engines() -> None:
    text = "\n".join([
        "# TYPE h histogram",
        'h_bucket{engine="0",le="0.1"} 1.0', 'h_bucket{engine="0",le="+Inf"} 2.0',
        'h_count{engine="0"} 2.0', 'h_sum{engine="0"} 0.5',
        'h_bucket{engine="1",le="0.1"} 3.0', 'h_bucket{engine="1",le="+Inf"} 3.0',
        'h_count{engine="1"} 3.0', 'h_sum{engine="1"} 0.2', "",
    ])
    h = parse_metrics(text).histograms["h"]
    assert h.buckets == ((0.1, 4.0), (math.inf, 5.0))
    assert h.count == 5.0 and h.sum == pytest.approx(0.7)


def test_garbage_is_a_parse_error() -> None:
    with pytest.raises(MetricsParseError):
        parse_metrics("this is { not prometheus\n")


# ---- quantiles ------------------------------------------------------------------------------------
def test_quantile_interpolates_inside_a_bucket() -> None:
    buckets = [(0.1, 0.0), (0.2, 10.0), (0.4, 20.0), (math.inf, 20.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.2)
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.15)
    assert histogram_quantile(0.75, buckets) == pytest.approx(0.3)


def test_quantile_in_the_inf_bucket_reports_the_largest_bound() -> None:
    assert histogram_quantile(0.95, [(1.0, 1.0), (2.0, 1.0), (math.inf, 10.0)]) == 2.0


def test_quantile_without_observations() -> None:
    assert histogram_quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]) is None
    assert histogram_quantile(0.5, []) is None


def test_quantiles_of_the_033_sample() -> None:
    ttft = sample_from_text(fixture("vllm-0.33.0.txt")).histograms["ttft"]
    # 1 obs ≤0.1, 6 ≤0.25, 10 ≤0.5, 12 ≤0.75: the median (rank 6) is the 0.25 bound
    assert histogram_quantile(0.5, ttft.buckets) == pytest.approx(0.25)
    assert histogram_quantile(0.95, ttft.buckets) == pytest.approx(0.5 + 0.25 * (11.4 - 10) / 2)


@given(st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=1, max_size=200),
       st.floats(min_value=0.0, max_value=1.0))
def test_quantile_lies_within_the_bucket_of_the_true_quantile(values: list[float], q: float) -> None:
    bounds = [0.01, 0.1, 1.0, 10.0, math.inf]
    buckets = [(le, float(sum(v <= le for v in values))) for le in bounds]
    est = histogram_quantile(q, buckets)
    assert est is not None
    assert 0.0 <= est <= 10.0
    # monotone in q
    assert histogram_quantile(min(1.0, q + 0.1), buckets) >= est  # type: ignore[operator]


def test_histogram_minus_detects_resets_and_bucket_changes() -> None:
    a = Histogram(((0.1, 1.0), (math.inf, 2.0)), 2.0, 0.3)
    b = Histogram(((0.1, 4.0), (math.inf, 6.0)), 6.0, 1.0)
    d = b.minus(a)
    assert d is not None and d.buckets == ((0.1, 3.0), (math.inf, 4.0)) and d.count == 4.0
    assert a.minus(b) is None
    assert Histogram(((0.2, 4.0), (math.inf, 6.0)), 6.0, 1.0).minus(a) is None


def test_counter_rate() -> None:
    assert counter_rate(110.0, 100.0, 5.0) == 2.0
    assert counter_rate(5.0, 100.0, 5.0) is None      # reset
    assert counter_rate(5.0, None, 5.0) is None
    assert counter_rate(5.0, 1.0, 0.0) is None


# ---- the tracker ----------------------------------------------------------------------------------
def _load(**kw: object) -> EngineLoad:
    return EngineLoad(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("dialect", ["new", "both", "old"])
def test_rates_and_window_quantiles_in_every_naming(dialect: str) -> None:
    tracker = ServingTracker(window_seconds=10.0)
    first = _load(prompt_tokens=1000, generation_tokens=500, prefix_queries=1600, prefix_hits=320,
                  finished=3, ttft=[5.0] * 3, itl=[0.5] * 100)
    snap = tracker.update(resolve(parse_metrics(exposition(dialect, first))), at=100.0)
    assert snap.generation_tokens_per_s is None        # one scrape: no rate yet
    assert snap.ttft.p50 is None and snap.ttft.count == 0

    second = _load(running=2, waiting=1, kv_usage=0.4,
                   prompt_tokens=3000, generation_tokens=1500, prefix_queries=3200, prefix_hits=1120,
                   finished=7, ttft=[5.0] * 3 + [0.15] * 4, itl=[0.5] * 100 + [0.04] * 200)
    snap = tracker.update(resolve(parse_metrics(exposition(dialect, second))), at=110.0)
    assert snap.window_seconds == 10.0
    assert snap.prompt_tokens_per_s == pytest.approx(200.0)
    assert snap.generation_tokens_per_s == pytest.approx(100.0)
    assert snap.requests_per_s == pytest.approx(0.4)
    assert snap.requests_running == 2 and snap.requests_waiting == 1
    assert snap.kv_cache_usage_percent == pytest.approx(40.0)
    # The window only holds the 4 new TTFT observations (all 0.1 < x ≤ 0.25), not the old 5 s ones.
    assert snap.ttft.count == 4
    assert 0.1 < snap.ttft.p50 <= 0.25  # type: ignore[operator]
    assert 0.1 < snap.ttft.p95 <= 0.25  # type: ignore[operator]
    assert snap.itl.count == 200
    assert 0.025 < snap.itl.p95 <= 0.05  # type: ignore[operator]
    # 800 of 1600 queried tokens hit in the window (in blocks for "old": same ratio)
    assert snap.prefix_cache_hit_rate == pytest.approx(0.5)
    assert snap.prefix_cache_hit_rate_lifetime == pytest.approx(1120 / 3200)
    assert snap.history.generation_tokens_per_s == (0.0, 100.0)
    assert snap.legacy_names == (dialect == "old")
    assert snap.history.kv_cache_usage == (0.0, 0.4)


def test_counter_reset_restarts_the_window() -> None:
    tracker = ServingTracker(window_seconds=10.0)
    tracker.update(resolve(parse_metrics(exposition("new", _load(generation_tokens=5000)))), at=0.0)
    tracker.update(resolve(parse_metrics(exposition("new", _load(generation_tokens=6000)))), at=10.0)
    # the engine restarted: counters start from zero again
    snap = tracker.update(resolve(parse_metrics(exposition("new", _load(generation_tokens=50)))), at=20.0)
    assert snap.counter_reset
    assert snap.generation_tokens_per_s is None
    snap = tracker.update(resolve(parse_metrics(exposition("new", _load(generation_tokens=250)))), at=30.0)
    assert not snap.counter_reset
    assert snap.generation_tokens_per_s == pytest.approx(20.0)


def test_naming_change_is_a_reset() -> None:
    tracker = ServingTracker()
    tracker.update(resolve(parse_metrics(exposition("old", _load(generation_tokens=10)))), at=0.0)
    snap = tracker.update(resolve(parse_metrics(exposition("new", _load(generation_tokens=20)))), at=5.0)
    assert snap.counter_reset and snap.generation_tokens_per_s is None


def test_window_slides() -> None:
    tracker = ServingTracker(window_seconds=10.0)
    for i in range(10):
        # 100 tokens/s for the first 5 scrapes, then 10 tokens/s
        tokens = 100 * 2 * min(i, 4) + 10 * 2 * max(0, i - 4)
        snap = tracker.update(resolve(parse_metrics(exposition("new", _load(generation_tokens=tokens)))),
                              at=2.0 * i)
    assert snap.window_seconds == 10.0
    assert snap.generation_tokens_per_s == pytest.approx(10.0)
    assert len(snap.history.generation_tokens_per_s) == 10


def test_idle_window_has_no_hit_rate_or_quantiles() -> None:
    tracker = ServingTracker()
    load = _load(prefix_queries=100, prefix_hits=10, ttft=[0.1], itl=[0.05])
    tracker.update(resolve(parse_metrics(exposition("new", load))), at=0.0)
    snap = tracker.update(resolve(parse_metrics(exposition("new", load))), at=5.0)
    assert snap.prefix_cache_hit_rate is None
    assert snap.prefix_cache_hit_rate_lifetime == pytest.approx(0.1)
    assert snap.ttft.p50 is None and snap.ttft.count == 0
    assert snap.generation_tokens_per_s == 0.0


def test_stall_when_requests_run_but_no_token_comes() -> None:
    tracker = ServingTracker()
    tracker.update(resolve(parse_metrics(exposition("new", _load(running=1, generation_tokens=10)))), 0.0)
    tracker.update(resolve(parse_metrics(exposition("new", _load(running=1, generation_tokens=20)))), 5.0)
    snap = tracker.update(resolve(parse_metrics(exposition("new", _load(running=1, generation_tokens=20)))),
                          35.0)
    assert snap.generation_stalled_seconds == pytest.approx(30.0)
    snap = tracker.update(resolve(parse_metrics(exposition("new", _load(running=0, generation_tokens=20)))),
                          40.0)
    assert snap.generation_stalled_seconds is None


def test_fixture_sample_load_matches_the_033_sample_counts() -> None:
    # the generated older-naming fixtures carry the same load as the 0.33.0 exposition
    new = sample_from_text(fixture("vllm-0.33.0.txt"))
    old = sample_from_text(exposition("both", sample_load()))
    assert new.counters["prompt_tokens"] == old.counters["prompt_tokens"]
    assert new.histograms["itl"].count == old.histograms["itl"].count


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("vllm-*.txt")))
def test_parsing_only_the_wanted_families_reads_the_same_values(name: str) -> None:
    text = fixture(name)
    assert sample_from_text(text) == resolve(parse_metrics(text))


def test_a_family_that_appears_later_is_not_a_reset() -> None:
    # V0 created label children lazily: the first scrape can lack families that the next one has.
    tracker = ServingTracker()
    first = "# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total 10.0\n"
    tracker.update(sample_from_text(first), at=0.0)
    snap = tracker.update(sample_from_text(exposition("v0", _load(generation_tokens=30, ttft=[0.2]))), at=5.0)
    assert not snap.counter_reset
    assert snap.generation_tokens_per_s == pytest.approx(4.0)
    assert snap.ttft.count == 0          # no earlier histogram to subtract: no window quantile yet
