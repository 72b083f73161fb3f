"""The Prometheus exporter: fed the event stream (recorded H200 samples, a RoCE port, a real vLLM start
timeline, a serving snapshot) and the newest bench sweep, scraped over HTTP and parsed back with
prometheus_client's own parser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.domain.addresses import is_loopback
from sparktui.domain.bench import BenchRecord, Energy, LevelResult, Quantiles
from sparktui.domain.engine_view import timeline_view
from sparktui.domain.events import EngineChanged, EngineState, NodeLinkChanged, ServingSampled
from sparktui.domain.export_state import ExportState
from sparktui.domain.logs import Timeline
from sparktui.domain.node_reading import NodeFeed
from sparktui.domain.serving import ServingSnapshot
from sparktui.domain.telemetry import Sample
from sparktui.remote.exporter import METRICS, Exporter, parse_listen

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"
RECORDED = Path(__file__).parents[1] / "sparktui" / "assets" / "recorded" / "logs"


def _samples() -> list[Sample]:
    out = []
    for i, line in enumerate((FIXTURES / "h200-nvml-stream.jsonl").read_text().splitlines()[22:25]):
        data = json.loads(line)
        data["rdma"] = [{"device": "rocep1s0f1", "port": 1, "state": "ACTIVE", "state_id": 4,
                         "rate_gbps": 200.0,
                         "counters": {"port_rcv_data": 1000 + i * 250_000_000, "port_xmit_data": 2000,
                                      "symbol_error": 3 + i},
                         "hw_counters": {"out_of_sequence": 7}}]
        out.append(Sample.from_json(data))
    return out


def _bench() -> BenchRecord:
    level = LevelResult(4, 16, 16, 0, 10.0, 352, 2048, Quantiles(0.08, 0.12, 0.2, 0.09, 16),
                        Quantiles(0.11, 0.13, 0.15, 0.11, 300),
                        Energy({"spark1": 700.0, "spark2": 708.0}, 352))
    return BenchRecord(1796000000.0, "/models/qwen", "img", (level,), 128, 64, "builtin")


@pytest.fixture
def scrape() -> Iterator[dict[str, dict[tuple[tuple[str, str], ...], float]]]:
    state = ExportState(("h200", "gone"))
    state(NodeLinkChanged("h200", "connected"))
    state(NodeLinkChanged("gone", "retrying"))
    feed = NodeFeed()
    for sample in _samples():
        state(feed.sampled("h200", sample))
    timeline = Timeline(expected_nodes=1)
    timeline.feed_text((RECORDED / "dgx-spark-gb10-qwen3.6-35b-a3b-ready_v0.19.2.txt").read_text())
    state(EngineChanged(EngineState.READY, "ready", timeline_view(timeline.snapshot()), "0.19.2"))
    state(ServingSampled(ServingSnapshot(at=0.0, requests_running=2.0, generation_tokens_per_s=35.5,
                                         kv_cache_usage=0.25)))
    exporter = Exporter(state, _bench)
    host, port = exporter.start("127.0.0.1", 0)
    try:
        text = httpx.get(f"http://{host}:{port}/metrics", timeout=10).text
    finally:
        exporter.stop()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    yield out


def test_node_telemetry(scrape: dict[str, dict[tuple[tuple[str, str], ...], float]]) -> None:
    assert scrape["sparktui_node_up"] == {(("node", "gone"),): 0.0, (("node", "h200"),): 1.0}
    assert scrape["sparktui_gpu_power_watts"] == {(("gpu", "0"), ("node", "h200")): 688.365}
    assert scrape["sparktui_gpu_utilization_percent"][(("gpu", "0"), ("node", "h200"))] == 99.0
    assert scrape["sparktui_node_memory_total_bytes"][(("node", "h200"),)] == 135148564480
    rx = scrape["sparktui_rdma_receive_bytes_per_second"][(("cable", "rocep1s0f1"), ("node", "h200"))]
    assert rx == pytest.approx(250_000_000 * 4 / 0.999995926)    # port_rcv_data counts 4-byte words
    assert scrape["sparktui_rdma_link_active"][(("cable", "rocep1s0f1"), ("node", "h200"))] == 1.0
    errors = scrape["sparktui_rdma_errors_total"]
    where = (("device", "rocep1s0f1"), ("node", "h200"), ("port", "1"))
    assert errors[(("counter", "symbol_error"), *where)] == 5
    assert errors[(("counter", "out_of_sequence"), *where)] == 7
    assert not any(k for k in errors if ("counter", "port_rcv_data") in k)   # traffic is not an error


def test_engine_serving_and_bench(scrape: dict[str, dict[tuple[tuple[str, str], ...], float]]) -> None:
    states = scrape["sparktui_engine_state"]
    assert states[(("state", "ready"),)] == 1.0
    assert sum(states.values()) == 1.0 and len(states) == len(EngineState)
    stages = scrape["sparktui_engine_stage_seconds"]
    assert {"weights", "kv_cache", "api"} <= {dict(k)["stage"] for k in stages}
    assert all(v >= 0 for v in stages.values())
    assert scrape["sparktui_serving_generation_tokens_per_second"][()] == 35.5
    assert scrape["sparktui_bench_output_tokens_per_second"][(("concurrency", "4"),)] == pytest.approx(35.2)
    assert scrape["sparktui_bench_ttft_seconds"][(("concurrency", "4"), ("quantile", "0.95"))] == 0.12
    jpt = scrape["sparktui_bench_joules_per_token"]
    assert jpt[(("concurrency", "4"), ("node", "all"))] == pytest.approx(4.0)
    assert jpt[(("concurrency", "4"), ("node", "spark1"))] == pytest.approx(700.0 / 352)


def test_every_served_name_is_documented(scrape: dict[str, dict[tuple[tuple[str, str], ...], float]]) -> None:
    doc = (Path(__file__).parents[1] / "docs" / "serving.md").read_text()
    for name in METRICS:
        assert f"`{name}`" in doc, name
    assert set(scrape) <= set(METRICS) | {"sparktui_rdma_errors_total"}


def test_listen_address() -> None:
    assert parse_listen("127.0.0.1:9866") == ("127.0.0.1", 9866)
    assert parse_listen("[::1]:9866") == ("::1", 9866)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    with pytest.raises(ValueError):
        parse_listen("9866x")


def test_sparktui_export_serves_the_cluster(tmp_path: Path) -> None:
    """The real verb: a local node (probe with the GB10 NVML double), scraped and parsed back."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.cli_helpers import REPO
    from tests.local_node import write_local_config

    config = write_local_config(tmp_path / "config.toml", "export-test")
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}
    env.update(PYTHONPATH=str(FIXTURES / "nvml"), SPARKTUI_PROBE_NVML_MODULE="gb10_pynvml",
               XDG_STATE_HOME=str(tmp_path / "xdg"))
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", "export", "--config", str(config),
                             "--listen", "127.0.0.1:0"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving Prometheus metrics on http://127.0.0.1:"), line
        url = line.split()[-1]
        deadline = time.monotonic() + 60
        names: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        while time.monotonic() < deadline:
            names = {}
            for family in text_string_to_metric_families(httpx.get(url, timeout=10).text):
                for s in family.samples:
                    names.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
            if "sparktui_gpu_power_watts" in names and names["sparktui_engine_state"].get(
                    (("state", "stopped"),)) == 1.0:
                break
            time.sleep(0.5)
        assert names["sparktui_node_up"] == {(("node", "local"),): 1.0}
        assert names["sparktui_gpu_power_watts"][(("gpu", "0"), ("node", "local"))] > 0
        assert names["sparktui_engine_state"][(("state", "stopped"),)] == 1.0
        assert "sparktui_bench_output_tokens_per_second" not in names   # no sweep yet: absent, not 0
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
