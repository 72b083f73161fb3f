"""Async HTTP to the vLLM OpenAI server, reached through the head node's transport.

``EngineApi.connect(transport, host, port)`` asks the transport for a local port forwarded to
``host:port`` as seen from the node (an SSH ``direct-tcpip`` forward on the head's existing connection;
the local transport returns the port itself), so the API port never has to be open to the dashboard's
machine. Everything here is ``httpx`` (async, streaming), and every call has a timeout: a wedged
engine must show up as a failing check, not as a dashboard that hangs.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from sparktui.domain.serving import MetricsScrape
from sparktui.remote.transport import Transport

#: The readiness probe's prompt: tiny, and answerable by any chat model.
TINY_PROMPT = "Hi"


class EngineApiError(Exception):
    """The server could not be reached or answered with an error; ``str()`` is one human line."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class HealthResult:
    ok: bool
    seconds: float
    status: int | None = None      # HTTP status; None when nothing answered
    error: str = ""                # "HTTP 503", "connection refused", "timed out after 5s" …


@dataclass(frozen=True)
class CompletionResult:
    model: str
    ttft_seconds: float            # request sent → first token (the whole answer with max_tokens 1)
    seconds: float
    text: str
    endpoint: str                  # "/v1/chat/completions" or "/v1/completions"


@dataclass(frozen=True)
class SmokeResult:
    """One streaming request: how fast the engine answers and the start of what it said."""

    model: str
    text: str
    tokens: int
    ttft_seconds: float | None
    seconds: float
    #: decode speed: tokens after the first / time after the first token
    tokens_per_s: float | None
    finish_reason: str | None = None

    def first_words(self, count: int = 12) -> str:
        words = self.text.split()
        head = " ".join(words[:count])
        return head + (" …" if len(words) > count else "")

    def summary(self) -> str:
        speed = f"{self.tokens_per_s:.1f} tok/s" if self.tokens_per_s is not None else "– tok/s"
        ttft = f"TTFT {self.ttft_seconds:.2f}s" if self.ttft_seconds is not None else "no token"
        return f"{self.tokens} tokens in {self.seconds:.1f}s, {speed}, {ttft}: “{self.first_words()}”"


def _root_cause(exc: BaseException) -> BaseException:
    """httpx wraps the OS error ("All connection attempts failed"); the chain holds the real one."""
    seen = {id(exc)}
    while True:
        nxt = exc.__cause__ or exc.__context__
        if nxt is None or id(nxt) in seen:
            return exc
        seen.add(id(nxt))
        exc = nxt


def _describe(exc: Exception, url: str, timeout: float | None = None) -> str:
    if isinstance(exc, httpx.ConnectError):
        root = _root_cause(exc)
        if isinstance(root, ConnectionRefusedError) or "refused" in str(exc).lower():
            return f"connection refused ({url})"
        return f"cannot connect ({url}): {root if root is not exc else exc}"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout:g}s ({url})" if timeout else f"timed out ({url})"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        # Through an SSH forward a dead server looks like this: the local side accepts, the far side
        # cannot connect, and the channel closes without a byte.
        detail = str(exc) or "closed without an answer"
        return f"connection dropped ({url}): {detail}"
    return f"{type(exc).__name__}: {exc} ({url})"


def _http_error(response: httpx.Response, body: str) -> EngineApiError:
    detail = body.strip().replace("\n", " ")
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            err = data.get("error", data.get("message", data.get("detail")))
            if isinstance(err, dict):
                err = err.get("message", err)
            if err:
                detail = str(err)
    except ValueError:
        pass
    text = f"HTTP {response.status_code}"
    if detail:
        text += f": {detail[:300]}"
    return EngineApiError(text, response.status_code)


