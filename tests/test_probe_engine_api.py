"""The head's probe reads the engine's API beside it (``--engine-port``), and the dashboard's serving watch
reads those readings (``ProbedEngineApi``) instead of making requests of its own.

The server is a real loopback HTTP server answering recorded vLLM 0.33 ``/metrics``; the probe runs as
its own process, as on a node.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sparktui.domain.readiness import Health
from sparktui.domain.serving import WANTED_FAMILIES, SampleReader, sample_from_text
from sparktui.domain.telemetry import Sample
from sparktui.probe import EngineApiReader, only_families
from sparktui.remote.api_client import EngineApiError
from sparktui.remote.probed_api import ProbedEngineApi
from sparktui.remote.serving_watch import ServingWatch

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "sparktui" / "probe.py"
METRICS = (REPO / "tests" / "fixtures" / "metrics" / "vllm-0.33.0.txt").read_bytes()


class Api:
    """What the fake engine answers, and who asked (client ports: one kept-alive connection is one port)."""

    def __init__(self) -> None:
        self.health_status = 200
        self.hang = threading.Event()       # set: requests are read and never answered
        self.close_after_each = False
        self.clients: list[int] = []
        self.paths: list[str] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: Api

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        api = self.server.api     # type: ignore[attr-defined]
        api.clients.append(self.client_address[1])
        api.paths.append(self.path)
        if api.hang.is_set():
            time.sleep(3)
            return
        status, body = (api.health_status, b"") if self.path == "/health" else (200, METRICS)
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        if api.close_after_each:
            self.send_header("connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up on a hung request resets the connection: expected here, not a fault.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def api() -> Iterator[tuple[Api, int]]:
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = Api()
    server.api = state    # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, server.server_address[1]
    finally:
        state.hang.clear()
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def probe_lines(port: int, count: int, *extra: str) -> list[dict[str, Any]]:
    """``count`` samples 0.2 s apart of the probe, as a process, reading the API on ``port``."""
    proc = subprocess.run([sys.executable, str(PROBE), "--interval", "0.2", "--count", str(count),
                           "--no-containers", "--engine-port", str(port),
                           "--engine-families", ",".join(WANTED_FAMILIES), *extra],
                          capture_output=True, text=True, timeout=30, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


# ---- the probe's side ---------------------------------------------------------------------------------
def test_a_reading_holds_health_and_only_the_wanted_families_on_one_kept_alive_connection(
        api: tuple[Api, int]) -> None:
    state, port = api
    reader = EngineApiReader(port, WANTED_FAMILIES, timeout=2.0)
    first, second = reader.read(), reader.read()
    assert (first["id"], second["id"]) == (1, 2)
    assert first["health"]["status"] == 200 and first["health"]["error"] == ""
    assert first["stats"] is True
    text = first["metrics"]
    assert len(text) < len(METRICS) / 4, "the histograms the panel never shows stay on the node"
    assert text == only_families(METRICS.decode(), WANTED_FAMILIES)
    # What the panel reads from the wanted families is what it read from the whole scrape.
    assert SampleReader().read(text, first["stats"]) == sample_from_text(METRICS.decode())
    assert state.paths == ["/health", "/metrics", "/health", "/metrics"]
    assert len(set(state.clients)) == 1, "one connection for all four requests"


def test_a_server_that_closes_its_connections_is_read_on_a_new_one(api: tuple[Api, int]) -> None:
    state, port = api
    state.close_after_each = True
    reader = EngineApiReader(port, WANTED_FAMILIES, timeout=2.0)
    readings = [reader.read() for _ in range(3)]
    assert all(r["health"]["status"] == 200 and "metrics" in r for r in readings)
    assert len(set(state.clients)) == 6


def test_an_unhealthy_engine_is_not_scraped(api: tuple[Api, int]) -> None:
    state, port = api
    state.health_status = 503
    reading = EngineApiReader(port, WANTED_FAMILIES, timeout=2.0).read()
    assert reading["health"] == {"status": 503, "seconds": reading["health"]["seconds"], "error": "HTTP 503"}
    assert "metrics" not in reading and state.paths == ["/health"]


def test_nothing_listening_is_connection_refused() -> None:
    port = free_port()
    reading = EngineApiReader(port, WANTED_FAMILIES, timeout=2.0).read()
    assert reading["health"]["status"] is None
    assert reading["health"]["error"] == f"connection refused (http://127.0.0.1:{port}/health)"


def test_a_server_that_never_answers_times_out(api: tuple[Api, int]) -> None:
    state, port = api
    state.hang.set()
    reading = EngineApiReader(port, WANTED_FAMILIES, timeout=0.3).read()
    assert reading["health"]["status"] is None
    assert reading["health"]["error"] == f"timed out after 0.3s (http://127.0.0.1:{port}/health)"


def test_a_wedged_api_does_not_hold_back_the_nodes_own_samples(api: tuple[Api, int]) -> None:
    """The probe reads the API in a thread: its samples keep their pace while a request hangs."""
    state, port = api
    state.hang.set()
    t0 = time.monotonic()
    samples = probe_lines(port, 5, "--engine-timeout", "2")
    took = time.monotonic() - t0
    assert len(samples) == 5
    assert all(s["engine_api"] is None for s in samples), "no reading finished while the API hangs"
    assert took < 1.9, f"5 samples 0.2 s apart took {took:.1f}s"


def test_the_probes_samples_carry_its_readings(api: tuple[Api, int]) -> None:
    _, port = api
    samples = [Sample.from_json(line, received=0.0) for line in probe_lines(port, 4)]
    assert samples[0].engine_api is None, "the first sample goes out before the first reading"
    ids = [s.engine_api.id for s in samples[1:] if s.engine_api is not None]
    assert ids == sorted(ids) and ids[-1] >= 2
    last = samples[-1].engine_api
    assert last is not None and last.healthy and last.stats_enabled and last.metrics
    assert last.mono <= samples[-1].mono


def test_a_reading_of_a_foreign_shape_is_no_reading_and_keeps_the_sample() -> None:
    base = {"v": 1, "seq": 1, "mono": 5.0, "wall": 1.0}
    for junk in ("x", {"id": "?"}, {"id": 3, "health": "ok"}, [1, 2]):
        sample = Sample.from_json({**base, "engine_api": junk})
        assert sample.seq == 1
        if isinstance(junk, dict) and junk.get("id") == 3:
            assert sample.engine_api is not None and sample.engine_api.health_status is None
        else:
            assert sample.engine_api is None


# ---- the dashboard's side -------------------------------------------------------------------------------
def head_sample(reading_id: int, *, pid: int = 100, status: int | None = 200, began_ago: float = 0.0,
                received: float | None = None, metrics: str | None = None) -> Sample:
    received = time.monotonic() if received is None else received
    reading: dict[str, Any] = {"id": reading_id, "mono": 1000.0 - began_ago,
                               "health": {"status": status, "seconds": 0.002,
                                          "error": "" if status == 200 else "connection refused (x)"}}
    if status == 200:
        reading.update(metrics=metrics if metrics is not None else only_families(METRICS.decode(),
                                                                                  WANTED_FAMILIES),
                       stats=True)
    return Sample.from_json({"v": 1, "seq": reading_id, "mono": 1000.0, "wall": 1.0,
                             "probe": {"pid": pid}, "engine_api": reading}, received=received)


async def test_each_reading_is_taken_once_and_its_metrics_follow_its_health() -> None:
    source = ProbedEngineApi(wait_seconds=0.3)
    source.offer(head_sample(1))
    health = await source.health()
    assert health.ok and health.status == 200
    scrape = await source.metrics_scrape()
    assert scrape.stats_enabled is True and "vllm:num_requests_running" in scrape.text
    source.offer(head_sample(1))                 # the same reading again: the API has not answered since
    again = await source.health()
    assert not again.ok and "no /health reading from the head's probe in 0.3s" in again.error
    with pytest.raises(EngineApiError):
        await source.metrics_scrape()
    source.offer(head_sample(1, pid=101))        # a new probe process counts from 1 again
    assert (await source.health()).ok


async def test_a_reading_that_began_before_the_watch_is_left_out() -> None:
    """The seconds before the server came up said "connection refused"; they are not the watch's."""
    source = ProbedEngineApi(wait_seconds=0.3)
    source.offer(head_sample(1, status=None, began_ago=0.9, received=source.not_before + 0.5))
    source.offer(head_sample(2, began_ago=0.4, received=source.not_before + 0.5))
    health = await source.health()
    assert health.ok, health.error


async def test_the_watch_paced_by_readings_samples_and_then_declares_the_crash() -> None:
    source = ProbedEngineApi(wait_seconds=5.0)
    events: list[Any] = []

    async def next_reading(_: float) -> None:
        await asyncio.sleep(0)

    watch = ServingWatch(source, ready_at=time.monotonic(), health_fail_seconds=0.3, interval=0.05,
                         sleep=next_reading)
    task = asyncio.create_task(watch.run(events.append))

    async def feed() -> None:
        for n in range(1, 4):
            source.offer(head_sample(n))
            await asyncio.sleep(0.05)
        for n in range(4, 30):
            source.offer(head_sample(n, status=None))
            await asyncio.sleep(0.05)

    feeder = asyncio.create_task(feed())
    crash = await asyncio.wait_for(task, 5)
    feeder.cancel()
    assert watch.stats.scrapes == 3 and watch.reader.parses == 1, "an unchanged scrape is parsed once"
    assert watch.last_verdict.health is Health.CRASHED
    assert "connection refused" in crash.describe()
