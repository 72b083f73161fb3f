"""vLLM ``/metrics`` text under the naming of several vLLM releases, written by ``prometheus_client`` itself.

Names, HELP texts, label names and bucket bounds are vLLM's (see tests/fixtures/metrics/README.md);
values come from an ``EngineLoad``. Tests use it to make successive scrapes (rates, quantile deltas,
resets); ``python tests/serving_profiles.py`` rewrites the static fixture files.

Dialects:
- ``new``:  0.12+ V1 (kv_cache_usage_perc, prefix_cache_*, inter_token_latency_seconds)
- ``both``: 0.10.2 V1 (old and new names side by side, same data)
- ``old``:  0.8.5 V1 (gpu_cache_usage_perc, gpu_prefix_cache_* in blocks, time_per_output_token_seconds)
- ``v0``:   0.6.3 V0 (``model_name`` label only, gpu_prefix_cache_hit_rate gauge, shorter bucket lists)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

TTFT_BUCKETS_OLD = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)
TTFT_BUCKETS = (*TTFT_BUCKETS_OLD, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS_OLD = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
TPOT_BUCKETS = (*TPOT_BUCKETS_OLD, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)

DIALECTS = ("new", "both", "old", "v0")


@dataclass
class EngineLoad:
    """Cumulative engine state at the time of a scrape."""

    model: str = "qwen3-32b"
    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    finished: int = 0
    preemptions: int = 0
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)


def exposition(dialect: str, load: EngineLoad) -> str:
    if dialect not in DIALECTS:
        raise ValueError(dialect)
    reg = CollectorRegistry()
    v0 = dialect == "v0"
    labels = ["model_name"] if v0 else ["model_name", "engine"]
    values = {"model_name": load.model} if v0 else {"model_name": load.model, "engine": "0"}

    def gauge(name: str, doc: str, value: float) -> None:
        Gauge(name, doc, labels, registry=reg).labels(**values).set(value)

    def counter(name: str, doc: str, value: float) -> None:
        Counter(name, doc, labels, registry=reg).labels(**values).inc(value)

    def histogram(name: str, doc: str, buckets: Sequence[float], observations: Sequence[float]) -> None:
        h = Histogram(name, doc, labels, buckets=buckets, registry=reg).labels(**values)
        for x in observations:
            h.observe(x)

    running_doc = ("Number of requests currently running on GPU." if v0
                   else "Number of requests in model execution batches.")
    gauge("vllm:num_requests_running", running_doc, load.running)
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", load.waiting)
    if v0:
        gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", 0)
    if dialect in ("new", "both"):
        gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", load.kv_usage)
    if dialect in ("both", "old", "v0"):
        doc = "GPU KV-cache usage. 1 means 100 percent usage."
        if dialect == "both":
            doc += "DEPRECATED: Use vllm:kv_cache_usage_perc instead."
        gauge("vllm:gpu_cache_usage_perc", doc, load.kv_usage)
    if v0:
        gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", 0.0)
        rate = load.prefix_hits / load.prefix_queries if load.prefix_queries else -1.0
        gauge("vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", rate)
    if dialect in ("new", "both"):
        counter("vllm:prefix_cache_queries",
                "Prefix cache queries, in terms of number of queried tokens.", load.prefix_queries)
        counter("vllm:prefix_cache_hits",
                "Prefix cache hits, in terms of number of cached tokens.", load.prefix_hits)
    if dialect == "both":
        counter("vllm:gpu_prefix_cache_queries",
                "GPU prefix cache queries, in terms of number of queriedtokens. "
                "DEPRECATED: Use vllm:prefix_cache_queries instead.", load.prefix_queries)
        counter("vllm:gpu_prefix_cache_hits",
                "GPU prefix cache hits, in terms of number of cached tokens. "
                "DEPRECATED: Use vllm:prefix_cache_hits instead.", load.prefix_hits)
    if dialect == "old":
        # 0.8.x counted blocks of 16 tokens here.
        counter("vllm:gpu_prefix_cache_queries",
                "GPU prefix cache queries, in terms of number of queried blocks.", load.prefix_queries // 16)
        counter("vllm:gpu_prefix_cache_hits",
                "GPU prefix cache hits, in terms of number of cached blocks.", load.prefix_hits // 16)
    counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", load.preemptions)
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.", load.prompt_tokens)
    counter("vllm:generation_tokens", "Number of generation tokens processed.", load.generation_tokens)
    success = Counter("vllm:request_success", "Count of successfully processed requests.",
                      [*labels, "finished_reason"], registry=reg)
    for reason in ("stop", "length", "abort"):
        success.labels(**values, finished_reason=reason).inc(load.finished if reason == "stop" else 0)
    histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              TTFT_BUCKETS_OLD if dialect == "v0" else TTFT_BUCKETS, load.ttft)
    if dialect in ("new", "both"):
        histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                  TPOT_BUCKETS, load.itl)
    if dialect in ("both", "old", "v0"):
        doc = "Histogram of time per output token in seconds."
        if dialect == "both":
            doc += "DEPRECATED: Use vllm:inter_token_latency_seconds instead."
        histogram("vllm:time_per_output_token_seconds", doc,
                  TPOT_BUCKETS_OLD if dialect == "v0" else TPOT_BUCKETS, load.itl)
    return generate_latest(reg).decode("utf-8")


def sample_load() -> EngineLoad:
    """The load the static fixtures show: 12 finished requests, one running."""
    return EngineLoad(
        running=1, waiting=2, kv_usage=0.0187, prompt_tokens=11890, generation_tokens=2415,
        prefix_queries=11890, prefix_hits=2816, finished=12,
        ttft=[0.09, 0.12, 0.15, 0.18, 0.2, 0.22, 0.3, 0.35, 0.4, 0.45, 0.6, 0.7],
        itl=[0.04] * 1446 + [0.06] * 957,
    )


FIXTURE_FILES = {"old": "vllm-0.8.5-v1.txt", "both": "vllm-0.10.2-v1.txt", "v0": "vllm-0.6.3-v0.txt"}

if __name__ == "__main__":
    here = Path(__file__).parent / "fixtures" / "metrics"
    for dialect, name in FIXTURE_FILES.items():
        (here / name).write_text(exposition(dialect, sample_load()))
        print("wrote", here / name)
