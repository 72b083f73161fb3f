"""Runs a benchmark sweep against the engine and records the nodes' GPU power meanwhile.

Two clients, one result shape (``sparktui.domain.bench.LevelResult``):

- the built-in one: ``EngineApi.chat_stream`` through the head's SSH port forward, ``c`` workers taking
  requests from one queue, each request's TTFT and inter-token gaps timed on arrival of its chunks;
- vLLM's own ``vllm bench serve`` inside the head container (or on the head for ``runtime = "host"``),
  one run per level with ``--max-concurrency c``, its result block parsed (the ecosystem's numbers).

``PowerRecorder`` streams each node's probe for the run's duration (the same probe and channel the
dashboard uses); samples carry the controller's arrival time, so they share the sweep's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sparktui.config import EngineConfig, NodeConfig
from sparktui.domain.bench import (
    PERCENTILES,
    BenchPlan,
    LevelResult,
    PowerPoint,
    RequestResult,
    StreamTimer,
    level_from_vllm_bench,
    parse_vllm_bench_output,
    power_series,
    summarize_level,
)
from sparktui.domain.telemetry import Sample
from sparktui.remote.api_client import EngineApi, EngineApiError
from sparktui.remote.transport import Transport, TransportError

#: Progress callback: (level's concurrency, requests done in the level, requests of the level).
Progress = Callable[[int, int, int], None]


class PowerSource(Protocol):
    def series(self) -> Mapping[str, Sequence[PowerPoint]]: ...


class PowerRecorder:
    """Collects every node's probe samples from ``start()`` until ``stop()``."""

    def __init__(self, nodes: Mapping[str, tuple[Transport, NodeConfig]], engine: EngineConfig | None = None,
                 interval: float = 1.0, env: Mapping[str, str] | None = None) -> None:
        self.nodes = dict(nodes)
        self.engine = engine
        self.interval = interval
        self.env = dict(env) if env else None
        self.samples: dict[str, list[Sample]] = {name: [] for name in self.nodes}
        self._tasks: list[asyncio.Task[None]] = []

    async def _collect(self, name: str) -> None:
        from sparktui.remote.probe_runner import engine_probe_args, stream_samples

        transport, node = self.nodes[name]
        extra = engine_probe_args(self.engine) if self.engine is not None else []
        prefix = self.engine.name_prefix if self.engine is not None else "sparktui"
        async for sample in stream_samples(transport, node, self.interval, name_prefix=prefix,
                                           extra_args=extra, env=self.env):
            self.samples[name].append(sample)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._collect(name)) for name in self.nodes]

    async def wait_first(self, timeout: float = 15.0) -> None:
        """Until every node has sent a sample (or ``timeout``): the sweep's first window needs one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(self.samples.values()):
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    def series(self) -> dict[str, list[PowerPoint]]:
        """Each node's (arrival time, watts); nodes without known GPU power have an empty series."""
        return {name: power_series(samples) for name, samples in self.samples.items()}


@dataclass
class SweepOutcome:
    levels: list[LevelResult] = field(default_factory=list)
    interrupted: bool = False


# ---- the built-in client --------------------------------------------------------------------------
async def timed_request(api: EngineApi, model: str, prompt: str, max_tokens: int) -> RequestResult:
    """One streaming chat completion, timed as vLLM's bench client does; never raises for the engine's
    errors (they are a failed request)."""
    body = {
        "model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
        "temperature": 0, "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True},
    }
    timer = StreamTimer(time.monotonic())
    usage_out: int | None = None
    usage_in = 0
    try:
        async for event in api.chat_stream(body):
            usage = event.get("usage")
            if isinstance(usage, dict):
                if isinstance(usage.get("completion_tokens"), int):
                    usage_out = usage["completion_tokens"]
                if isinstance(usage.get("prompt_tokens"), int):
                    usage_in = usage["prompt_tokens"]
            for choice in event.get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    timer.token(time.monotonic())
    except EngineApiError as exc:
        return RequestResult(timer.started, time.monotonic(), False, error=str(exc))
    return timer.result(time.monotonic(), usage_out, usage_in)


async def run_level(api: EngineApi, model: str, plan: BenchPlan, concurrency: int,
                    results: list[RequestResult], *, first_index: int = 0,
                    on_progress: Progress | None = None) -> None:
    """One level: ``plan.requests_for(c)`` requests, ``c`` at a time; results appended as they finish (so
    a cancelled level keeps what finished)."""
    total = plan.requests_for(concurrency)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(total):
        queue.put_nowait(first_index + i)

    async def worker() -> None:
        while True:
            try:
                index = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            results.append(await timed_request(api, model, plan.prompt(index), plan.output_len))
            if on_progress is not None:
                on_progress(concurrency, len(results), total)

    workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, total))]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()


