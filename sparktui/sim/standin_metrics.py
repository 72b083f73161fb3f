"""The stand-in engine's Prometheus registry, shaped like a real vLLM server's `/metrics`.

The metric families (names, HELP, types, label names, buckets, pre-created label children and their
order) are not written out here: they come from a template exposition per metric dialect under
``sparktui/assets/recorded/metrics``. ``new`` is vLLM 0.33.0's default set (``vllm:kv_cache_usage_perc``,
``vllm:prefix_cache_*``, ``vllm:inter_token_latency_seconds``); ``old`` is vLLM 0.8.5's V1 set
(``vllm:gpu_cache_usage_perc``, ``vllm:gpu_prefix_cache_*``, ``vllm:time_per_output_token_seconds``).
The live values are real ``prometheus_client`` metrics, so the wire format (``_total``/``_created``
families, float formatting, Content-Type) is exactly what vLLM's own library produces.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Summary,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)
from prometheus_client.parser import text_string_to_metric_families

from sparktui.sim.standin_spec import SpecDecode

Dialect = Literal["old", "new"]
DIALECTS: tuple[Dialect, ...] = ("old", "new")
TEMPLATE_FILES: dict[Dialect, str] = {"old": "vllm-0.8.5-v1-profile.prom", "new": "vllm-0.33.0-profile.prom"}
METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST

# Names whose meaning the stand-in drives, per dialect (the rest stay at their pre-created zeros).
_KV_USAGE = {"old": "vllm:gpu_cache_usage_perc", "new": "vllm:kv_cache_usage_perc"}
_PREFIX_QUERIES = {"old": "vllm:gpu_prefix_cache_queries", "new": "vllm:prefix_cache_queries"}
_PREFIX_HITS = {"old": "vllm:gpu_prefix_cache_hits", "new": "vllm:prefix_cache_hits"}
_ITL = {"old": "vllm:time_per_output_token_seconds", "new": "vllm:inter_token_latency_seconds"}
# Token-count histograms whose buckets vLLM derives from max_model_len (1-2-5 series, capped).
_TOKEN_HISTOGRAMS = {
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_max_num_generation_tokens",
    "vllm:request_params_max_tokens",
    "vllm:request_prefill_kv_computed_tokens",
}
_SKIPPED_PREFIXES = ("python_", "process_")


@dataclass(frozen=True)
class FinishedRequest:
    prompt_tokens: int
    generation_tokens: int
    max_tokens: int
    cached_prompt_tokens: int
    queue_seconds: float
    ttft_seconds: float
    itl_seconds: list[float]
    e2e_seconds: float
    finished_reason: str


def token_buckets(max_model_len: int) -> list[float]:
    """vLLM's ``build_1_2_5_buckets(max_model_len)``."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return out
            out.append(float(value))
        exponent += 1