class EngineApi:
    """One vLLM server. Use as ``async with EngineApi(...)`` or call ``aclose()``."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        health_timeout: float = 5.0,
        completion_timeout: float = 300.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.health_timeout = health_timeout
        self.completion_timeout = completion_timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # trust_env=False: a desktop's HTTP_PROXY must not capture a loopback port forward.
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout,
                                         trust_env=False)

    @classmethod
    async def connect(
        cls, transport: Transport, host: str = "127.0.0.1", port: int = 8000, **kwargs: Any
    ) -> EngineApi:
        """Through ``transport`` (the head node's): ``host:port`` is the API server as seen from that node."""
        local_port = await transport.forward_port(host, port)
        return cls(f"http://127.0.0.1:{local_port}", **kwargs)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> EngineApi:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- plain GETs ----------------------------------------------------------------------------------
    async def _get(self, path: str, timeout: float | None = None) -> httpx.Response:
        url = self.base_url + path
        try:
            response = await self._client.get(path, timeout=timeout or self.timeout)
        except httpx.HTTPError as exc:
            raise EngineApiError(_describe(exc, url, timeout or self.timeout)) from exc
        if response.status_code >= 400:
            raise _http_error(response, response.text)
        return response

    async def health(self) -> HealthResult:
        """``GET /health``; never raises. 200 = healthy; vLLM answers 500/503 once the engine died."""
        t0 = time.monotonic()
        try:
            response = await self._client.get("/health", timeout=self.health_timeout)
        except httpx.HTTPError as exc:
            return HealthResult(False, time.monotonic() - t0, None,
                                _describe(exc, self.base_url + "/health", self.health_timeout))
        ok = response.status_code == 200
        return HealthResult(ok, time.monotonic() - t0, response.status_code,
                            "" if ok else f"HTTP {response.status_code}")

    async def version(self) -> str | None:
        """``GET /version`` (every vLLM release has it); ``None`` when absent."""
        try:
            data = (await self._get("/version")).json()
        except (EngineApiError, ValueError):
            return None
        return str(data["version"]) if isinstance(data, dict) and "version" in data else None

    async def models(self) -> list[str]:
        """The served model names (``/v1/models`` ids), base models before LoRA adapters."""
        response = await self._get("/v1/models")
        try:
            data = response.json()
            cards = data["data"]
            return [str(c["id"]) for c in sorted(cards, key=lambda c: c.get("parent") is not None)]
        except (ValueError, KeyError, TypeError) as exc:
            raise EngineApiError(f"/v1/models: unexpected answer: {response.text[:200]}") from exc

    async def metrics_text(self) -> str:
        """``GET /metrics``: Prometheus text. No ``Accept`` for OpenMetrics (≤0.7 would switch format)."""
        return (await self._get("/metrics")).text

    async def metrics_scrape(self) -> MetricsScrape:
        """``GET /metrics``, as the serving watch reads it."""
        return MetricsScrape(await self.metrics_text())

    # -- generation ----------------------------------------------------------------------------------
    async def complete_tiny(self, model: str, prompt: str = TINY_PROMPT) -> CompletionResult:
        """One chat completion with ``max_tokens`` 1: proof the engine can generate, and its TTFT.

        A model without a chat template makes newer vLLM answer 400 on the chat route; then the plain
        completions route is used.
        """
        chat = {"model": model, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": 1, "temperature": 0}
        t0 = time.monotonic()
        try:
            data = await self._post_json("/v1/chat/completions", chat)
            endpoint = "/v1/chat/completions"
            text = str(((data.get("choices") or [{}])[0].get("message") or {}).get("content") or "")
        except EngineApiError as exc:
            if exc.status not in (400, 404):
                raise
            t0 = time.monotonic()
            plain = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0}
            data = await self._post_json("/v1/completions", plain)
            endpoint = "/v1/completions"
            text = str((data.get("choices") or [{}])[0].get("text") or "")
        seconds = time.monotonic() - t0
        return CompletionResult(model, seconds, seconds, text, endpoint)

    async def _post_json(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        url = self.base_url + path
        try:
            response = await self._client.post(path, json=body, timeout=self.completion_timeout)
        except httpx.HTTPError as exc:
            raise EngineApiError(_describe(exc, url, self.completion_timeout)) from exc
        if response.status_code >= 400:
            raise _http_error(response, response.text)
        try:
            data = response.json()
        except ValueError as exc:
            raise EngineApiError(f"{path}: not JSON: {response.text[:200]}") from exc
        if not isinstance(data, dict):
            raise EngineApiError(f"{path}: unexpected answer: {response.text[:200]}")
        return data

    async def _stream_events(self, path: str, body: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Server-sent events of a streaming completion, as JSON objects, until ``[DONE]``."""
        url = self.base_url + path
        try:
            request = self._client.stream("POST", path, json=body, timeout=self.completion_timeout)
            async with request as response:
                if response.status_code >= 400:
                    raise _http_error(response, (await response.aread()).decode("utf-8", "replace"))
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        return
                    try:
                        event = json.loads(payload)
                    except ValueError:
                        continue
                    if isinstance(event, dict):
                        if "error" in event:
                            err = event["error"]
                            message = err.get("message", err) if isinstance(err, dict) else err
                            raise EngineApiError(str(message))
                        yield event
        except httpx.HTTPError as exc:
            raise EngineApiError(_describe(exc, url, self.completion_timeout)) from exc

    def chat_stream(self, body: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """The events of one streaming ``/v1/chat/completions`` request (``body`` as sent)."""
        return self._stream_events("/v1/chat/completions", body)

    async def smoke_test(self, model: str, prompt: str, max_tokens: int = 32) -> SmokeResult:
        """One streaming chat completion with a fixed prompt: tokens/s, TTFT and the first words."""
        body = {
            "model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True,
            # vLLM adds a final chunk with token counts; chunks are not always one token each.
            "stream_options": {"include_usage": True},
        }
        t0 = time.monotonic()
        first: float | None = None
        last: float | None = None
        parts: list[str] = []
        chunks = 0
        usage_tokens: int | None = None
        finish: str | None = None
        async for event in self._stream_events("/v1/chat/completions", body):
            usage = event.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                usage_tokens = usage["completion_tokens"]
            for choice in event.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    now = time.monotonic()
                    first = now if first is None else first
                    last = now
                    chunks += 1
                    parts.append(str(content))
                finish = choice.get("finish_reason") or finish
        seconds = time.monotonic() - t0
        tokens = usage_tokens if usage_tokens is not None else chunks
        rate: float | None = None
        if first is not None and last is not None and last > first and tokens > 1:
            rate = (tokens - 1) / (last - first)
        return SmokeResult(model, "".join(parts), tokens, None if first is None else first - t0, seconds,
                           rate, finish)