async def run_builtin_sweep(
    api: EngineApi, model: str, plan: BenchPlan, *, power: PowerSource | None = None,
    on_progress: Progress | None = None, on_level: Callable[[LevelResult], None] | None = None,
) -> SweepOutcome:
    """Warm-up requests (not counted), then each level in turn. Cancelled (Ctrl-C), it returns what was
    measured, the running level marked partial."""
    outcome = SweepOutcome()
    index = 0
    try:
        for _ in range(plan.warmup):
            await timed_request(api, model, plan.prompt(10_000_000 + index), plan.output_len)
            index += 1
        for c in plan.concurrency:
            results: list[RequestResult] = []
            try:
                await run_level(api, model, plan, c, results, first_index=index, on_progress=on_progress)
            except asyncio.CancelledError:
                if results:
                    outcome.levels.append(summarize_level(c, results, requests=plan.requests_for(c),
                                                          power=power.series() if power else None,
                                                          partial=True))
                raise
            index += plan.requests_for(c)
            level = summarize_level(c, results, power=power.series() if power else None)
            outcome.levels.append(level)
            if on_level is not None:
                on_level(level)
    except asyncio.CancelledError:
        outcome.interrupted = True
    return outcome


# ---- vLLM's own tool ------------------------------------------------------------------------------
def vllm_bench_argv(vllm: Sequence[str], *, base_url: str, model: str, plan: BenchPlan, concurrency: int,
                    tokenizer: str | None = None, warmups: bool = True) -> list[str]:
    """``vllm bench serve`` for one level, random prompts of the plan's lengths, percentiles we report.
    ``warmups``: this vLLM has ``--num-warmups`` (newer releases; older ones run one test prompt)."""
    argv = [
        *vllm, "bench", "serve", "--backend", "openai-chat", "--base-url", base_url,
        "--endpoint", "/v1/chat/completions", "--model", model,
        "--dataset-name", "random", "--random-input-len", str(plan.input_len),
        "--random-output-len", str(plan.output_len), "--num-prompts", str(plan.requests_for(concurrency)),
        "--max-concurrency", str(concurrency), "--ignore-eos",
        "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", ",".join(map(str, PERCENTILES)),
        "--disable-tqdm",
    ]
    if warmups:
        argv += ["--num-warmups", str(plan.warmup)]
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    return argv


async def vllm_bench_help(transport: Transport, wrap: Callable[[Sequence[str]], list[str]],
                          vllm: Sequence[str]) -> str | None:
    """``vllm bench serve --help`` when this vLLM has the tool with ``--max-concurrency`` (0.10+; the
    old ``benchmarks/`` scripts are not in the images), else ``None``."""
    try:
        res = await transport.run(wrap([*vllm, "bench", "serve", "--help"]), timeout=60)
    except TransportError:
        return None
    return res.stdout if res.returncode == 0 and "--max-concurrency" in res.stdout else None


async def has_vllm_bench(transport: Transport, wrap: Callable[[Sequence[str]], list[str]],
                         vllm: Sequence[str]) -> bool:
    return await vllm_bench_help(transport, wrap, vllm) is not None


class VllmBenchError(Exception):
    pass


async def run_vllm_bench_sweep(
    transport: Transport, wrap: Callable[[Sequence[str]], list[str]], vllm: Sequence[str], *,
    base_url: str, model: str, plan: BenchPlan, tokenizer: str | None = None,
    power: PowerSource | None = None, on_progress: Progress | None = None,
    on_level: Callable[[LevelResult], None] | None = None, warmups: bool = True,
) -> SweepOutcome:
    """Each level is one ``vllm bench serve`` run on the head; its own warm-up (``--num-warmups``)."""
    outcome = SweepOutcome()
    try:
        for c in plan.concurrency:
            argv = wrap(vllm_bench_argv(vllm, base_url=base_url, model=model, plan=plan, concurrency=c,
                                        tokenizer=tokenizer, warmups=warmups))
            if on_progress is not None:
                on_progress(c, 0, plan.requests_for(c))
            t0 = time.monotonic()
            res = await transport.run(argv, timeout=3600)
            t1 = time.monotonic()
            figures = parse_vllm_bench_output(res.stdout)
            if res.returncode != 0 or not figures:
                tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
                raise VllmBenchError(f"`{shlex.join(argv[:6])} …` exited {res.returncode}: "
                                     + " | ".join(tail))
            level = level_from_vllm_bench(c, figures, requests=plan.requests_for(c),
                                          power=power.series() if power else None, window=(t0, t1))
            outcome.levels.append(level)
            if on_progress is not None:
                on_progress(c, level.completed, plan.requests_for(c))
            if on_level is not None:
                on_level(level)
    except asyncio.CancelledError:
        outcome.interrupted = True
    return outcome
