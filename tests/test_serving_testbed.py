"""After-ready serving against the stand-in engine on a test-bed host, reached through real SSH.

One host of its own (``srvhead``: real sshd in its own namespaces) runs a real Ray head with one
stand-in GPU; the stand-in engine (``python -m sparktui.sim.vllm_standin serve``) is started over the SSH
transport, and its API is reached only through an SSH port forward on that connection, as the dashboard
does. Covered: verify-ready with TTFT, ``/metrics`` in the older and the newer vLLM naming, the smoke
test, and a crash after ready turning into "crashed after …".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktui.domain.events import Event, ServingSampled
from sparktui.remote.api_client import EngineApi
from sparktui.remote.serving_watch import ServingWatch, verify_ready
from sparktui.remote.ssh import SSHTransport
from sparktui.remote.transport import RemoteProcess
from tests.testbed import Testbed, unavailable_reason

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

HOST = "srvhead"
RAY_PORT = 6390
SERVED = "standin"
READY_LINE = b"Application startup complete"
#: API ports on the test host: a new one per start, as a stopped stand-in may still hold its port briefly.
_PORTS = itertools.count(18000 + os.getpid() % 1000)
PYTHON = sys.executable
RAY = str(Path(sys.executable).parent / "ray")


@pytest.fixture(scope="module")
def ray_host() -> Iterator[Testbed]:
    """A one-host test bed with a Ray head that owns one (stand-in) GPU."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    bed = Testbed((HOST,)).up()
    try:
        ip = bed.ip(HOST)
        started = bed.exec(HOST, [
            "env", "RAY_USAGE_STATS_ENABLED=0", RAY, "start", "--head", f"--port={RAY_PORT}",
            f"--node-ip-address={ip}", "--num-gpus=1", "--num-cpus=2", "--disable-usage-stats",
            "--include-dashboard=false",
        ], timeout=120)
        if started.returncode != 0:
            pytest.fail(f"ray start failed: {started.stdout}\n{started.stderr}")
        yield bed
    finally:
        bed.teardown()


@dataclass
class RunningEngine:
    transport: SSHTransport
    process: RemoteProcess
    output: bytearray
    api: EngineApi
    ready_at: float
    port: int = 0          # the API port on the test host (the forward's local port differs)


StartEngine = Callable[..., Awaitable[RunningEngine]]


async def _collect(process: RemoteProcess, output: bytearray) -> None:
    async for chunk in process.chunks():
        output.extend(chunk)


@pytest.fixture
async def start_engine(ray_host: Testbed) -> AsyncIterator[StartEngine]:
    """``await start_engine(*stand-in flags, env={...})`` → a stand-in that logged "Application startup
    complete"."""
    node = ray_host.spark_config().node(HOST)
    transport = SSHTransport(node)
    await transport.connect()
    await transport.wait_connected(10)
    started: list[tuple[RunningEngine, asyncio.Task[None]]] = []

    async def start(*flags: str, env: dict[str, str] | None = None) -> RunningEngine:
        port = next(_PORTS)
        argv = [
            PYTHON, "-m", "sparktui.sim.vllm_standin", "serve", "/models/standin-model",
            "--served-model-name", SERVED, "--tensor-parallel-size", "1",
            "--distributed-executor-backend", "ray", "--host", "0.0.0.0", "--port", str(port),
            "--standin-pace", "2", *flags,
        ]
        environ = {"RAY_ADDRESS": f"{ray_host.ip(HOST)}:{RAY_PORT}", "RAY_USAGE_STATS_ENABLED": "0",
                   "PYTHONUNBUFFERED": "1", **(env or {})}
        process = await transport.start(argv, env=environ)
        output = bytearray()
        reader = asyncio.create_task(_collect(process, output))
        deadline = time.monotonic() + 90
        while READY_LINE not in output:
            if reader.done() or time.monotonic() > deadline:
                process.terminate()
                tail = output[-3000:].decode("utf-8", "replace")
                stderr = await process.stderr_text() if reader.done() else ""
                pytest.fail(f"stand-in never became ready:\n{tail}\n{stderr}")
            await asyncio.sleep(0.1)
        ready_at = time.monotonic()
        api = await EngineApi.connect(transport, "127.0.0.1", port)
        engine = RunningEngine(transport, process, output, api, ready_at, port)
        started.append((engine, reader))
        return engine

    yield start
    for engine, reader in started:
        await engine.api.aclose()
        engine.process.terminate()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
    await transport.close()


