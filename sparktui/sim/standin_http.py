"""The stand-in engine's OpenAI-compatible HTTP front-end (standard library only).

Routes and bodies follow what vLLM's FastAPI app answers (reference: vllm-metrics.md §7):
``/health`` (200, empty), ``/ping``, ``/version``, ``/load``, ``/v1/models`` (ModelList with
``max_model_len``), ``/metrics`` (Prometheus text) and a minimal ``/v1/chat/completions``
(JSON, or SSE chunks ending in ``data: [DONE]`` when ``stream`` is true). Like vLLM, the listening
socket is bound at start-up but only starts accepting once the engine is ready, so until then every
request is refused.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sparktui.sim.standin_load import LoadShape
from sparktui.sim.standin_metrics import METRICS_CONTENT_TYPE, FinishedRequest, ServingMetrics

# The stand-in's "model" always answers with this text, one word per token.
ANSWER = [
    "Hello!",
    "I",
    "am",
    "a",
    "stand-in",
    "for",
    "a",
    "vLLM",
    "engine",
    "spread",
    "over",
    "two",
    "DGX",
    "Spark",
    "nodes.",
    "Every",
    "word",
    "you",
    "read",
    "here",
    "was",
    "sent",
    "as",
    "its",
    "own",
    "token,",
    "so",
    "the",
    "dashboard",
    "can",
    "time",
    "them.",
]


@dataclass
class ServedModel:
    served_names: list[str]
    root: str
    max_model_len: int
    version: str
    metrics: ServingMetrics
    access_log: Callable[[str], None]
    seen_prompts: set[str] = field(default_factory=set)
    engine_check: Callable[[], str | None] = lambda: None
    """Run before generating; returns an error text when the engine can no longer generate."""
    load: LoadShape = field(default_factory=LoadShape.from_env)
    """Token rate and latency as functions of the streams generating at once (``standin_load``)."""


class StandinHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    #: uvicorn listens with a backlog of 2048; socketserver's 5 resets a burst of concurrent clients.
    request_queue_size = 2048

    def __init__(self, host: str, port: int, model: ServedModel) -> None:
        self.model = model
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.address_family = family
        super().__init__((host, port), _Handler, bind_and_activate=False)
        self._thread: threading.Thread | None = None

    def bind_early(self) -> None:
        """Bind now (vLLM does this before the engine starts, so a busy port fails fast)."""
        self.server_bind()

    def start_serving(self) -> None:
        self.server_activate()
        self._thread = threading.Thread(target=self.serve_forever, name="standin-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=2)
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: StandinHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    # -- plumbing -----------------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        pass  # uvicorn's access log is written by _access()

    def _access(self, status: int) -> None:
        host, port = self.client_address[:2]
        phrase = HTTPStatus(status).phrase
        self.server.model.access_log(
            f'INFO:     {host}:{port} - "{self.command} {self.path} HTTP/1.1" {status} {phrase}'
        )

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        if body or status != 200 or content_type != "application/json":
            self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        # Logged as the response starts (as uvicorn does), before the client can see it: a client's next
        # request is never logged ahead of this one.
        self._access(status)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> int:
        body = json.dumps(obj, separators=(",", ":")).encode()
        self._send(status, body)
        return len(body)

    def _error(self, status: int, message: str, kind: str) -> int:
        return self._json(
            status, {"object": "error", "message": message, "type": kind, "param": None, "code": status}
        )

    def _route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    # -- routes -------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        started = time.monotonic()
        route = self._route()
        model = self.server.model
        status, sent = 200, 0
        if route in ("/health", "/ping"):
            self._send(200, b"")
        elif route == "/metrics":
            self._send(200, model.metrics.exposition(), METRICS_CONTENT_TYPE)
        elif route == "/version":
            sent = self._json(200, {"version": model.version})
        elif route == "/load":
            sent = self._json(200, {"server_load": 0})
        elif route == "/v1/models":
            sent = self._json(200, _model_list(model))
        elif route == "/v1/chat/completions":
            status, sent = 405, self._json(405, {"detail": "Method Not Allowed"})
        else:
            status, sent = 404, self._json(404, {"detail": "Not Found"})
        model.metrics.http_request(route, "GET", status, 0, sent, time.monotonic() - started)

    def do_POST(self) -> None:
        started = time.monotonic()
        route = self._route()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        model = self.server.model
        status, sent = 200, 0
        if route == "/ping":
            self._send(200, b"")
            return
        if route != "/v1/chat/completions":
            sent = self._json(404, {"detail": "Not Found"})
            return
        try:
            request = json.loads(raw or b"null")
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise ValueError("messages: field required")
        except (ValueError, json.JSONDecodeError) as exc:
            sent = self._error(400, str(exc), "BadRequestError")
            model.metrics.http_request(route, "POST", 400, length, sent, time.monotonic() - started)
            return
        name = request.get("model") or model.served_names[0]
        if name not in model.served_names:
            sent = self._error(404, f"The model `{name}` does not exist.", "NotFoundError")
            model.metrics.http_request(route, "POST", 404, length, sent, time.monotonic() - started)
            return
        failure = model.engine_check()
        if failure is not None:
            sent = self._error(500, failure, "InternalServerError")
            model.metrics.http_request(route, "POST", 500, length, sent, time.monotonic() - started)
            return
        if model.metrics.wedged.is_set():
            # A wedged engine takes the request and never answers (it counts as running).
            model.metrics.request_started()
            while True:
                time.sleep(3600)
        sent = self._complete(request, name)
        model.metrics.http_request(route, "POST", status, length, sent, time.monotonic() - started)

    # -- chat completion ----------------------------------------------------------------------------
    def _complete(self, request: dict[str, Any], name: str) -> int:
        model = self.server.model
        arrival = time.monotonic()
        prompt_text = json.dumps(request["messages"], sort_keys=True)
        prompt_tokens = _prompt_tokens(request["messages"])
        max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
        limit = int(max_tokens) if max_tokens else len(ANSWER)
        if request.get("ignore_eos"):
            # vLLM's bench client asks for exactly max_tokens tokens this way; the answer repeats.
            words = list(itertools.islice(itertools.cycle(ANSWER), max(0, limit)))
            finish = "length"
        else:
            words = ANSWER[: max(0, limit)]
            finish = "length" if limit < len(ANSWER) else "stop"
        cached = prompt_tokens if prompt_text in model.seen_prompts else 0
        model.seen_prompts.add(prompt_text)
        model.metrics.request_started()
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        token_times: list[float] = []   # when each token was produced
        recorded = False

        def record_finished() -> None:
            # Counted before the answer's end goes out, as vLLM counts a request when its output is made: a
            # client that scrapes /metrics right after its answer sees it (the server is threaded).
            nonlocal recorded
            if recorded:
                return
            recorded = True
            done = time.monotonic()
            first_token_at = token_times[0] if token_times else done
            itl = [b - a for a, b in itertools.pairwise(token_times)]
            model.metrics.request_finished(
                FinishedRequest(
                    prompt_tokens=prompt_tokens,
                    generation_tokens=len(words),
                    max_tokens=limit,
                    cached_prompt_tokens=cached,
                    queue_seconds=0.0005,
                    ttft_seconds=first_token_at - arrival,
                    itl_seconds=itl,
                    e2e_seconds=done - arrival,
                    finished_reason=finish,
                )
            )

        try:
            if request.get("stream"):
                with model.load.stream():
                    sent = self._stream(request, name, rid, created, words, finish, prompt_tokens,
                                        token_times, record_finished)
            else:
                with model.load.stream():
                    token_times.extend(model.load.pace(len(words)))
                record_finished()
                usage = _usage(prompt_tokens, len(words))
                sent = self._json(
                    200,
                    {
                        "id": rid,
                        "object": "chat.completion",
                        "created": created,
                        "model": name,
                        "choices": [
                            {
                                "index": 0,
                                "message": {
                                    "role": "assistant",
                                    "reasoning_content": None,
                                    "content": " ".join(words),
                                    "tool_calls": [],
                                },
                                "logprobs": None,
                                "finish_reason": finish,
                                "stop_reason": None,
                            }
                        ],
                        "usage": usage,
                        "prompt_logprobs": None,
                    },
                )
        finally:
            record_finished()
        return sent

    def _stream(
        self,
        request: dict[str, Any],
        name: str,
        rid: str,
        created: int,
        words: list[str],
        finish: str,
        prompt_tokens: int,
        token_times: list[float],
        finished: Callable[[], None],
    ) -> int:
        """``finished``: called once the last token is made, before the choice's end is sent."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self._access(200)
        self.end_headers()
        sent = 0

        def chunk(delta: dict[str, Any], finish_reason: str | None) -> None:
            nonlocal sent
            sent += self._event(
                {
                    "id": rid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": name,
                    "choices": [
                        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                    ],
                }
            )

        chunk({"role": "assistant", "content": ""}, None)
        for i, at in enumerate(self.server.model.load.pace(len(words))):
            token_times.append(at)
            chunk({"content": (" " if i else "") + words[i]}, None)
        finished()
        chunk({}, finish)  # vLLM ends a choice with an empty delta carrying finish_reason
        options = request.get("stream_options") or {}
        if options.get("include_usage"):
            sent += self._event(
                {
                    "id": rid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": name,
                    "choices": [],
                    "usage": _usage(prompt_tokens, len(words)),
                }
            )
        sent += self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")
        return sent

    def _event(self, obj: dict[str, Any]) -> int:
        return self._write_chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")

    def _write_chunk(self, data: bytes) -> int:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
        return len(data)


def _prompt_tokens(messages: list[Any]) -> int:
    # Roughly what a chat template adds: a few tokens of framing per message, one per word of content.
    total = 2
    for message in messages:
        content = message.get("content", "") if isinstance(message, dict) else ""
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        total += 4 + len(str(content).split())
    return total


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def _model_list(model: ServedModel) -> dict[str, Any]:
    now = int(time.time())
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": now,
                "owned_by": "vllm",
                "root": model.root,
                "parent": None,
                "max_model_len": model.max_model_len,
                "permission": [
                    {
                        "id": f"modelperm-{uuid.uuid4().hex}",
                        "object": "model_permission",
                        "created": now,
                        "allow_create_engine": False,
                        "allow_sampling": True,
                        "allow_logprobs": True,
                        "allow_search_indices": False,
                        "allow_view": True,
                        "allow_fine_tuning": False,
                        "organization": "*",
                        "group": None,
                        "is_blocking": False,
                    }
                ],
            }
            for name in model.served_names
        ],
    }