class ServingMetrics:
    """Live vLLM-shaped metrics for one engine; thread-safe updates from the HTTP handlers."""

    def __init__(
        self,
        dialect: Dialect,
        model_name: str,
        max_model_len: int,
        cache_info: dict[str, str] | None = None,
    ) -> None:
        self.dialect = dialect
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._metrics: dict[str, Any] = {}
        self._base_labels = {"engine": "0", "model_name": model_name}
        process_collector.ProcessCollector(registry=self.registry)
        platform_collector.PlatformCollector(registry=self.registry)
        gc_collector.GCCollector(registry=self.registry)
        self._build(max_model_len, cache_info or {})
        self.running = 0
        self.waiting = 0
        #: Set by ``wedge()``: requests never finish (``standin_http`` holds them), tokens stop.
        self.wedged = threading.Event()
        #: Speculative decoding (``enable_spec``): each finished request's drafts are counted.
        self.spec: SpecDecode | None = None

    def enable_spec(self, spec: SpecDecode) -> None:
        """vLLM's ``vllm:spec_decode_*`` counters (V1, 0.8.5 on), per-position children pre-created."""
        self.spec = spec
        labels = ["engine", "model_name"]
        for name, doc in (("vllm:spec_decode_num_drafts", "Number of spec decoding drafts."),
                          ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens."),
                          ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")):
            self._metrics[name] = Counter(name, doc, labels, registry=self.registry)
            self._metrics[name].labels(**self._base_labels)
        name = "vllm:spec_decode_num_accepted_tokens_per_pos"
        self._metrics[name] = Counter(name, "Accepted tokens per draft position.", [*labels, "position"],
                                      registry=self.registry)
        for pos in range(spec.k):
            self._metrics[name].labels(**self._base_labels, position=str(pos))

    # -- construction -------------------------------------------------------------------------------
    def _build(self, max_model_len: int, cache_info: dict[str, str]) -> None:
        template = resources.files("sparktui").joinpath(
            "assets", "recorded", "metrics", TEMPLATE_FILES[self.dialect]
        )
        families = list(text_string_to_metric_families(template.read_text("utf-8")))
        known = {f.name for f in families}
        for fam in families:
            if fam.name.startswith(_SKIPPED_PREFIXES):
                continue
            if fam.name.endswith("_created") and fam.name.removesuffix("_created") in known:
                continue  # prometheus_client writes the *_created families itself
            labelnames = sorted({k for s in fam.samples for k in s.labels if k not in ("le", "quantile")})
            children = _children(fam.samples, labelnames)
            metric: Any
            if fam.type == "counter":
                metric = Counter(fam.name, fam.documentation, labelnames, registry=self.registry)
            elif fam.type == "gauge":
                metric = Gauge(fam.name, fam.documentation, labelnames, registry=self.registry)
            elif fam.type == "summary":
                metric = Summary(fam.name, fam.documentation, labelnames, registry=self.registry)
            elif fam.type == "histogram":
                buckets = sorted(
                    {
                        float(s.labels["le"])
                        for s in fam.samples
                        if "le" in s.labels and s.labels["le"] != "+Inf"
                    }
                )
                if fam.name in _TOKEN_HISTOGRAMS:
                    buckets = token_buckets(max_model_len)
                metric = Histogram(
                    fam.name, fam.documentation, labelnames, buckets=buckets, registry=self.registry
                )
            else:
                continue
            self._metrics[fam.name] = metric
            if fam.name == "vllm:cache_config_info":
                labels = {k: cache_info.get(k, v) for k, v in children[0].items()} if children else {}
                labels["engine"] = "0"
                metric.labels(**labels).set(1)
                continue
            if fam.name.startswith("http_"):
                continue  # created per handler as requests arrive, like the instrumentator does
            for child in children:
                child.update({k: v for k, v in self._base_labels.items() if k in child})
                if fam.type == "gauge" and fam.name == "vllm:engine_sleep_state":
                    metric.labels(**child).set(1 if child.get("sleep_state") == "awake" else 0)
                elif labelnames:
                    metric.labels(**child)  # pre-create at zero, as vLLM does

    # -- updates ------------------------------------------------------------------------------------
    def _labels(self, name: str, **extra: str) -> Any:
        metric = self._metrics.get(name)
        if metric is None:
            return None
        labelnames = metric._labelnames
        values = {k: v for k, v in {**self._base_labels, **extra}.items() if k in labelnames}
        return metric.labels(**values) if labelnames else metric

    def _inc(self, name: str, amount: float, **extra: str) -> None:
        child = self._labels(name, **extra)
        if child is not None and amount:
            child.inc(amount)

    def _observe(self, name: str, value: float, **extra: str) -> None:
        child = self._labels(name, **extra)
        if child is not None:
            child.observe(value)

    def _set(self, name: str, value: float, **extra: str) -> None:
        child = self._labels(name, **extra)
        if child is not None:
            child.set(value)

    def wedge(self) -> None:
        """The engine stops generating: one request stuck mid-generation, new ones held forever."""
        with self._lock:
            self.running += 1
            self._publish_load()
        self.wedged.set()

    def request_started(self) -> None:
        with self._lock:
            self.running += 1
            self._publish_load()

    def request_finished(self, req: FinishedRequest) -> None:
        with self._lock:
            self.running = max(0, self.running - 1)
            self._publish_load()
            d = self.dialect
            self._inc(_PREFIX_QUERIES[d], req.prompt_tokens)
            self._inc(_PREFIX_HITS[d], req.cached_prompt_tokens)
            self._inc("vllm:prompt_tokens", req.prompt_tokens)
            self._inc(
                "vllm:prompt_tokens_by_source",
                req.prompt_tokens - req.cached_prompt_tokens,
                source="local_compute",
            )
            self._inc("vllm:prompt_tokens_by_source", req.cached_prompt_tokens, source="local_cache_hit")
            self._inc("vllm:prompt_tokens_cached", req.cached_prompt_tokens)
            self._inc("vllm:prompt_tokens_cached_by_source", req.cached_prompt_tokens, source="device")
            self._inc("vllm:generation_tokens", req.generation_tokens)
            self._inc("vllm:request_success", 1, finished_reason=req.finished_reason)
            self._observe("vllm:request_prompt_tokens", req.prompt_tokens)
            self._observe("vllm:request_generation_tokens", req.generation_tokens)
            self._observe("vllm:request_max_num_generation_tokens", req.max_tokens)
            self._observe("vllm:request_params_max_tokens", req.max_tokens)
            self._observe("vllm:request_params_n", 1)
            self._observe(
                "vllm:request_prefill_kv_computed_tokens", req.prompt_tokens - req.cached_prompt_tokens
            )
            self._observe("vllm:iteration_tokens_total", req.prompt_tokens + 1)
            for _ in range(max(0, req.generation_tokens - 1)):
                self._observe("vllm:iteration_tokens_total", 1)
            self._observe("vllm:time_to_first_token_seconds", req.ttft_seconds)
            for itl in req.itl_seconds:
                self._observe(_ITL[d], itl)
            decode = sum(req.itl_seconds)
            if req.generation_tokens > 1:
                self._observe(
                    "vllm:request_time_per_output_token_seconds", decode / (req.generation_tokens - 1)
                )
            self._observe("vllm:e2e_request_latency_seconds", req.e2e_seconds)
            self._observe("vllm:request_queue_time_seconds", req.queue_seconds)
            self._observe("vllm:request_prefill_time_seconds", max(0.0, req.ttft_seconds - req.queue_seconds))
            self._observe("vllm:request_decode_time_seconds", decode)
            self._observe(
                "vllm:request_inference_time_seconds", max(0.0, req.e2e_seconds - req.queue_seconds)
            )
            self._observe("vllm:request_num_preemptions", 0)
            if self.spec is not None:
                counts = self.spec.finished(req.generation_tokens)
                self._inc("vllm:spec_decode_num_drafts", counts.drafts)
                self._inc("vllm:spec_decode_num_draft_tokens", counts.draft_tokens)
                self._inc("vllm:spec_decode_num_accepted_tokens", counts.accepted)
                for pos, n in enumerate(counts.per_position):
                    self._inc("vllm:spec_decode_num_accepted_tokens_per_pos", n, position=str(pos))

    def _publish_load(self) -> None:
        self._set("vllm:num_requests_running", self.running)
        self._set("vllm:num_requests_waiting", self.waiting)
        self._set("vllm:num_requests_waiting_by_reason", self.waiting, reason="capacity")
        # A running request holds a few KV blocks; enough to show movement on the dashboard.
        self._set(_KV_USAGE[self.dialect], min(1.0, 0.0187 * self.running))

    def http_request(
        self, handler: str, method: str, status: int, req_bytes: int, resp_bytes: int, seconds: float
    ) -> None:
        """prometheus-fastapi-instrumentator's families; vLLM excludes its health/metrics routes."""
        if handler in ("/metrics", "/health", "/load", "/ping", "/version", "/server_info"):
            return
        with self._lock:
            group = f"{status // 100}xx"
            self._labels("http_requests", handler=handler, method=method, status=group).inc()
            self._labels("http_request_size_bytes", handler=handler).observe(req_bytes)
            self._labels("http_response_size_bytes", handler=handler).observe(resp_bytes)
            self._labels("http_request_duration_highr_seconds").observe(seconds)
            self._labels("http_request_duration_seconds", handler=handler, method=method).observe(
                seconds
            )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _children(samples: list[Any], labelnames: list[str]) -> list[dict[str, str]]:
    """Distinct label sets (without ``le``) in the order the template shows them."""
    seen: list[dict[str, str]] = []
    for s in samples:
        if s.name.endswith("_created"):
            continue
        labels = {k: v for k, v in s.labels.items() if k in labelnames}
        if labels not in seen:
            seen.append(labels)
    return seen