@pytest.mark.parametrize("dialect", ["new", "old"])
async def test_verify_ready_and_metrics_in_both_namings(start_engine: StartEngine, dialect: str) -> None:
    engine = await start_engine("--standin-metrics-dialect", dialect)
    check = await verify_ready(engine.api, model=SERVED, retry_interval=0.2)
    assert check.ok, check.summary()
    assert check.model_ids[0] == SERVED
    assert check.ttft_seconds is not None and 0 < check.ttft_seconds < 10
    assert check.summary().startswith(f"{SERVED} answers, TTFT")

    events: list[Event] = []
    watch = ServingWatch(engine.api, ready_at=engine.ready_at, interval=0.3, window_seconds=2.0)
    task = asyncio.create_task(watch.run(events.append))
    try:
        await asyncio.sleep(0.5)
        smoke = await engine.api.smoke_test(SERVED, "Say hello in five words.", max_tokens=12)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            snaps = [e.snapshot for e in events if isinstance(e, ServingSampled)]
            if snaps and (snaps[-1].generation_tokens_per_s or 0) > 0 and snaps[-1].ttft.count > 0:
                break
            await asyncio.sleep(0.2)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert smoke.tokens == 12 and smoke.ttft_seconds is not None
    assert smoke.tokens_per_s is not None and smoke.tokens_per_s > 0
    assert smoke.first_words(2)

    snaps = [e.snapshot for e in events if isinstance(e, ServingSampled)]
    assert snaps, f"no snapshot; scrape errors: {watch.stats.last_scrape_error}"
    last = snaps[-1]
    assert last.stats_enabled
    assert last.kv_cache_usage is not None
    assert last.generation_tokens_per_s is not None and last.generation_tokens_per_s > 0
    assert last.ttft.count > 0 and last.ttft.p50 is not None
    expected_kv = "vllm:kv_cache_usage_perc" if dialect == "new" else "vllm:gpu_cache_usage_perc"
    expected_itl = ("vllm:inter_token_latency_seconds" if dialect == "new"
                    else "vllm:time_per_output_token_seconds")
    assert last.sources["kv_cache_usage"] == expected_kv
    assert last.sources["itl"] == expected_itl
    assert last.legacy_names == (dialect == "old")


async def test_crash_after_ready_is_detected(start_engine: StartEngine) -> None:
    engine = await start_engine("--standin-fail", "crash_after_ready:3")
    check = await verify_ready(engine.api, model=SERVED, retry_interval=0.2)
    assert check.ok, check.summary()
    watch = ServingWatch(engine.api, ready_at=engine.ready_at, health_fail_seconds=2.0, interval=0.3)
    crash = await asyncio.wait_for(watch.run(), 40)
    assert crash.reason == "health"
    # up for about 3 s before /health stopped answering
    assert 1.0 <= crash.ready_for <= 15.0
    text = crash.describe()
    assert text.startswith("crashed after ") and "/health failing" in text
    assert watch.stats.scrapes > 0


_STATS = re.compile(rb"Avg generation throughput: ([\d.]+) tokens/s, Running: (\d+) reqs")


async def test_the_serving_panel_agrees_with_the_engines_own_stats_line(start_engine: StartEngine) -> None:
    """Issue 15: what the serving panel shows (from /metrics) and what vLLM's stats line says in the log
    agree within one stats interval: requests running, and generation tokens per second."""
    interval = 2.0
    engine = await start_engine("--standin-stats-interval", str(interval))
    check = await verify_ready(engine.api, model=SERVED, retry_interval=0.2)
    assert check.ok, check.summary()
    events: list[Event] = []
    watch = ServingWatch(engine.api, ready_at=engine.ready_at, interval=0.25, window_seconds=interval)
    task = asyncio.create_task(watch.run(events.append))
    stamped: list[tuple[float, float, int]] = []   # (when the line arrived, tok/s, running)
    seen = len(engine.output)

    def read_stats() -> None:
        nonlocal seen
        now = time.monotonic()
        for m in _STATS.finditer(bytes(engine.output[seen:])):
            stamped.append((now, float(m.group(1)), int(m.group(2))))
        seen = len(engine.output)

    async def long_request(i: int) -> None:
        # ignore_eos: exactly max_tokens tokens, as vLLM's bench client asks (a request that lasts).
        body = {"model": SERVED, "messages": [{"role": "user", "content": f"Tell a long story, number {i}."}],
                "max_tokens": 100_000, "ignore_eos": True, "stream": True}
        async for _ in engine.api.chat_stream(body):
            pass

    load = asyncio.gather(*(long_request(i) for i in range(4)), return_exceptions=True)
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and sum(1 for s in stamped if s[2] == 4) < 3:
            read_stats()
            await asyncio.sleep(0.2)
    finally:
        load.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await load
        with contextlib.suppress(asyncio.CancelledError):
            await task
    busy = [s for s in stamped if s[2] == 4]
    assert len(busy) >= 3, f"the log's stats lines never showed the 4 requests: {stamped}"
    snaps = [(e.snapshot, e.snapshot.at) for e in events if isinstance(e, ServingSampled)]
    assert snaps
    # Compare each busy stats line (after the first, whose window starts before the load) with the panel's
    # newest snapshot at that moment.
    for arrived, log_tps, log_running in busy[1:]:
        wall = time.time() - (time.monotonic() - arrived)
        before = [s for s, at in snaps if at <= wall + 0.3]
        assert before, "no panel snapshot before the stats line"
        panel = before[-1]
        assert panel.requests_running == log_running
        assert panel.generation_tokens_per_s is not None
        assert abs(panel.generation_tokens_per_s - log_tps) <= 0.25 * log_tps + 1.0, (
            f"panel {panel.generation_tokens_per_s:.1f} tok/s vs the log's {log_tps:.1f}")
