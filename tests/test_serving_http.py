"""EngineApi, verify-ready and the serving watch against a small local HTTP server on loopback.

The server speaks the parts of vLLM's OpenAI server the dashboard uses (``/health``, ``/version``,
``/v1/models``, chat completions plain and streamed as server-sent events, ``/metrics`` in either
naming). The stand-in engine on the test bed is exercised in ``test_serving_testbed.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sparktui.domain.events import Event, Notice, ServingSampled
from sparktui.domain.readiness import Health
from sparktui.domain.serving import sample_from_text
from sparktui.remote.api_client import EngineApi, EngineApiError
from sparktui.remote.serving_watch import ServingWatch, verify_ready
from sparktui.remote.transport import LocalTransport
from tests.serving_profiles import EngineLoad, exposition, sample_load
from tests.waiting import wait_until

ANSWER = "Hello there, friend! How are you doing on this fine day today?"


@dataclass
class FakeEngine:
    """What the server answers; tests change it while it runs."""

    health_status: int = 200
    health_after: int = 0                  # answer 503 to the first N /health requests
    models: list[str] = field(default_factory=lambda: ["qwen3-32b"])
    chat_status: int = 200
    chat_error: str = ""
    token_delay: float = 0.005
    dialect: str = "new"
    load: EngineLoad = field(default_factory=sample_load)
    metrics: Callable[[], str] | None = None
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    health_calls: int = 0
    dead: bool = False                     # the process is gone: kept-alive connections drop too

    def metrics_text(self) -> str:
        return self.metrics() if self.metrics else exposition(self.dialect, self.load)


def _handler(engine: FakeEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _dead(self) -> bool:
            if engine.dead:
                self.close_connection = True
            return engine.dead

        def do_GET(self) -> None:
            if self._dead():
                return
            engine.requests.append(("GET", self.path, None))
            if self.path == "/health":
                engine.health_calls += 1
                status = 503 if engine.health_calls <= engine.health_after else engine.health_status
                self._send(status, b"")
            elif self.path == "/version":
                self._send(200, b'{"version": "0.33.0"}')
            elif self.path == "/v1/models":
                cards = [{"id": m, "object": "model", "owned_by": "vllm", "root": "/models/" + m,
                          "parent": None, "max_model_len": 32768} for m in engine.models]
                self._send(200, json.dumps({"object": "list", "data": cards}).encode())
            elif self.path == "/metrics":
                self._send(200, engine.metrics_text().encode(), "text/plain; version=1.0.0; charset=utf-8")
            else:
                self._send(404, b'{"detail": "Not Found"}')

        def do_POST(self) -> None:
            if self._dead():
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            engine.requests.append(("POST", self.path, body))
            if self.path == "/v1/chat/completions" and engine.chat_status != 200:
                err = {"error": {"message": engine.chat_error or "failed", "code": engine.chat_status}}
                self._send(engine.chat_status, json.dumps(err).encode())
                return
            if self.path == "/v1/completions":
                self._send(200, json.dumps({"choices": [{"text": "Hello", "index": 0}]}).encode())
                return
            if self.path != "/v1/chat/completions":
                self._send(404, b"{}")
                return
            words = ANSWER.split(" ")[: body.get("max_tokens", 16)]
            if not body.get("stream"):
                time.sleep(engine.token_delay)
                msg = {"choices": [{"index": 0, "message": {"role": "assistant", "content": words[0]},
                                    "finish_reason": "length"}]}
                self._send(200, json.dumps(msg).encode())
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(obj: Any) -> None:
                data = f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            chunk({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
            for i, word in enumerate(words):
                time.sleep(engine.token_delay)
                last = i == len(words) - 1
                chunk({"choices": [{"index": 0, "delta": {"content": word + ("" if last else " ")},
                                    "finish_reason": "length" if last else None}]})
            chunk({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": len(words),
                                            "total_tokens": 9 + len(words)}})
            chunk("[DONE]")
            self.wfile.write(b"0\r\n\r\n")

    return Handler


@dataclass
class LocalServer:
    engine: FakeEngine
    server: ThreadingHTTPServer

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.engine.dead = True
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def engine_server() -> Iterator[LocalServer]:
    engine = FakeEngine()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(engine))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    local = LocalServer(engine, server)
    yield local
    with contextlib.suppress(OSError):
        local.stop()


def _free_port() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = int(server.server_address[1])
    server.server_close()
    return port


# ---- the client -----------------------------------------------------------------------------------
async def test_health_states(engine_server: LocalServer) -> None:
    async with EngineApi(engine_server.url) as api:
        assert (await api.health()).ok
        engine_server.engine.health_status = 503
        h = await api.health()
        assert not h.ok and h.status == 503 and h.error == "HTTP 503"
    async with EngineApi(f"http://127.0.0.1:{_free_port()}") as api:
        h = await api.health()
        assert not h.ok and h.status is None and "connection refused" in h.error


async def test_models_version_and_metrics(engine_server: LocalServer) -> None:
    engine_server.engine.models = ["qwen3-32b", "alias"]
    async with EngineApi(engine_server.url) as api:
        assert await api.models() == ["qwen3-32b", "alias"]
        assert await api.version() == "0.33.0"
        sample = sample_from_text(await api.metrics_text())
        assert sample.counters["generation_tokens"] == 2415.0


async def test_errors_are_one_human_line(engine_server: LocalServer) -> None:
    engine_server.engine.chat_status = 500
    engine_server.engine.chat_error = "EngineCore died"
    async with EngineApi(engine_server.url) as api:
        with pytest.raises(EngineApiError, match=r"HTTP 500: EngineCore died") as info:
            await api.complete_tiny("qwen3-32b")
        assert info.value.status == 500


async def test_complete_tiny_measures_ttft(engine_server: LocalServer) -> None:
    engine_server.engine.token_delay = 0.05
    async with EngineApi(engine_server.url) as api:
        result = await api.complete_tiny("qwen3-32b")
    assert result.ttft_seconds >= 0.05
    assert result.text == "Hello"
    post = next(r for r in engine_server.engine.requests if r[0] == "POST")
    assert post[2]["max_tokens"] == 1 and post[1] == "/v1/chat/completions"


async def test_complete_tiny_falls_back_without_a_chat_template(engine_server: LocalServer) -> None:
    engine_server.engine.chat_status = 400
    engine_server.engine.chat_error = "chat template is not set"
    async with EngineApi(engine_server.url) as api:
        result = await api.complete_tiny("qwen3-32b")
    assert result.endpoint == "/v1/completions"


async def test_smoke_test_streams(engine_server: LocalServer) -> None:
    engine_server.engine.token_delay = 0.01
    async with EngineApi(engine_server.url) as api:
        result = await api.smoke_test("qwen3-32b", "Say hello in five words.", max_tokens=8)
    assert result.tokens == 8
    assert result.text == " ".join(ANSWER.split(" ")[:8])
    assert result.ttft_seconds is not None and result.ttft_seconds >= 0.01
    assert result.tokens_per_s is not None and 0 < result.tokens_per_s <= 1 / 0.01 * 1.5
    assert result.finish_reason == "length"
    assert result.first_words(3) == "Hello there, friend! …"
    assert "8 tokens" in result.summary() and "tok/s" in result.summary()
    body = next(r for r in engine_server.engine.requests if r[0] == "POST")[2]
    assert body["stream"] is True and body["max_tokens"] == 8


async def test_connect_through_the_local_transport(engine_server: LocalServer) -> None:
    transport = LocalTransport("head")
    await transport.connect()
    api = await EngineApi.connect(transport, "127.0.0.1", engine_server.port)
    try:
        assert (await api.health()).ok
    finally:
        await api.aclose()


# ---- verify-ready ---------------------------------------------------------------------------------
async def test_verify_ready_with_ttft(engine_server: LocalServer) -> None:
    engine_server.engine.health_after = 2       # the first polls race the server's accept loop
    async with EngineApi(engine_server.url) as api:
        check = await verify_ready(api, retry_interval=0.01)
    assert check.ok, check.summary()
    assert [s.name for s in check.steps] == ["health", "models", "completion"]
    assert check.ttft_seconds is not None and check.ttft_seconds > 0
    assert check.model_ids == ("qwen3-32b",)
    assert check.vllm_version == "0.33.0"
    assert check.summary().startswith("qwen3-32b answers, TTFT")


async def test_verify_ready_fails_at_the_completion(engine_server: LocalServer) -> None:
    engine_server.engine.chat_status = 500
    async with EngineApi(engine_server.url) as api:
        check = await verify_ready(api, retry_interval=0.01)
    assert not check.ok
    assert check.failed_step is not None and check.failed_step.name == "completion"
    assert "HTTP 500" in check.summary()


async def test_verify_ready_gives_up_when_health_never_answers() -> None:
    async with EngineApi(f"http://127.0.0.1:{_free_port()}") as api:
        check = await verify_ready(api, wait_seconds=0.2, retry_interval=0.05)
    assert not check.ok and check.failed_step is not None and check.failed_step.name == "health"
    assert "connection refused" in check.summary()


# ---- the watch ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dialect", ["new", "old"])
async def test_watch_posts_snapshots_then_detects_a_crash(engine_server: LocalServer, dialect: str) -> None:
    engine = engine_server.engine
    engine.dialect = dialect
    tokens = iter(range(1000, 10**6, 500))

    def metrics() -> str:
        return exposition(dialect, EngineLoad(running=1, generation_tokens=next(tokens), kv_usage=0.25))

    engine.metrics = metrics
    events: list[Event] = []
    async with EngineApi(engine_server.url) as api:
        watch = ServingWatch(api, ready_at=time.monotonic(), health_fail_seconds=0.3, interval=0.05,
                             window_seconds=1.0)
        task = asyncio.create_task(watch.run(events.append))
        await wait_until(lambda: watch.stats.scrapes >= 4, "four scrapes")
        engine.health_status = 503
        crash = await asyncio.wait_for(task, 5.0)
    snaps = [e.snapshot for e in events if isinstance(e, ServingSampled)]
    assert len(snaps) >= 4
    assert snaps[-1].kv_cache_usage_percent == pytest.approx(25.0)
    assert snaps[-1].generation_tokens_per_s is not None and snaps[-1].generation_tokens_per_s > 0
    expected = "vllm:kv_cache_usage_perc" if dialect == "new" else "vllm:gpu_cache_usage_perc"
    assert snaps[-1].sources["kv_cache_usage"] == expected
    assert crash.reason == "health" and "HTTP 503" in crash.detail
    assert crash.describe().startswith("crashed after ")
    assert any(isinstance(e, Notice) and e.severity == "warning" for e in events)
    assert watch.last_verdict.health is Health.CRASHED


async def test_watch_server_gone_is_a_crash(engine_server: LocalServer) -> None:
    async with EngineApi(engine_server.url) as api:
        watch = ServingWatch(api, ready_at=time.monotonic(), health_fail_seconds=0.2, interval=0.05)
        verdict, snap = await watch.poll_once()
        assert verdict.health is Health.HEALTHY and snap is not None
        engine_server.stop()
        crash = await asyncio.wait_for(watch.run(), 5.0)
    assert "connection refused" in crash.detail


async def test_watch_process_gone_is_a_crash_at_once(engine_server: LocalServer) -> None:
    alive = True

    async def process_alive() -> bool:
        return alive

    async with EngineApi(engine_server.url) as api:
        # (While /health answers the process is looked for every process_check_seconds.)
        watch = ServingWatch(api, ready_at=time.monotonic(), health_fail_seconds=60, interval=0.05,
                             process_alive=process_alive, process_check_seconds=0.2)
        assert (await watch.poll_once())[0].health is Health.HEALTHY
        alive = False
        crash = await asyncio.wait_for(watch.run(), 5.0)
    assert crash.reason == "process_exited"


async def test_watch_looks_for_the_process_seldom_while_health_answers(engine_server: LocalServer) -> None:
    checks: list[float] = []

    async def process_alive() -> bool:
        checks.append(time.monotonic())
        return True

    async with EngineApi(engine_server.url) as api:
        watch = ServingWatch(api, ready_at=time.monotonic(), health_fail_seconds=60, interval=0.01,
                             process_alive=process_alive, process_check_seconds=0.5)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.2:
            await watch.poll_once()
        polls = watch.stats.polls
        assert polls > 10 and 2 <= len(checks) <= 3 and len(checks) == watch.stats.process_checks
        engine_server.stop()   # /health fails from now on: the process is looked for on every poll
        before = len(checks)
        for _ in range(3):
            await watch.poll_once()
    assert len(checks) == before + 3


async def test_an_unchanged_scrape_is_not_parsed_again(engine_server: LocalServer) -> None:
    # An idle engine: every scrape the same (vLLM's counters' ``_created`` stamps are fixed at start).
    idle = exposition("new", EngineLoad(kv_usage=0.25))
    engine_server.engine.metrics = lambda: idle
    async with EngineApi(engine_server.url) as api:
        watch = ServingWatch(api, ready_at=time.monotonic(), interval=0.01)
        snaps = [(await watch.poll_once())[1] for _ in range(3)]
        assert watch.reader.parses == 1 and watch.stats.scrapes == 3
        assert all(s is not None and s.kv_cache_usage_percent == snaps[0].kv_cache_usage_percent
                   for s in snaps)  # type: ignore[union-attr]
        engine_server.engine.metrics = lambda: exposition("new", EngineLoad(running=2, kv_usage=0.5))
        snap = (await watch.poll_once())[1]
    assert watch.reader.parses == 2 and snap is not None and snap.requests_running == 2


async def test_watch_survives_a_bad_metrics_body(engine_server: LocalServer) -> None:
    engine_server.engine.metrics = lambda: "vllm:num_requests_running{engine= not prometheus\n"
    async with EngineApi(engine_server.url) as api:
        watch = ServingWatch(api, ready_at=time.monotonic(), interval=0.05)
        verdict, snap = await watch.poll_once()
    assert verdict.health is Health.HEALTHY and snap is None
    assert watch.stats.scrape_errors == 1 and "not Prometheus" in watch.stats.last_scrape_error


async def test_watch_warns_once_about_a_stalled_engine(engine_server: LocalServer) -> None:
    # one request running, and the generation counter never moves
    engine_server.engine.metrics = lambda: exposition("new", EngineLoad(running=1, generation_tokens=10))
    events: list[Event] = []
    async with EngineApi(engine_server.url) as api:
        watch = ServingWatch(api, ready_at=time.monotonic(), interval=0.05, stall_notice_seconds=0.3)
        task = asyncio.create_task(watch.run(events.append))
        await wait_until(lambda: any(isinstance(e, Notice) for e in events), "the stall notice")
        scrapes = watch.stats.scrapes   # the stall goes on: the watch scrapes on, and says nothing more
        await wait_until(lambda: watch.stats.scrapes >= scrapes + 6, "six scrapes after the notice")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and "no token generated" in notices[0].message
