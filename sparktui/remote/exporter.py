"""The Prometheus exporter: a custom collector over ``ExportState`` (what the event stream said last)
and the newest bench sweep, served by ``prometheus_client``'s own HTTP server on its own registry.

No global metrics: every scrape builds its families from the latest state, so a node that went away
or a stage that has not run yet is simply absent (never a stale or made-up 0). Names and labels are
listed in docs/serving.md ("Prometheus export") and in ``METRICS`` below.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from sparktui.domain.bench import BenchRecord
from sparktui.domain.events import EngineState
from sparktui.domain.export_state import ExportState
from sparktui.domain.telemetry import is_error_counter

#: name → (type, labels, help): the documented surface.
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "sparktui_node_up": ("gauge", ("node",), "1 while the node's SSH link is connected"),
    "sparktui_node_memory_total_bytes": ("gauge", ("node",), "memory (unified on a Spark) total"),
    "sparktui_node_memory_used_bytes": ("gauge", ("node",), "memory in use"),
    "sparktui_node_memory_available_bytes": ("gauge", ("node",), "memory available (MemAvailable)"),
    "sparktui_gpu_utilization_percent": ("gauge", ("node", "gpu"), "GPU utilisation"),
    "sparktui_gpu_temperature_celsius": ("gauge", ("node", "gpu"), "GPU temperature"),
    "sparktui_gpu_power_watts": ("gauge", ("node", "gpu"), "GPU power draw"),
    "sparktui_rdma_receive_bytes_per_second": ("gauge", ("node", "cable"), "RoCE receive rate"),
    "sparktui_rdma_transmit_bytes_per_second": ("gauge", ("node", "cable"), "RoCE transmit rate"),
    "sparktui_rdma_link_active": ("gauge", ("node", "cable"), "1 when a port of the cable is ACTIVE"),
    "sparktui_rdma_errors_total": ("counter", ("node", "device", "port", "counter"),
                                   "RDMA error counters as read from sysfs"),
    "sparktui_engine_state": ("gauge", ("state",), "1 for the engine's current state, 0 for the others"),
    "sparktui_engine_state_since_seconds": ("gauge", (), "epoch time the engine entered its state"),
    "sparktui_engine_stage_seconds": ("gauge", ("stage",),
                                      "duration of each start-up stage of the last start"),
    "sparktui_serving_generation_tokens_per_second": ("gauge", (), "generated tokens/s (vLLM /metrics)"),
    "sparktui_serving_requests_running": ("gauge", (), "requests running"),
    "sparktui_serving_kv_cache_usage_ratio": ("gauge", (), "KV-cache use, 0..1"),
    "sparktui_bench_output_tokens_per_second": ("gauge", ("concurrency",), "newest bench: output tok/s"),
    "sparktui_bench_requests_per_second": ("gauge", ("concurrency",), "newest bench: requests/s"),
    "sparktui_bench_ttft_seconds": ("gauge", ("concurrency", "quantile"), "newest bench: TTFT"),
    "sparktui_bench_itl_seconds": ("gauge", ("concurrency", "quantile"), "newest bench: inter-token latency"),
    "sparktui_bench_joules_per_token": ("gauge", ("concurrency", "node"),
                                        "newest bench: GPU energy per generated token (node=\"all\": total)"),
    "sparktui_bench_timestamp_seconds": ("gauge", ("model", "client"), "newest bench: when it started"),
}


def _family(name: str) -> GaugeMetricFamily | CounterMetricFamily:
    kind, labels, text = METRICS[name]
    # The counter family adds "_total" itself.
    if kind == "counter":
        return CounterMetricFamily(name.removesuffix("_total"), text, labels=list(labels))
    return GaugeMetricFamily(name, text, labels=list(labels))


class SparkCollector(Collector):
    def __init__(self, state: ExportState,
                 latest_bench: Callable[[], BenchRecord | None] | None = None) -> None:
        self.state = state
        self.latest_bench = latest_bench

    def collect(self) -> Iterator[Metric]:
        view = self.state.view()
        fams = {name: _family(name) for name in METRICS}

        def add(name: str, labels: list[str], value: float | None) -> None:
            if value is not None:
                fams[name].add_metric(labels, float(value))

        for node in view.nodes:
            add("sparktui_node_up", [node.name], 1.0 if node.link == "connected" else 0.0)
            s = node.sample
            if s is not None:
                add("sparktui_node_memory_total_bytes", [node.name], s.memory.total)
                add("sparktui_node_memory_used_bytes", [node.name], s.memory.used)
                add("sparktui_node_memory_available_bytes", [node.name], s.memory.available)
                for g in s.gpu.devices:
                    gpu = str(g.index)
                    add("sparktui_gpu_utilization_percent", [node.name, gpu], g.util_percent)
                    add("sparktui_gpu_temperature_celsius", [node.name, gpu], g.temperature_c)
                    add("sparktui_gpu_power_watts", [node.name, gpu], g.power_w)
                for p in s.rdma:
                    for group in (p.counters, p.hw_counters):
                        for counter, raw in group.items():
                            if raw is not None and is_error_counter(counter):
                                add("sparktui_rdma_errors_total",
                                    [node.name, p.device, str(p.port), counter], raw)
            if node.rates is not None:
                for c in node.rates.cables:
                    add("sparktui_rdma_receive_bytes_per_second", [node.name, c.name], c.rx_bytes_per_s)
                    add("sparktui_rdma_transmit_bytes_per_second", [node.name, c.name], c.tx_bytes_per_s)
                    add("sparktui_rdma_link_active", [node.name, c.name], 1.0 if c.active else 0.0)
        for state in EngineState:
            add("sparktui_engine_state", [state.value], 1.0 if state is view.engine_state else 0.0)
        add("sparktui_engine_state_since_seconds", [], view.engine_since)
        for stage, seconds in view.stage_seconds.items():
            add("sparktui_engine_stage_seconds", [stage], seconds)
        serving = view.serving
        if serving is not None:
            add("sparktui_serving_generation_tokens_per_second", [], serving.generation_tokens_per_s)
            add("sparktui_serving_requests_running", [], serving.requests_running)
            add("sparktui_serving_kv_cache_usage_ratio", [], serving.kv_cache_usage)
        bench = self.latest_bench() if self.latest_bench is not None else None
        if bench is not None:
            self.bench_series(bench, add)
        yield from fams.values()

    @staticmethod
    def bench_series(bench: BenchRecord, add: Callable[[str, list[str], float | None], None]) -> None:
        add("sparktui_bench_timestamp_seconds", [bench.model, bench.client], bench.started_at)
        for lv in bench.levels:
            if lv.depth:
                continue   # a profile's deeper contexts: the series stay one per concurrency (depth 0)
            c = str(lv.concurrency)
            add("sparktui_bench_output_tokens_per_second", [c], lv.output_tok_s)
            add("sparktui_bench_requests_per_second", [c], lv.requests_s)
            for q, ttft, itl in (("0.5", lv.ttft.p50, lv.itl.p50), ("0.95", lv.ttft.p95, lv.itl.p95),
                                 ("0.99", lv.ttft.p99, lv.itl.p99)):
                add("sparktui_bench_ttft_seconds", [c, q], ttft)
                add("sparktui_bench_itl_seconds", [c, q], itl)
            if lv.energy is not None:
                add("sparktui_bench_joules_per_token", [c, "all"], lv.energy.joules_per_token)
                for node in lv.energy.joules:
                    add("sparktui_bench_joules_per_token", [c, node], lv.energy.node_joules_per_token(node))


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9866`` for IPv6) → (host, port); raises ``ValueError`` with the fault."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


class Exporter:
    """``prometheus_client``'s HTTP server on its own thread, serving one registry with our collector."""

    def __init__(self, state: ExportState,
                 latest_bench: Callable[[], BenchRecord | None] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SparkCollector(state, latest_bench))
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen; returns the bound address (port 0 picks a free one)."""
        from prometheus_client import start_http_server

        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        bound = self._server.server_address
        return str(bound[0]), int(bound[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
